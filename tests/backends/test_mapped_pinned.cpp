// MappedPinnedPool: pinned buffers that stay mapped while pooled, reused only after the copies that use their pointer.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "cl_events.hpp"
#include "opencl_env.hpp"

#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using namespace clpool;
using clpool::test::Gate;
using clpool::test::OpenCLEnv;
using clpool::test::status_of;

namespace {

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 31 + seed * 7 + (i >> 9));
    return v;
}

// A copy from h's mapped pointer into dev that waits for the gate: "a copy still using the staging buffer".
cl::Event held_copy_from(const MappedPinnedPool::handle& h, const cl::Buffer& dev, std::size_t n, const Gate& gate) {
    auto& q = OpenCLEnv::get().queue;
    cl_event wait = gate.event(), ev = nullptr;
    REQUIRE(clEnqueueWriteBuffer(q(), dev(), CL_FALSE, 0, n, h.buffer().host(), 1, &wait, &ev) == CL_SUCCESS);
    clFlush(q());
    return cl::Event(ev, false);
}

std::vector<unsigned char> read_back(const cl::Buffer& dev, std::size_t n) {
    std::vector<unsigned char> v(n);
    REQUIRE(clEnqueueReadBuffer(OpenCLEnv::get().queue(), dev(), CL_TRUE, 0, n, v.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    return v;
}

std::vector<unsigned char> read_back_on(const cl::CommandQueue& q, const cl::Buffer& dev, std::size_t n) {
    std::vector<unsigned char> v(n);
    REQUIRE(clEnqueueReadBuffer(q(), dev(), CL_TRUE, 0, n, v.data(), 0, nullptr, nullptr) == CL_SUCCESS);
    return v;
}

}  // namespace

TEST_CASE("mapped pinned buffers: a usable, registered host pointer for their whole pooled life") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    BufferPool device(env.context);
    for (std::size_t n : {std::size_t{1}, std::size_t{4095}, std::size_t{65537}, std::size_t{(1 << 20) + 3}}) {
        CAPTURE(n);
        auto h = pool.allocate(n);
        REQUIRE(h.buffer());
        char* p = static_cast<char*>(h.buffer().host());
        REQUIRE(p != nullptr);
        CHECK(h.buffer().size() == h.bucket_size());
        CHECK(detail::pinned_ranges::instance().contains(p, h.bucket_size()));
        // The host pointer is the source and the destination of copies on another buffer, at odd offsets.
        const auto src = pattern(n, static_cast<unsigned>(n));
        std::memcpy(p, src.data(), n);
        auto dev = device.allocate(n + 8);
        REQUIRE(clEnqueueWriteBuffer(env.queue(), dev.buffer()(), CL_TRUE, 3, n, p, 0, nullptr, nullptr) == CL_SUCCESS);
        std::memset(p, 0, n);
        REQUIRE(clEnqueueReadBuffer(env.queue(), dev.buffer()(), CL_TRUE, 3, n, p, 0, nullptr, nullptr) == CL_SUCCESS);
        CHECK(std::memcmp(p, src.data(), n) == 0);
        void* before = p;
        h.release();
        // Reused from the cache: the same mapping, no new map.
        auto again = pool.allocate(n);
        CHECK(again.buffer().host() == before);
    }
    const auto s = pool.stats();
    CHECK(s.misses == 4);
    CHECK(s.hits == 4);
}

