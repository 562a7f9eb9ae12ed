// Bucket rounding at every boundary, and the device-limit and overflow rules.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace clpool;
using namespace clpool::test;

template <class Buckets>
std::size_t rounded(std::size_t n) {
    return Buckets::size_from_index(Buckets::index_from_size(n));
}

TEST_CASE("power-of-two buckets round up to the next power of two, 256 B at least") {
    CHECK(rounded<PowerOfTwoBuckets>(1) == 256);
    CHECK(rounded<PowerOfTwoBuckets>(256) == 256);
    CHECK(rounded<PowerOfTwoBuckets>(257) == 512);
    for (unsigned shift = 9; shift < 64; ++shift) {
        const std::size_t p = std::size_t{1} << shift;
        CAPTURE(shift);
        CHECK(rounded<PowerOfTwoBuckets>(p) == p);
        CHECK(rounded<PowerOfTwoBuckets>(p - 1) == p);
        if (shift < 63) CHECK(rounded<PowerOfTwoBuckets>(p + 1) == 2 * p);
    }
    // Above 2^63 no power of two fits in size_t: the index says so.
    CHECK(PowerOfTwoBuckets::index_from_size((std::size_t{1} << 63) + 1) == PowerOfTwoBuckets::bucket_count);
}

TEST_CASE("the fixed set is 1 KiB .. 256 MiB by fours, then powers of two") {
    const std::size_t KiB = 1024, MiB = KiB * KiB;
    const std::size_t set[] = {1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB,
                               1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB};
    CHECK(rounded<FixedSetBuckets>(1) == 1 * KiB);
    std::size_t below = 0;
    for (std::size_t b : set) {
        CAPTURE(b);
        CHECK(rounded<FixedSetBuckets>(below + 1) == b);
        CHECK(rounded<FixedSetBuckets>(b - 1) == b);
        CHECK(rounded<FixedSetBuckets>(b) == b);
        below = b;
    }
    CHECK(rounded<FixedSetBuckets>(256 * MiB + 1) == 512 * MiB);
    CHECK(rounded<FixedSetBuckets>(40'000'000) == 64 * MiB);  // the reference's example
    for (unsigned shift = 29; shift < 64; ++shift) {
        const std::size_t p = std::size_t{1} << shift;
        CAPTURE(shift);
        CHECK(rounded<FixedSetBuckets>(p) == p);
        CHECK(rounded<FixedSetBuckets>(p - 1) == p);
    }
    CHECK(FixedSetBuckets::index_from_size((std::size_t{1} << 63) + 1) == FixedSetBuckets::bucket_count);
}

TEST_CASE("a bucket never rounds above the device limit: such requests get their exact size") {
    // A device limit that is not a power of two, as on NVIDIA (a quarter of memory).
    const std::size_t limit = 3'000'000;
    Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, MockBackend> pool(MockBackend({}, limit));
    CHECK(pool.bucket_size_for(2'000'000) == 2'097'152);  // rounds, and fits
    CHECK(pool.bucket_size_for(2'500'000) == 2'500'000);  // 4 MiB would exceed: exact
    CHECK(pool.bucket_size_for(limit) == limit);
    CHECK_THROWS_AS(pool.bucket_size_for(limit + 1), size_error);

    // Exact-size buffers are cached and matched by their size.
    auto a = pool.allocate(2'500'000);
    CHECK(a.bucket_size() == 2'500'000);
    a.release();
    auto b = pool.allocate(2'600'000);  // a different exact size: a miss
    CHECK(b.bucket_size() == 2'600'000);
    auto c = pool.allocate(2'500'000);  // the cached one: a hit
    CHECK(pool.stats().hits == 1);
    CHECK(pool.stats().misses == 2);
}

TEST_CASE("a size whose rounding overflows is refused with the value and the limit") {
    Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, MockBackend> pool(
        MockBackend({}, std::numeric_limits<std::size_t>::max()));
    const std::size_t huge = (std::size_t{1} << 63) + 1;
    try {
        (void)pool.allocate(huge);
        FAIL("expected size_error");
    } catch (const size_error& e) {
        CHECK(e.requested() == huge);
        CHECK(e.limit() == (std::size_t{1} << 63));
        CHECK(std::string(e.what()).find("overflows") != std::string::npos);
    }
}
