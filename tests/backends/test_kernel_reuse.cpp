// Kernels on pooled buffers: a buffer released after a kernel's event is not reused while that kernel may still run.
//
// These cases run real kernels, so .ci/steps.d/70-oclgrind.sh runs them under
// `oclgrind --check-api` (selected by the "kernel:" prefix of their names),
// except the held-kernel case: oclgrind runs every command in order at the
// first blocking call, so a command waiting on a user event makes it spin.
#include "opencl_env.hpp"

#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

constexpr const char* source = R"CLC(
__kernel void fill(__global uint* p, uint value) {
    const size_t i = get_global_id(0);
    p[i] = value * 65536u + (uint)i;
}
// Counts the elements that are not what fill(value) wrote: another owner's kernel.
__kernel void verify(__global const uint* p, uint value, __global uint* bad, uint slot) {
    const size_t i = get_global_id(0);
    if (p[i] != value * 65536u + (uint)i) atomic_inc(&bad[slot]);
}
)CLC";

struct Kernels {
    cl_program program = nullptr;
    cl_kernel fill = nullptr, verify = nullptr;

    Kernels() {
        auto& env = OpenCLEnv::get();
        cl_int err = CL_SUCCESS;
        const char* src = source;
        program = clCreateProgramWithSource(env.context(), 1, &src, nullptr, &err);
        REQUIRE(err == CL_SUCCESS);
        cl_device_id dev = env.device();
        err = clBuildProgram(program, 1, &dev, "", nullptr, nullptr);
        if (err != CL_SUCCESS) {
            std::size_t n = 0;
            clGetProgramBuildInfo(program, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
            std::string log(n, '\0');
            clGetProgramBuildInfo(program, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
            FAIL("build failed: " << log);
        }
        fill = clCreateKernel(program, "fill", &err);
        REQUIRE(err == CL_SUCCESS);
        verify = clCreateKernel(program, "verify", &err);
        REQUIRE(err == CL_SUCCESS);
    }
    ~Kernels() {
        if (fill) clReleaseKernel(fill);
        if (verify) clReleaseKernel(verify);
        if (program) clReleaseProgram(program);
    }
    Kernels(const Kernels&) = delete;
    Kernels& operator=(const Kernels&) = delete;

    // Kernels are not thread-safe to set up; these tests enqueue from one thread.
    cl::Event run_fill(const cl::CommandQueue& q, const cl::Buffer& b, std::uint32_t value, std::size_t n,
                       const cl_event* wait = nullptr) {
        cl_mem m = b();
        REQUIRE(clSetKernelArg(fill, 0, sizeof m, &m) == CL_SUCCESS);
        REQUIRE(clSetKernelArg(fill, 1, sizeof value, &value) == CL_SUCCESS);
        cl_event e = nullptr;
        REQUIRE(clEnqueueNDRangeKernel(q(), fill, 1, nullptr, &n, nullptr, wait ? 1 : 0, wait, &e) == CL_SUCCESS);
        return cl::Event(e, false);
    }
    cl::Event run_verify(const cl::CommandQueue& q, const cl::Buffer& b, std::uint32_t value, std::size_t n,
                         const cl::Buffer& bad, std::uint32_t slot) {
        cl_mem m = b(), f = bad();
        REQUIRE(clSetKernelArg(verify, 0, sizeof m, &m) == CL_SUCCESS);
        REQUIRE(clSetKernelArg(verify, 1, sizeof value, &value) == CL_SUCCESS);
        REQUIRE(clSetKernelArg(verify, 2, sizeof f, &f) == CL_SUCCESS);
        REQUIRE(clSetKernelArg(verify, 3, sizeof slot, &slot) == CL_SUCCESS);
        cl_event e = nullptr;
        REQUIRE(clEnqueueNDRangeKernel(q(), verify, 1, nullptr, &n, nullptr, 0, nullptr, &e) == CL_SUCCESS);
        return cl::Event(e, false);
    }
};

cl::CommandQueue make_queue() {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(env.context(), env.device(), 0, &err);
    REQUIRE(err == CL_SUCCESS);
    return cl::CommandQueue(q, false);
}

std::vector<std::uint32_t> read_all(const cl::CommandQueue& q, const cl::Buffer& b, std::size_t n) {
    std::vector<std::uint32_t> out(n);
    REQUIRE(clEnqueueReadBuffer(q(), b(), CL_TRUE, 0, n * 4, out.data(), 0, nullptr, nullptr) == CL_SUCCESS);
    return out;
}

}  // namespace

TEST_CASE("kernel: a buffer released after a held kernel is handed to nobody until the kernel ran") {
    auto& env = OpenCLEnv::get();
    Kernels k;
    BufferPool pool(env.context);
    const cl::CommandQueue q2 = make_queue();
    const std::size_t n = 256;

    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(env.context(), &err);
    REQUIRE(err == CL_SUCCESS);

    auto a = pool.allocate(n * 4);
    const cl_mem first = a.buffer()();
    const cl::Event held = k.run_fill(q2, a.buffer(), 1, n, &gate);  // waits for the gate
    clFlush(q2());
    a.release_after(&held, 1);

    // While the kernel is held, the next owner gets another buffer and writes its own data.
    // (No host wait before the gate opens: oclgrind runs commands in order and would spin.)
    auto b = pool.allocate(n * 4);
    CHECK(b.buffer()() != first);
    CHECK(pool.stats().bytes_pending == pool.bucket_size_for(n * 4));
    k.run_fill(env.queue, b.buffer(), 2, n, nullptr);

    REQUIRE(clSetUserEventStatus(gate, CL_COMPLETE) == CL_SUCCESS);
    clReleaseEvent(gate);
    q2.finish();

    // Now the held buffer comes back, with what the held kernel wrote in it, and nothing else.
    auto c = pool.allocate(n * 4);
    CHECK(c.buffer()() == first);
    const auto got_c = read_all(env.queue, c.buffer(), n);
    const auto got_b = read_all(env.queue, b.buffer(), n);
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(got_c[i] == 1u * 65536u + i);
        REQUIRE(got_b[i] == 2u * 65536u + i);
    }
}