TEST_CASE("a mapped staging buffer under a pending copy is not handed back until the held queue's event is set") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    BufferPool device(env.context);
    const std::size_t n = 256 * 1024;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 5);
    Gate gate;

    auto h = pool.allocate(n);
    void* staged = h.buffer().host();
    std::memcpy(staged, src.data(), n);
    const cl::Event copy = held_copy_from(h, dev.buffer(), n, gate);
    h.release_after(&copy, 1);
    CHECK(status_of(copy) > CL_COMPLETE);
    CHECK(pool.stats().bytes_pending == pool.bucket_size_for(n));

    // Same size again while the copy is held: a new buffer, never the one the copy reads.
    auto other = pool.allocate(n);
    CHECK(other.buffer().host() != staged);
    std::memset(other.buffer().host(), 0xAB, n);  // a new owner scribbling must not reach the held copy
    CHECK(pool.stats().hits == 0);
    other.release();
    auto third = pool.allocate(n);  // the scribbled one comes back, the held one still does not
    CHECK(third.buffer().host() != staged);

    gate.open();
    copy.wait();
    CHECK(read_back(dev.buffer(), n) == src);  // the copy read the untouched staging bytes
    auto reused = pool.allocate(n);             // reaped: handed out now
    CHECK(reused.buffer().host() == staged);
    CHECK(pool.stats().bytes_pending == 0);
}

TEST_CASE(
    "freeing a mapped buffer waits for the copies still using its pointer: pool end, orphan release; trim keeps it") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    const std::size_t n = 128 * 1024;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 9);

    // Opens the gate from another thread after a while, recording that it did.
    auto open_later = [](Gate& gate, std::atomic<bool>& opened) {
        return std::thread([&gate, &opened] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            opened = true;
            gate.open();
        });
    };

    SUBCASE("trim") {
        MappedPinnedPool pool(env.context);
        Gate gate;
        auto h = pool.allocate(n);
        std::memcpy(h.buffer().host(), src.data(), n);
        const cl::Event copy = held_copy_from(h, dev.buffer(), n, gate);
        h.release_after(&copy, 1);
        // The gate opens after 10 s if trim() is still blocked on it: a failure, not a hang.
        std::atomic<bool> trimmed{false}, fired{false};
        std::thread watchdog([&] {
            for (int i = 0; i < 1000 && !trimmed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (!trimmed) {
                fired = true;
                gate.open();
            }
        });
        const std::size_t freed = pool.trim();  // the copy still runs: the buffer stays pending, mapped
        trimmed = true;
        watchdog.join();
        CHECK_FALSE(fired);
        CHECK(freed == 0);
        if (!fired) gate.open();
        copy.wait();
        CHECK(read_back(dev.buffer(), n) == src);  // the copy read the still-mapped pointer
        CHECK(pool.trim() == pool.bucket_size_for(n));  // done: unmapped and freed
        CHECK(pool.stats().bytes_allocated == 0);
    }
    SUBCASE("the pool's destructor") {
        auto pool = std::make_unique<MappedPinnedPool>(env.context);
        Gate gate;
        auto h = pool->allocate(n);
        void* p = h.buffer().host();
        std::memcpy(p, src.data(), n);
        const cl::Event copy = held_copy_from(h, dev.buffer(), n, gate);
        h.release_after(&copy, 1);
        std::atomic<bool> opened{false};
        auto t = open_later(gate, opened);
        pool.reset();
        CHECK(opened);
        CHECK(status_of(copy) == CL_COMPLETE);
        CHECK_FALSE(detail::pinned_ranges::instance().contains(p, n));  // unmapped and deregistered
        t.join();
        CHECK(read_back(dev.buffer(), n) == src);
    }
    SUBCASE("a handle that outlives its pool") {
        auto pool = std::make_unique<MappedPinnedPool>(env.context);
        auto h = pool->allocate(n);
        pool.reset();  // the handle is an orphan now, still mapped and usable
        CHECK(h.pool() == nullptr);
        void* p = h.buffer().host();
        CHECK(detail::pinned_ranges::instance().contains(p, n));
        std::memcpy(p, src.data(), n);
        Gate gate;
        const cl::Event copy = held_copy_from(h, dev.buffer(), n, gate);
        std::atomic<bool> opened{false};
        auto t = open_later(gate, opened);
        h.release_after(&copy, 1);  // frees it: only after the copy
        CHECK(opened);
        CHECK(status_of(copy) == CL_COMPLETE);
        CHECK_FALSE(detail::pinned_ranges::instance().contains(p, n));
        t.join();
        CHECK(read_back(dev.buffer(), n) == src);
    }
}

