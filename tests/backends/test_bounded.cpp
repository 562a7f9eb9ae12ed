// Bounded<B>: a limit on the total bytes a pool holds (in use, cached, pending), past which the
// pool's out-of-memory path runs; and Capped, which bounds only the idle bytes.
#include <clpool/backends/bounded.hpp>
#include <clpool/clpool.hpp>
#include <clpool/diagnostics/diagnostics.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

using namespace clpool;

// Named for this file alone: the suites build in unity batches.
namespace bounded_test {
constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
using BoundedHost = Bounded<HostBackend>;
using BoundedHostPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, BoundedHost, Diagnostics>;
static_assert(Backend<BoundedHost>);
}  // namespace bounded_test
using namespace bounded_test;

// Capped bounds what the pool keeps idle, not what it holds: buffers in use are never refused.
// This is the documented limit of a LimitPolicy, which only admits or refuses a release.
TEST_CASE("Capped bounds the idle bytes only: three times its cap in use is no error") {
    Pool<PowerOfTwoBuckets, DeviceLocal, Capped, SingleMutex, HostBackend> pool(HostBackend(), Capped(1 * MiB, 16));
    std::vector<decltype(pool)::handle> live;
    for (int i = 0; i < 3; ++i) live.push_back(pool.allocate(1 * MiB));
    CHECK(pool.stats().bytes_in_use == 3 * MiB);
    live.clear();  // released: the cap keeps 1 MiB, the rest goes back
    CHECK(pool.stats().bytes_cached == 1 * MiB);
}

TEST_CASE("Bounded: the pool never holds more than the limit; past it, trim and retry, then out_of_memory") {
    BoundedHostPool pool(BoundedHost(HostBackend(), 1 * MiB));
    auto a = pool.allocate(512 * KiB);
    pool.allocate(256 * KiB).release();  // cached: 768 KiB held
    CHECK(pool.backend().held() == 768 * KiB);

    // 512 KiB more does not fit beside what is held: the cache goes back, the retry fits.
    auto b = pool.allocate(512 * KiB);
    CHECK(pool.stats().oom_retries == 1);
    CHECK(pool.backend().held() == 1 * MiB);
    CHECK(pool.stats().bytes_allocated == 1 * MiB);

    // Nothing left to give back: the out-of-memory report names the bound backend.
    std::string what;
    try {
        (void)pool.allocate(4 * KiB);
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
        CHECK(e.native_code() == BoundedHost::limit_code);
        CHECK(e.pool_held() == 1 * MiB);
    }
    INFO(what);
    CHECK(what.find("bounded host out of memory") != std::string::npos);
    CHECK(what.find("live: 2 buffers, 1048576 bytes held") != std::string::npos);
    CHECK(pool.stats().failed_allocations == 1);

    // Freed memory counts no more: the limit is available again.
    a = {};
    pool.trim();
    CHECK(pool.backend().held() == 512 * KiB);
    CHECK(pool.allocate(512 * KiB));
}

TEST_CASE("Bounded: copies of one value share one limit; separate values bound separately") {
    const BoundedHost shared(HostBackend(), 1 * MiB);
    BoundedHostPool p1(shared), p2(shared), own(BoundedHost(HostBackend(), 1 * MiB));
    auto a = p1.allocate(1 * MiB);
    CHECK_THROWS_AS((void)p2.allocate(4 * KiB), out_of_memory);  // the shared MiB is p1's
    CHECK(own.allocate(1 * MiB));
    a = {};
    p1.trim();
    CHECK(p2.allocate(1 * MiB));
}

TEST_CASE("SubAllocated<Bounded<B>>: an arena's segments count against the limit") {
    using Arena = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<BoundedHost>, Diagnostics>;
    ArenaOptions o;
    o.min_segment = 2 * MiB;
    Arena pool(SubAllocated<BoundedHost>(BoundedHost(HostBackend(), 2 * MiB), o));
    std::vector<Arena::handle> live;
    for (int i = 0; i < 4; ++i) live.push_back(pool.allocate(512 * KiB));  // one 2 MiB segment
    CHECK(pool.stats().segment_bytes == 2 * MiB);
    CHECK_THROWS_AS((void)pool.allocate(512 * KiB), out_of_memory);  // a second segment would pass the limit
}

#ifdef CLPOOL_HAS_OPENCL
// Over OpenCL, a handle's buffer() is still a cl::Buffer (the counted memory derives from it).
TEST_CASE("Bounded<OpenCLBackend>: buffers are cl::Buffers, and the limit holds on a real device") {
    auto& env = test::OpenCLEnv::get();
    using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, Bounded<OpenCLBackend>, Diagnostics>;
    P pool(Bounded(OpenCLBackend(env.context), 1 * MiB));
    auto h = pool.allocate(1 * MiB);
    const cl::Buffer& b = h.buffer();
    std::vector<unsigned char> src(1 * MiB, 0x5C), back(1 * MiB);
    REQUIRE(env.queue.enqueueWriteBuffer(b, CL_TRUE, 0, src.size(), src.data()) == CL_SUCCESS);
    REQUIRE(env.queue.enqueueReadBuffer(b, CL_TRUE, 0, back.size(), back.data()) == CL_SUCCESS);
    CHECK(back == src);
    CHECK_THROWS_AS((void)pool.allocate(1 * MiB), out_of_memory);
    release_after(h, env.queue);  // B's events
    env.queue.finish();
    CHECK(pool.allocate(1 * MiB));  // the released buffer, a hit
    CHECK(pool.stats().hits == 1);
}
#endif

#include "observability_oom_example.hpp"  // docs/OBSERVABILITY.md's example, extracted at configure time

// The out-of-memory example of docs/OBSERVABILITY.md, run: the report it shows is what it returns.
TEST_CASE("docs/OBSERVABILITY.md's out-of-memory example: a bounded pool's report") {
    const std::string what = example::out_of_memory_example();
    INFO(what);
    for (const char* line : {
             "clpool: bounded host out of memory: asked for 100000 bytes with 151552 bytes held by the pool after "
             "giving its cache back; driver code -4\n",
             "\n  asked: 100000 bytes (the driver was asked for 131072)\n",
             "\n  given back before the retry: 8192 bytes of cached and pending buffers\n",
             "\n  live: 12 buffers, 151552 bytes held for 114012 asked\n",
             "\n  fragmentation: 37540 bytes (25% of live) lost to bucket rounding; 0 bytes idle in the pool now\n",
         })
        CHECK(what.find(line) != std::string::npos);
    // A block's age is read from the coarse clock, so it is right to a clock tick (a few ms):
    // the example's blocks, made just before, show 0 to a few ms.
    const std::string largest = "\n    1. 16384 bytes held, 15001 asked, tag 't11', made ";
    const auto at = what.find(largest);
    REQUIRE(at != std::string::npos);
    const std::size_t ms = std::stoul(what.substr(at + largest.size()));
    CHECK(ms <= 50);
    CHECK(what.find(" ms ago", at + largest.size()) != std::string::npos);
}