TEST_CASE("kernel: owners on two queues never see each other's kernels through reused buffers") {
    auto& env = OpenCLEnv::get();
    Kernels k;
    BufferPool pool(env.context);
    const cl::CommandQueue queues[2] = {make_queue(), make_queue()};
    const std::size_t n = 256;
    const int rounds = 40;

    // One counter per round: elements that were not what that round's owner wrote.
    cl_int err = CL_SUCCESS;
    cl::Buffer bad(clCreateBuffer(env.context(), CL_MEM_READ_WRITE, rounds * 4, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    const std::vector<std::uint32_t> zeros(rounds, 0);
    REQUIRE(clEnqueueWriteBuffer(env.queue(), bad(), CL_TRUE, 0, rounds * 4, zeros.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);

    // Round r: take a buffer, fill it with r on queue r % 2, verify it there, and
    // release it after the verify. No host waits: the two queues run side by side,
    // so a buffer reused too early would show another round's values.
    for (int r = 0; r < rounds; ++r) {
        const cl::CommandQueue& q = queues[r % 2];
        auto h = pool.allocate(n * 4);
        k.run_fill(q, h.buffer(), static_cast<std::uint32_t>(r + 1), n);
        const cl::Event verified =
            k.run_verify(q, h.buffer(), static_cast<std::uint32_t>(r + 1), n, bad, static_cast<std::uint32_t>(r));
        clFlush(q());
        h.release_after(&verified, 1);
    }
    queues[0].finish();
    queues[1].finish();
    const auto counts = read_all(env.queue, bad, rounds);
    for (int r = 0; r < rounds; ++r) {
        CAPTURE(r);
        CHECK(counts[static_cast<std::size_t>(r)] == 0);
    }
    const auto s = pool.stats();
    CHECK(s.hits + s.misses == static_cast<std::uint64_t>(rounds));
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_allocated == s.bytes_cached + s.bytes_pending);
}