TEST_CASE("the mapped pinned backend refuses device-local memory; the registry gives one pool per context") {
    auto& env = OpenCLEnv::get();
    Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, MappedPinnedBackend> wrong(env.context);
    CHECK_THROWS_AS(wrong.allocate(64), driver_error);

    auto& a = get_mapped_pinned_pool(env.queue);
    CHECK(&a == &get_mapped_pinned_pool(env.queue));
    CHECK(a.kind() == MemoryKind::host_pinned);
    CHECK(static_cast<void*>(&a) != static_cast<void*>(&get_pinned_pool(env.queue)));
    auto h = a.allocate(1000);
    CHECK(h.buffer().host() != nullptr);
}

// A pending buffer's mapped pointer is used by a copy that names another buffer, so freeing it
// (unmap, release) must wait for that copy. trim() does not wait: it keeps such a buffer pending
// and gives it back once its copy is done. The pool's end (release_pools) waits: a copy held by
// a user event holds it until the event is set, so the thread that sets it must not be the one
// that calls it (nor a blocking call on the held queue, which waits for the copy as well).
TEST_CASE("trim keeps a staging buffer whose copy a user event holds; release_pools waits for it") {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_device_id dev_id = env.device();
    cl::Context ctx(clCreateContext(nullptr, 1, &dev_id, nullptr, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl::CommandQueue q(clCreateCommandQueue(ctx(), dev_id, 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    const std::size_t n = 64 * 1024;
    cl::Buffer dev(clCreateBuffer(ctx(), CL_MEM_READ_WRITE, n, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    const auto src = pattern(n, 3);
    // A staging buffer of the registry's pool, its copy held by `gate`, released with that copy.
    auto stage_held = [&](cl_event gate) {
        auto h = get_mapped_pinned_pool(q).allocate(n);
        std::memcpy(h.buffer().host(), src.data(), n);
        cl_event ev = nullptr;
        REQUIRE(clEnqueueWriteBuffer(q(), dev(), CL_FALSE, 0, n, h.buffer().host(), 1, &gate, &ev) == CL_SUCCESS);
        clFlush(q());
        cl::Event copy(ev, false);
        h.release_after(&copy, 1);
        return copy;
    };
    {
        cl::Event gate(clCreateUserEvent(ctx(), &err), false);
        REQUIRE(err == CL_SUCCESS);
        const cl::Event copy = stage_held(gate());
        auto& pool = get_mapped_pinned_pool(q);
        // Sets the gate after 10 s if trim() is still blocked on it: the test then fails, not hangs.
        std::atomic<bool> trimmed{false}, watchdog_fired{false};
        std::thread watchdog([&] {
            for (int i = 0; i < 1000 && !trimmed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (!trimmed) {
                watchdog_fired = true;
                clSetUserEventStatus(gate(), CL_COMPLETE);
            }
        });
        const std::size_t freed = pool.trim();
        trimmed = true;
        watchdog.join();
        CHECK_FALSE(watchdog_fired);
        CHECK(freed == 0);
        CHECK(pool.stats().bytes_pending == pool.bucket_size_for(n));
        if (!watchdog_fired) REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
        REQUIRE(clWaitForEvents(1, &copy()) == CL_SUCCESS);
        CHECK(pool.trim() == pool.bucket_size_for(n));  // its copy done: given back
        CHECK(read_back_on(q, dev, n) == src);
    }
    {
        cl::Event gate(clCreateUserEvent(ctx(), &err), false);
        REQUIRE(err == CL_SUCCESS);
        const cl::Event copy = stage_held(gate());
        std::atomic<bool> opened{false};
        std::thread opener([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            opened = true;
            clSetUserEventStatus(gate(), CL_COMPLETE);
        });
        release_pools(ctx);  // the pool's end
        CHECK(opened);  // it returned only after the event was set ...
        CHECK(status_of(copy) == CL_COMPLETE);  // ... and the copy had run from the still-mapped pointer
        opener.join();
        CHECK(read_back_on(q, dev, n) == src);
    }
    release_pools(ctx);
}

#endif  // CLPOOL_HAS_OPENCL
