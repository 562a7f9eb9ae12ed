// The contract every pool keeps, run over every backend and every alias.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace clpool;
using namespace clpool::test;

#ifdef CLPOOL_HAS_OPENCL
#define CLPOOL_OPENCL_POOLS                                                                          \
    , clpool::BufferPool, clpool::PinnedBufferPool, clpool::PersistentBufferPool, clpool::ArenaPool, \
        clpool::PinnedArenaPool, clpool::OffsetArenaPool, clpool::SVMPool, clpool::SVMArenaPool
#else
#define CLPOOL_OPENCL_POOLS
#endif

#define CLPOOL_CONTRACT_POOLS                                                             \
    host::BufferPool, host::PinnedBufferPool, host::PersistentBufferPool,                 \
        MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock>,                      \
        MockPool<PowerOfTwoBuckets, HostPinned, Unlimited, SingleMutex>,                  \
        MockPool<FixedSetBuckets, IntegratedAware, Capped, Striped<4>>,                   \
        MockPool<FixedSetBuckets, DeviceLocal, Capped, ThreadCached<4>>, host::ArenaPool, \
        MockArenaPool<ArenaBuckets, DeviceLocal, Unlimited, NoLock>,                      \
        MockArenaPool<PowerOfTwoBuckets, HostPinned, Capped, Striped<4>>,                 \
        MockArenaPool<ArenaBuckets, DeviceLocal, Capped, ThreadCached<4>> CLPOOL_OPENCL_POOLS

TEST_CASE_TEMPLATE("a pool hands back what it cached, and only that", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    const std::size_t n = 3000;
    const void* first = nullptr;
    {
        auto h = pool->allocate(n);
        REQUIRE(h);
        CHECK(h.nbytes() == n);
        CHECK(h.bucket_size() >= n);
        CHECK(h.bucket_size() == pool->bucket_size_for(n));
        CHECK(h.pool() == pool.get());
        first = identity(h.buffer());
        const auto s = pool->stats();
        CHECK(s.misses == 1);
        CHECK(s.hits == 0);
        CHECK(s.bytes_in_use == h.bucket_size());
        CHECK(s.bytes_requested == n);
        CHECK(s.bytes_allocated == h.bucket_size());
    }  // the destructor releases
    auto s = pool->stats();
    CHECK(s.bytes_cached == pool->bucket_size_for(n));
    CHECK(s.bytes_in_use == 0);

    // Any size in the same bucket is a hit on the same buffer.
    auto h2 = pool->allocate(pool->bucket_size_for(n));
    CHECK(identity(h2.buffer()) == first);
    s = pool->stats();
    CHECK(s.hits == 1);
    CHECK(s.misses == 1);
    CHECK(s.hit_rate() == doctest::Approx(0.5));
    CHECK(s.bytes_cached == 0);

    // A different bucket misses.
    auto h3 = pool->allocate(pool->bucket_size_for(n) + 1);
    CHECK(identity(h3.buffer()) != first);
    CHECK(pool->stats().misses == 2);
    CHECK(pool->stats().bytes_allocated == h2.bucket_size() + h3.bucket_size());
}

TEST_CASE_TEMPLATE("release is idempotent and moves transfer ownership", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    auto h = pool->allocate(1000);
    h.release();
    CHECK_FALSE(h);
    h.release();  // harmless
    CHECK(pool->stats().bytes_cached == pool->bucket_size_for(1000));
    CHECK(pool->stats().buckets.at(0).cached_buffers == 1);

    auto a = pool->allocate(5000);
    const void* id = identity(a.buffer());
    typename P::handle b = std::move(a);
    CHECK_FALSE(a);
    CHECK(b);
    CHECK(identity(b.buffer()) == id);
    a.release();  // releasing a moved-from handle does nothing
    CHECK(pool->stats().bytes_in_use == b.bucket_size());

    auto c = pool->allocate(5000);
    c = std::move(b);  // move-assign releases c's own buffer first
    CHECK(identity(c.buffer()) == id);
    CHECK(pool->stats().bytes_in_use == c.bucket_size());
}

