// The USM pools (cl_intel_unified_shared_memory) on the test device: kernels, transfers and no driver call
// per block where the device offers the extension; a config_error naming it where it does not.
#include "opencl_env.hpp"

#include <clpool/interop/svm.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

bool device_has_usm() {
    const auto& env = OpenCLEnv::get();
    return opencl::device_string(env.device(), CL_DEVICE_EXTENSIONS).find("cl_intel_unified_shared_memory") !=
           std::string::npos;
}

cl::Kernel usm_add_one_kernel() {
    auto& env = OpenCLEnv::get();
    const char* src = "kernel void add_one(global int* p) { p[get_global_id(0)] += 1; }";
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(env.context(), 1, &src, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    const cl_device_id dev = env.device();
    REQUIRE(clBuildProgram(prog, 1, &dev, "", nullptr, nullptr) == CL_SUCCESS);
    cl_kernel k = clCreateKernel(prog, "add_one", &err);
    clReleaseProgram(prog);
    REQUIRE(err == CL_SUCCESS);
    return cl::Kernel(k, false);
}

}  // namespace

// Debian 12's PoCL 3.1 (CI) has no USM: there the documented error is what is checked; PoCL 4+ and
// Intel's drivers run the rest.
TEST_CASE("USMBackend: a device without cl_intel_unified_shared_memory is refused by name when the pool is built") {
    auto& env = OpenCLEnv::get();
    if (device_has_usm()) {
        USMArenaPool pool(env.context);
        CHECK(std::string(pool.backend().parent().name()) == "usm");
        return;
    }
    MESSAGE("the test device has no cl_intel_unified_shared_memory: checking the error it gets");
    try {
        USMArenaPool pool(env.context);
        FAIL("a USM pool was built on a device without the extension");
    } catch (const config_error& e) {
        const std::string what = e.what();
        CHECK(what.find("cl_intel_unified_shared_memory") != std::string::npos);
        CHECK(what.find(env.description) != std::string::npos);
    }
}

TEST_CASE_TEMPLATE("USM pools: device, host and shared blocks through kernels and transfers", P, USMPool,
                   USMArenaPool) {
    auto& env = OpenCLEnv::get();
    for (USMKind kind : {USMKind::device, USMKind::host, USMKind::shared}) {
        CAPTURE(to_string(kind));
        if (!device_has_usm()) {  // every kind is refused, before any allocation
            CHECK_THROWS_AS(P(typename P::backend_type(USMBackend(env.context, kind))), config_error);
            continue;
        }
        P pool(typename P::backend_type(USMBackend(env.context, kind)));
        std::vector<typename P::handle> held;
        for (std::size_t n : {4000u, 100u, 65536u, 12345u, 300000u}) held.push_back(pool.allocate(n));
        std::vector<std::pair<std::uintptr_t, std::uintptr_t>> spans;
        for (const auto& h : held) {
            const auto p = reinterpret_cast<std::uintptr_t>(h.buffer().get());
            spans.emplace_back(p, p + h.nbytes());
        }
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1].second <= spans[i].first);

        auto k = usm_add_one_kernel();
        for (std::size_t i = 0; i < held.size(); ++i) {
            const std::size_t ints = held[i].nbytes() / sizeof(int);
            std::vector<int> v(ints);
            std::iota(v.begin(), v.end(), static_cast<int>(i) * 100000);
            upload(env.queue, held[i], 0, v.data(), ints * sizeof(int)).wait();
            set_kernel_arg(k, 0, held[i]);
            const std::size_t global = ints;
            REQUIRE(clEnqueueNDRangeKernel(env.queue(), k(), 1, nullptr, &global, nullptr, 0, nullptr, nullptr) ==
                    CL_SUCCESS);
            std::vector<int> back(ints);
            download(env.queue, back.data(), held[i], 0, ints * sizeof(int)).wait();
            for (auto& x : v) ++x;
            CHECK(back == v);
        }
        CHECK(pool.stats().sub_buffers_made == 0);
        CHECK_THROWS_AS(upload(env.queue, held[0], 1, held.data(), held[0].nbytes()), size_error);
    }
}
