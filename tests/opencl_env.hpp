// The test suite's OpenCL device: a GPU if there is one, else the first device (PoCL in CI).
// Finding no platform is a test failure, never a skip.
#pragma once

// Nothing here in a build without OpenCL (CLPOOL_WITH_OPENCL=OFF): a suite
// that includes it compiles its OpenCL cases out with CLPOOL_HAS_OPENCL.
#include <clpool/core/has_opencl.hpp>
#ifdef CLPOOL_HAS_OPENCL

#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

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
    static OpenCLEnv make() {
        const cl_device_id chosen = opencl::first_gpu_or_any_device();  // throws if there is none
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
