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
    CHECK(rounded<FixedSetBuckets>(40'000'000) ==
          64 * MiB);  // 40 MB: the next size of the set, not the next power of two
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

// Every size class boundary b: b-1, b and b+1 land in the right class, and a
// spread of sizes between boundaries (a 64-bit LCG, fixed seed) does too.
template <class Buckets>
void check_subdivided() {
    constexpr std::size_t d = Buckets::divisions;
    // Round trip: every bucket's size maps back to its index, and sizes grow strictly.
    for (std::size_t i = 0; i < Buckets::bucket_count; ++i) {
        CAPTURE(i);
        CHECK(Buckets::index_from_size(Buckets::size_from_index(i)) == i);
        if (i > 0) {
            CHECK(Buckets::size_from_index(i - 1) < Buckets::size_from_index(i));
            // The smallest size past the previous class lands in this one.
            CHECK(Buckets::index_from_size(Buckets::size_from_index(i - 1) + 1) == i);
        }
    }
    CHECK(Buckets::size_from_index(Buckets::bucket_count - 1) == std::size_t{1} << 63);
    CHECK(Buckets::index_from_size((std::size_t{1} << 63) + 1) >= Buckets::bucket_count);
    CHECK(Buckets::index_from_size(std::numeric_limits<std::size_t>::max()) >= Buckets::bucket_count);

    std::uint64_t x = 0x9e3779b97f4a7c15u;
    std::size_t previous_n = 1, previous_index = 0;
    for (int k = 0; k < 200'000; ++k) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        const unsigned shift = 1 + static_cast<unsigned>(x >> 58);  // 1 .. 64
        const std::size_t n = 1 + ((x >> 7) >> (64 - std::min(shift, 63u)));
        CAPTURE(n);
        const std::size_t i = Buckets::index_from_size(n);
        REQUIRE(i < Buckets::bucket_count);
        const std::size_t b = Buckets::size_from_index(i);
        CHECK(b >= n);                                                 // it fits
        if (i > 0) CHECK(Buckets::size_from_index(i - 1) < n);         // and is the smallest class that does
        if (n > (std::size_t{1} << Buckets::min_shift)) CHECK((b - n) * d < n);  // bucket < n * (1 + 1/d)
        // Monotonic: a larger request never gets a smaller class.
        if (n >= previous_n) CHECK(i >= previous_index);
        else CHECK(i <= previous_index);
        previous_n = n;
        previous_index = i;
    }
}

TEST_CASE_TEMPLATE("subdivided buckets: round trip, smallest fitting class, bounded rounding, monotonic", B,
                   SubdividedBuckets<1>, SubdividedBuckets<2>, QuarterPowerOfTwoBuckets, EighthPowerOfTwoBuckets,
                   SubdividedBuckets<16>, SubdividedBuckets<8, 12>) {
    check_subdivided<B>();
}

TEST_CASE("the worst-case rounding is reached just past a power of two, and stated exactly") {
    const std::size_t MiB = std::size_t{1} << 20;
    // 1 MiB + 1 byte: a quarter step above, an eighth step above.
    CHECK(rounded<QuarterPowerOfTwoBuckets>(MiB + 1) == MiB + MiB / 4);
    CHECK(rounded<EighthPowerOfTwoBuckets>(MiB + 1) == MiB + MiB / 8);
    CHECK(rounded<EighthPowerOfTwoBuckets>(MiB + MiB / 8) == MiB + MiB / 8);
    CHECK(rounded<EighthPowerOfTwoBuckets>(MiB + MiB / 8 + 1) == MiB + MiB / 4);
    CHECK(rounded<EighthPowerOfTwoBuckets>(1) == 256);
    CHECK(rounded<EighthPowerOfTwoBuckets>(257) == 288);
    CHECK(rounded<QuarterPowerOfTwoBuckets>(257) == 320);
    // A 1.1 MiB request: pow2 holds 2 MiB, eighths hold 1.125 MiB.
    CHECK(rounded<PowerOfTwoBuckets>(MiB + MiB / 10) == 2 * MiB);
    CHECK(rounded<EighthPowerOfTwoBuckets>(MiB + MiB / 10) == MiB + MiB / 8);
}

TEST_CASE("one division per doubling is PowerOfTwoBuckets exactly") {
    using One = SubdividedBuckets<1>;
    CHECK(One::bucket_count == PowerOfTwoBuckets::bucket_count);
    for (std::size_t i = 0; i < One::bucket_count; ++i)
        CHECK(One::size_from_index(i) == PowerOfTwoBuckets::size_from_index(i));
}

TEST_CASE("a pool over eighth buckets serves a request past the floor in its class and reuses it") {
    Pool<EighthPowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, MockBackend> pool(MockBackend{});
    const std::size_t MiB = std::size_t{1} << 20;
    auto a = pool.allocate(MiB + 1);
    CHECK(a.bucket_size() == MiB + MiB / 8);
    a.release();
    auto b = pool.allocate(MiB + MiB / 8);  // same class: a hit
    CHECK(pool.stats().hits == 1);
    auto c = pool.allocate(MiB + MiB / 8 + 1);  // the next class: a miss
    CHECK(c.bucket_size() == MiB + MiB / 4);
    CHECK(pool.stats().misses == 2);
}
