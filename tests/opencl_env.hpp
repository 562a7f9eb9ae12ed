// The test suite's OpenCL device: a GPU if there is one, else the first device (PoCL in CI).
// Finding no platform is a test failure, never a skip.
#pragma once

// Nothing here in a build without OpenCL (CLPOOL_WITH_OPENCL=OFF): a suite
// that includes it compiles its OpenCL cases out with CLPOOL_HAS_OPENCL.
#include <clpool/core/has_opencl.hpp>
#ifdef CLPOOL_HAS_OPENCL

#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace clpool::test {

struct OpenCLEnv {
    cl::Context context;
    cl::Device device;
    cl::CommandQueue queue;
    std::string description;

    static OpenCLEnv& get() {
        static OpenCLEnv* env = new OpenCLEnv(make());  // never destroyed: no OpenCL call at exit
        return *env;
    }

private:
    // CLPOOL_TEST_PLATFORM=TEXT: the first device of the first platform whose name contains TEXT
    // (to run the suite on PoCL on a machine with a GPU); a TEXT no platform matches is an error.
    static cl_device_id chosen_device() {
        const char* want = std::getenv("CLPOOL_TEST_PLATFORM");
        if (!want || !*want) return opencl::first_gpu_or_any_device();  // throws if there is none
        cl_uint n = 0;
        clGetPlatformIDs(0, nullptr, &n);
        std::vector<cl_platform_id> platforms(n);
        if (n) clGetPlatformIDs(n, platforms.data(), nullptr);
        for (cl_platform_id p : platforms) {
            char name[256] = {};
            clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
            cl_device_id d = nullptr;
            cl_uint found = 0;
            if (std::string(name).find(want) != std::string::npos &&
                clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, &found) == CL_SUCCESS && found > 0)
                return d;
        }
        throw std::runtime_error(std::string("CLPOOL_TEST_PLATFORM=") + want + ": no platform with a device matches");
    }

    static OpenCLEnv make() {
        const cl_device_id chosen = chosen_device();
        OpenCLEnv e;
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &chosen, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("clCreateContext failed: " + std::to_string(err));
        e.context = cl::Context(ctx, false);
        e.device = cl::Device(chosen, false);
        cl_command_queue q = clCreateCommandQueue(ctx, chosen, 0, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue failed: " + std::to_string(err));
        e.queue = cl::CommandQueue(q, false);
        e.description = opencl::device_string(chosen, CL_DEVICE_NAME);
        return e;
    }
};

}  // namespace clpool::test

#endif  // CLPOOL_HAS_OPENCL