TEST_CASE_TEMPLATE("contents survive and buffers are distinct while held", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    auto a = pool->allocate(4096);
    auto b = pool->allocate(4096);
    CHECK(identity(a.buffer()) != identity(b.buffer()));
    write_bytes(a.buffer(), pattern(4096, 1));
    write_bytes(b.buffer(), pattern(4096, 2));
    CHECK(read_bytes(a.buffer(), 4096) == pattern(4096, 1));
    CHECK(read_bytes(b.buffer(), 4096) == pattern(4096, 2));
}

TEST_CASE_TEMPLATE("allocate(0) is a valid buffer of the smallest bucket", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    auto h = pool->allocate(0);
    REQUIRE(h);
    CHECK(h.nbytes() == 0);
    CHECK(h.bucket_size() == P::bucket_policy::size_from_index(0));
    CHECK(pool->stats().bytes_requested == 0);
}

TEST_CASE_TEMPLATE("sizes beyond the device limit are refused with the value and the limit", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    const std::size_t too_big = pool->max_alloc_size() + 1;
    try {
        (void)pool->allocate(too_big);
        FAIL("allocate above the device limit must throw");
    } catch (const size_error& e) {
        CHECK(e.requested() == too_big);
        CHECK(e.limit() == pool->max_alloc_size());
        CHECK(std::string(e.what()).find(std::to_string(too_big)) != std::string::npos);
        CHECK(std::string(e.what()).find(std::to_string(pool->max_alloc_size())) != std::string::npos);
    }
    CHECK_FALSE(pool->try_allocate(too_big));
    CHECK_FALSE(pool->try_allocate(~std::size_t{0}));
    const auto s = pool->stats();
    CHECK(s.misses == 0);
    CHECK(s.bytes_allocated == 0);
}

TEST_CASE_TEMPLATE("trim gives every cached buffer back", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    for (std::size_t n : {100u, 5000u, 70000u}) pool->allocate(n).release();
    auto held = pool->allocate(100);
    const auto before = pool->stats();
    CHECK(before.bytes_cached > 0);
    const auto freed = pool->trim();
    CHECK(freed == before.bytes_cached);
    const auto after = pool->stats();
    CHECK(after.bytes_cached == 0);
    CHECK(after.bytes_allocated == held.bucket_size());
    CHECK(after.driver_frees == 2);
    CHECK(pool->clear() == 0);
}

TEST_CASE_TEMPLATE("a handle from another pool is refused, and one that outlives its pool is safe", P,
                   CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    auto other = make_pool<P>();
    auto h = other->allocate(100);
    CHECK_FALSE(pool->release(h));
    CHECK(h);  // untouched
    CHECK(other->release(h));
    CHECK_FALSE(h);

    auto orphan = pool->allocate(100);
    write_bytes(orphan.buffer(), pattern(100, 3));
    pool.reset();  // the pool goes first
    CHECK(orphan.pool() == nullptr);
    CHECK(read_bytes(orphan.buffer(), 100) == pattern(100, 3));
    orphan.release();  // frees the buffer itself (ASan and the mock ledger check)
}

TEST_CASE_TEMPLATE("stats add up", P, CLPOOL_CONTRACT_POOLS) {
    auto pool = make_pool<P>();
    std::vector<typename P::handle> held;
    for (std::size_t n = 1; n < 300000; n = n * 3 + 7) held.push_back(pool->allocate(n));
    for (std::size_t i = 0; i < held.size(); i += 2) held[i].release();
    const auto s = pool->stats();
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
    CHECK(s.bytes_in_use >= s.bytes_requested);
    CHECK(s.peak_bytes_allocated >= s.bytes_allocated);
    std::uint64_t hits = 0, misses = 0;
    std::size_t in_use = 0;
    for (const auto& b : s.buckets) {
        hits += b.hits;
        misses += b.misses;
        in_use += b.in_use_buffers * b.bucket_size;
    }
    CHECK(hits == s.hits);
    CHECK(misses == s.misses);
    CHECK(in_use == s.bytes_in_use);
}
