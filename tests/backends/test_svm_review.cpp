// An adversarial review of the SVM pools and OffsetArenaPool on a real OpenCL device: limits, alignment, stats, events.
#include "opencl_env.hpp"

#include <clpool/interop/svm.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

cl::Event review_user_event() {
    cl_int err = CL_SUCCESS;
    cl::Event e(clCreateUserEvent(OpenCLEnv::get().context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    return e;
}

}  // namespace

TEST_CASE_TEMPLATE("review: pointer and offset pools refuse a request above the device's limit with size_error", P,
                   SVMPool, SVMArenaPool, OffsetArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    const std::size_t limit = pool.backend().max_alloc_size();
    REQUIRE(limit > 0);
    CHECK_THROWS_AS(pool.allocate(limit + 1), size_error);
    CHECK_THROWS_AS(pool.allocate(std::numeric_limits<std::size_t>::max()), size_error);
    CHECK_THROWS_AS(pool.allocate(std::numeric_limits<std::size_t>::max() - 64), size_error);
    CHECK(pool.stats().bytes_allocated == 0);
}

TEST_CASE_TEMPLATE("review: SVM blocks of odd sizes start at the device's base-address alignment, at least 128 bytes",
                   P, SVMPool, SVMArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    std::vector<typename P::handle> held;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{127}, std::size_t{129},
                          std::size_t{1000}, std::size_t{4097}, std::size_t{65535}, std::size_t{1} << 20})
        held.push_back(pool.allocate(n));
    for (const auto& h : held) {
        REQUIRE(h);
        const auto p = reinterpret_cast<std::uintptr_t>(h.buffer().get());
        CHECK(p % 128 == 0);
        CHECK(h.buffer().size() >= h.nbytes());
    }
}

TEST_CASE_TEMPLATE("review: SVM stats count a block pending behind an event, then reuse it once it completed", P,
                   SVMPool, SVMArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    auto h = pool.allocate(1 << 16);
    const void* p = h.buffer().get();
    auto gate = review_user_event();
    h.release_after(&gate, 1);
    auto s = pool.stats();
    CHECK(s.bytes_pending >= (1u << 16));
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
    REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
    auto again = pool.allocate(1 << 16);
    CHECK(again.buffer().get() == p);
    s = pool.stats();
    CHECK(s.bytes_pending == 0);
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
}

TEST_CASE("review: OffsetArenaPool transfers stay inside the block: its neighbours' bytes are untouched") {
    auto& env = OpenCLEnv::get();
    OffsetArenaPool pool(env.context);
    auto a = pool.allocate(1000);
    auto b = pool.allocate(1000);
    auto c = pool.allocate(1000);
    REQUIRE(a.buffer().segment()() == b.buffer().segment()());
    std::vector<unsigned char> ones(1000, 1), twos(1000, 2), threes(1000, 3);
    upload(env.queue, a, 0, ones.data(), 1000).wait();
    upload(env.queue, c, 0, threes.data(), 1000).wait();
    upload(env.queue, b, 0, twos.data(), 1000).wait();
    CHECK_THROWS_AS(upload(env.queue, b, 1, twos.data(), 1000), size_error);
    std::vector<unsigned char> back(1000);
    download(env.queue, back.data(), a, 0, 1000).wait();
    CHECK(back == ones);
    download(env.queue, back.data(), c, 0, 1000).wait();
    CHECK(back == threes);
}

TEST_CASE("review: an OffsetArenaPool block handed out again gives a sub-buffer of at least what the holder asked") {
    auto& env = OpenCLEnv::get();
    OffsetArenaPool pool(env.context);
    {
        auto h = pool.allocate(3000);
        REQUIRE(h.buffer().sub_buffer()() != nullptr);
    }
    auto h = pool.allocate(2500);
    const cl::Buffer& sub = h.buffer().sub_buffer();
    std::size_t size = 0;
    REQUIRE(clGetMemObjectInfo(sub(), CL_MEM_SIZE, sizeof size, &size, nullptr) == CL_SUCCESS);
    CHECK(size >= h.nbytes());
    std::size_t origin = 0;
    REQUIRE(clGetMemObjectInfo(sub(), CL_MEM_OFFSET, sizeof origin, &origin, nullptr) == CL_SUCCESS);
    CHECK(origin == h.buffer().offset());
}

TEST_CASE("review: SVMMapping of a pooled block sees the kernel-side bytes and unmaps on scope exit") {
    auto& env = OpenCLEnv::get();
    SVMArenaPool pool(env.context);
    auto h = pool.allocate(64 * sizeof(int));
    {
        SVMMapping m(env.queue, h, CL_MAP_WRITE_INVALIDATE_REGION);
        std::fill_n(m.as<int>(), 64, 7);
    }
    std::vector<int> back(64);
    download(env.queue, back.data(), h, 0, back.size() * sizeof(int)).wait();
    CHECK(std::all_of(back.begin(), back.end(), [](int x) { return x == 7; }));
    release_after(h, env.queue);
}

TEST_CASE_TEMPLATE("review: an SVM snapshot lists a block pending behind an event, with totals that add up", P, SVMPool,
                   SVMArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    auto held = pool.allocate(5000);
    auto h = pool.allocate(70000);
    auto gate = review_user_event();
    h.release_after(&gate, 1);
    const auto snap = pool.snapshot();
    std::size_t pending = 0, in_use = 0;
    for (const auto& b : snap.buffers) {
        if (b.state == BufferState::pending) pending += b.bytes_held;
        if (b.state == BufferState::in_use) in_use += b.bytes_held;
    }
    CHECK(pending >= 70000);
    CHECK(in_use >= 5000);
    CHECK(snap.stats.bytes_pending == pending);
    CHECK(snap.stats.bytes_in_use == in_use);
    REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
}

TEST_CASE("review: SVM transfers refuse an offset that would wrap past the block") {
    auto& env = OpenCLEnv::get();
    SVMArenaPool pool(env.context);
    auto h = pool.allocate(256);
    unsigned char bytes[8] = {};
    CHECK_THROWS_AS(upload(env.queue, h, std::numeric_limits<std::size_t>::max(), bytes, 2), size_error);
    CHECK_THROWS_AS(download(env.queue, bytes, h, 255, 2), size_error);
    CHECK_THROWS_AS(
        upload(env.queue, static_cast<const SVMSpan&>(h.buffer()), 1, bytes, std::numeric_limits<std::size_t>::max()),
        size_error);
}
