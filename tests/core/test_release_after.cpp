// Release with events: a buffer a queued command may still touch is never handed out again before it is done.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "cl_events.hpp"
#include "opencl_env.hpp"

#include <clpool/pools/opencl_pools.hpp>
#include <clpool/interop/transfer.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace clpool;
using clpool::test::Gate;
using clpool::test::OpenCLEnv;
using clpool::test::status_of;

namespace {

// A write into b that waits for the gate: "a command still using the buffer".
cl::Event held_write(const cl::CommandQueue& q, const cl::Buffer& b, const std::vector<unsigned char>& src,
                     const Gate& gate) {
    cl_event wait = gate.event(), ev = nullptr;
    REQUIRE(clEnqueueWriteBuffer(q(), b(), CL_FALSE, 0, src.size(), src.data(), 1, &wait, &ev) == CL_SUCCESS);
    clFlush(q());
    return cl::Event(ev, false);
}

cl::CommandQueue second_queue() {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(env.context(), env.device(), 0, &err);
    REQUIRE(err == CL_SUCCESS);
    return cl::CommandQueue(q, false);
}

}  // namespace

TEST_CASE("release_after(handle, queue): the buffer is not reused until the held command has run") {
    auto& env = OpenCLEnv::get();
    BufferPool pool(env.context);
    const std::size_t n = 64 * 1024;
    std::vector<unsigned char> src(n, 0x5A);
    Gate gate;

    auto h = pool.allocate(n);
    const cl_mem first = h.buffer()();
    const cl::Event write = held_write(env.queue, h.buffer(), src, gate);
    release_after(h, env.queue);
    CHECK_FALSE(h);
    CHECK(pool.stats().bytes_pending == pool.bucket_size_for(n));

    // Same size while the command is held: a different buffer, a miss.
    auto other = pool.allocate(n);
    CHECK(other.buffer()() != first);
    CHECK(pool.stats().misses == 2);
    CHECK(pool.stats().hits == 0);
    CHECK(status_of(write) > CL_COMPLETE);  // the command really was still waiting

    gate.open();
    env.queue.finish();
    CHECK(status_of(write) == CL_COMPLETE);
    // Now it is handed back: the same cl_mem, a hit.
    auto again = pool.allocate(n);
    CHECK(again.buffer()() == first);
    CHECK(pool.stats().hits == 1);
    CHECK(pool.stats().bytes_pending == 0);

    // And the held command did write it.
    std::vector<unsigned char> back(n);
    REQUIRE(clEnqueueReadBuffer(env.queue(), again.buffer()(), CL_TRUE, 0, n, back.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(back == src);
}

using StripedBufferPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>, OpenCLBackend>;
using CachedBufferPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<>, OpenCLBackend>;

// After queue.finish() the released bytes are no longer pending: stats() and trim()
// collect them, rather than wait for the next allocation of their size.
TEST_CASE_TEMPLATE("stats() and trim() collect pending buffers whose events completed", P, BufferPool,
                   StripedBufferPool, CachedBufferPool) {
    auto& env = OpenCLEnv::get();
    P pool(OpenCLBackend(env.context));
    const std::size_t n = 3000;  // the 4 KiB bucket
    const std::size_t bucket = pool.bucket_size_for(n);
    std::vector<unsigned char> src(n, 0x3C);
    Gate gate;

    auto h = pool.allocate(n);
    const cl::Event write = held_write(env.queue, h.buffer(), src, gate);
    release_after(h, env.queue);
    CHECK(pool.stats().bytes_pending == bucket);  // still running: pending it stays
    CHECK(pool.stats().bytes_cached == 0);

    gate.open();
    env.queue.finish();
    const PoolStats s = pool.stats();
    CHECK(s.bytes_pending == 0);
    CHECK(s.bytes_cached == bucket);
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
    REQUIRE(s.buckets.size() == 1);
    CHECK(s.buckets[0].pending_buffers == 0);
    CHECK(s.buckets[0].cached_buffers == 1);

    // trim(): a second buffer pending then completed is given back with the cached one.
    auto h2 = pool.allocate(n);
    auto h3 = pool.allocate(n);
    Gate gate2;
    const cl::Event write2 = held_write(env.queue, h3.buffer(), src, gate2);
    release_after(h3, env.queue);
    h2 = {};
    gate2.open();
    env.queue.finish();
    CHECK(pool.trim() == 2 * bucket);
    const PoolStats t = pool.stats();
    CHECK(t.bytes_pending == 0);
    CHECK(t.bytes_cached == 0);
    CHECK(t.bytes_allocated == 0);
}

TEST_CASE("Handle::release_after(events): reuse waits for exactly those events, across queues too") {
    auto& env = OpenCLEnv::get();
    BufferPool pool(env.context);
    const cl::CommandQueue q2 = second_queue();
    const std::size_t n = 4096;
    std::vector<unsigned char> src(n, 0x11);
    Gate gate;

    auto h = pool.allocate(n);
    const cl_mem first = h.buffer()();
    const cl::Event write = held_write(q2, h.buffer(), src, gate);  // used on queue 2
    h.release_after(&write, 1);

    // The next owner works on queue 1: it must not get the buffer queue 2 still writes.
    for (int i = 0; i < 3; ++i) {
        auto other = pool.allocate(n);
        CHECK(other.buffer()() != first);
    }
    CHECK(pool.stats().hits == 2);  // the 2nd and 3rd reuse the spare buffer, never `first`
    CHECK(pool.stats().misses == 2);

    gate.open();
    q2.finish();
    auto a = pool.allocate(n);
    auto b = pool.allocate(n);
    CHECK((a.buffer()() == first || b.buffer()() == first));
}

TEST_CASE("release_after with events already complete recycles at once") {
    auto& env = OpenCLEnv::get();
    BufferPool pool(env.context);
    auto h = pool.allocate(100);
    const cl_mem first = h.buffer()();
    cl_event marker = nullptr;
    REQUIRE(clEnqueueMarkerWithWaitList(env.queue(), 0, nullptr, &marker) == CL_SUCCESS);
    const cl::Event done(marker, false);
    done.wait();
    h.release_after(&done, 1);
    CHECK(pool.stats().bytes_pending == 0);
    CHECK(pool.allocate(100).buffer()() == first);
}

TEST_CASE("plain release on one in-order queue: reuse is immediate and ordered by the queue") {
    // The documented contract of release(): no command still uses the buffer,
    // or the next owner uses the same in-order queue. Here the second holds.
    auto& env = OpenCLEnv::get();
    BufferPool pool(env.context);
    const std::size_t n = 8192;
    std::vector<unsigned char> old_data(n, 0xAA), new_data(n, 0xBB);
    Gate gate;

    auto h = pool.allocate(n);
    const cl_mem first = h.buffer()();
    const cl::Event old_write = held_write(env.queue, h.buffer(), old_data, gate);
    h.release();
    auto next = pool.allocate(n);
    REQUIRE(next.buffer()() == first);  // the pool did hand it out at once
    REQUIRE(clEnqueueWriteBuffer(env.queue(), next.buffer()(), CL_FALSE, 0, n, new_data.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    gate.open();
    std::vector<unsigned char> back(n);
    REQUIRE(clEnqueueReadBuffer(env.queue(), next.buffer()(), CL_TRUE, 0, n, back.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(status_of(old_write) == CL_COMPLETE);
    CHECK(back == new_data);  // the queue ran the old write first: the new owner's data wins
}

TEST_CASE("a staging buffer under a pending copy is not handed out until the copy has run") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t chunk = 64 * 1024, n = 2 * chunk - 100;  // 2 chunks, 2 staging buffers: no host wait
    std::vector<unsigned char> src(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    auto dst = device.allocate(n);
    Gate gate;

    TransferOptions o;
    o.staging_pool = &staging;
    o.chunk_bytes = chunk;
    o.staging_buffers = 2;
    o.stage = true;
    o.direct_max_bytes = 0;
    o.async = true;
    o.wait_for = {gate.event};
    const cl::Event done = upload(env.queue, dst, 0, src.data(), n, o);
    CHECK(status_of(done) > CL_COMPLETE);
    auto s = staging.stats();
    CHECK(s.misses == 2);                                      // two staging buffers were taken...
    CHECK(s.bytes_in_use == 0);                                // ...and handed back,
    CHECK(s.bytes_pending == 2 * staging.bucket_size_for(chunk));  // but only under their copies' events

    // The staging source may change now: upload copied it out before returning.
    std::vector<unsigned char> expect = src;
    std::memset(src.data(), 0, n);

    // Asking for a chunk-sized pinned buffer now must not get either of them.
    auto third = staging.allocate(chunk);
    CHECK(staging.stats().misses == 3);
    CHECK(staging.stats().hits == 0);

    gate.open();
    done.wait();
    // The copies' events are complete now; poll in case the driver reports it a moment later.
    std::vector<MappedPinnedPool::handle> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (staging.stats().hits < 2 && std::chrono::steady_clock::now() < deadline) {
        auto h = staging.allocate(chunk);
        if (h.buffer().host() == third.buffer().host()) FAIL("the held buffer was handed out twice");
        got.push_back(std::move(h));  // kept, so a miss's new buffer is not what the next try hits
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(staging.stats().hits == 2);  // both staging buffers came back once their copies were done
    CHECK(staging.stats().bytes_pending == 0);

    std::vector<unsigned char> back(n);
    REQUIRE(clEnqueueReadBuffer(env.queue(), dst.buffer()(), CL_TRUE, 0, n, back.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(back == expect);
}

// An arena miss that needs a new segment first gives the pool's cache back to the segments, so
// that a hole may serve it. A buffer released with release_after whose command still runs is not
// part of that: freeing it would wait for its events, and allocate() would block behind another
// buffer's queued work ("the pool never waits"). The held command below waits on a user event that
// a watchdog opens only after a long while, so a pool that waits returns late and finds it done.
TEST_CASE_TEMPLATE("an arena miss that needs a new segment does not wait for a pending buffer's events", P, ArenaPool,
                   BufferPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    const std::size_t n = 1u << 20;
    std::vector<unsigned char> src(n, 0x7E);
    Gate gate;
    auto h = pool.allocate(n);
    const cl::Event write = held_write(env.queue, h.buffer(), src, gate);
    release_after(h, env.queue);
    const std::size_t bucket = pool.bucket_size_for(n);
    REQUIRE(pool.stats().bytes_pending == bucket);

    std::atomic<bool> returned{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 1000 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        clSetUserEventStatus(gate.event(), CL_COMPLETE);  // unblocks a pool that waits
    });
    auto big = pool.allocate(8u << 20);  // no room in what the arena holds: a new segment
    returned.store(true);
    const cl_int status_at_return = status_of(write);
    watchdog.join();
    CHECK(big);
    CHECK(status_at_return > CL_COMPLETE);  // allocate returned while the held command still waited
    env.queue.finish();
    // The pending buffer stayed the pool's, and is cached once its command has run.
    const PoolStats s = pool.stats();
    CHECK(s.bytes_pending == 0);
    CHECK(s.bytes_cached == bucket);
}

#endif  // CLPOOL_HAS_OPENCL
