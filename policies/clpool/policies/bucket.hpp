// Bucket policies: how a requested size maps to the size class a pool caches.
#pragma once

#include <clpool/core/policy_concepts.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace clpool {

// Power-of-two rounding with a 256-byte floor: a 1.1 MiB request takes a 2 MiB
// bucket. Few buckets, many hits, at most 2x memory for a request just past a
// power of two.
struct PowerOfTwoBuckets {
    static constexpr std::size_t min_shift = 8;  // 256 B: smaller sizes share one bucket
    static constexpr std::size_t bucket_count = std::numeric_limits<std::size_t>::digits - min_shift;

    static constexpr std::size_t index_from_size(std::size_t n) noexcept {
        if (n <= (std::size_t{1} << min_shift)) return 0;
        return static_cast<std::size_t>(std::bit_width(n - 1)) - min_shift;  // ceil(log2 n) - min_shift
    }
    static constexpr std::size_t size_from_index(std::size_t i) noexcept { return std::size_t{1} << (i + min_shift); }
};

// The fixed set of the netcl PersistentBufferPool: 1 KiB, 4 KiB, ... 256 MiB
// (factors of four), then power-of-two rounding above 256 MiB. Fewer, coarser
// buckets than PowerOfTwoBuckets below 256 MiB: a higher hit rate across
// varied sizes, up to 4x rounding waste.
struct FixedSetBuckets {
    static constexpr std::size_t fixed_count = 10;  // 2^10 .. 2^28, step 2^2
    static constexpr std::size_t first_pow2_shift = 29;  // 512 MiB
    static constexpr std::size_t bucket_count =
        fixed_count + std::numeric_limits<std::size_t>::digits - first_pow2_shift;

    static constexpr std::size_t index_from_size(std::size_t n) noexcept {
        if (n <= 1024) return 0;
        const auto log2_up = static_cast<std::size_t>(std::bit_width(n - 1));  // ceil(log2 n) for n >= 2
        if (log2_up <= 28) return (log2_up - 10 + 1) / 2;                      // round up to an even exponent
        return fixed_count + (log2_up - first_pow2_shift);
    }
    static constexpr std::size_t size_from_index(std::size_t i) noexcept {
        if (i < fixed_count) return std::size_t{1} << (10 + 2 * i);
        return std::size_t{1} << (first_pow2_shift + (i - fixed_count));
    }
};

// Divisions size classes per doubling above a 2^MinShift floor (PyTorch's
// roundup_power2_divisions, jemalloc's size classes): (2^e, 2^(e+1)] is cut
// into Divisions equal steps of 2^e / Divisions, and a request rounds up to
// the end of its step.
//
// Worst-case rounding: a request just above 2^e gets 2^e + 2^e / Divisions, so
// bucket < request * (1 + 1/Divisions): at most 25% more with 4 divisions,
// 12.5% with 8 (PowerOfTwoBuckets: 100%). Requests at or below the floor
// share the first bucket. The cost of finer classes: Divisions times as many
// buckets, so a buffer released at one size is found again only by a request
// in the same step (fewer hits across varied sizes), and each pool keeps
// per-bucket state for 1 + Divisions * (63 - MinShift) buckets (docs/POLICIES.md).
// Divisions must be a power of two no larger than 2^MinShift, so every class
// boundary is a whole number of bytes; the largest bucket is 2^63.
template <std::size_t Divisions, std::size_t MinShift = 8>
struct SubdividedBuckets {
    static_assert(std::has_single_bit(Divisions),
                  "SubdividedBuckets: Divisions must be a power of two (1, 2, 4, 8, ...)");
    static_assert(MinShift < 63, "SubdividedBuckets: MinShift must be below 63 (the floor is 2^MinShift bytes)");
    static_assert(std::bit_width(Divisions) - 1 <= MinShift,
                  "SubdividedBuckets: Divisions must be at most 2^MinShift, so each step is at least one byte");

    static constexpr std::size_t divisions = Divisions;
    static constexpr std::size_t min_shift = MinShift;
    static constexpr std::size_t division_shift = static_cast<std::size_t>(std::bit_width(Divisions)) - 1;
    // Index 0 is the floor; then Divisions classes for each (2^e, 2^(e+1)], e = MinShift .. 62.
    static constexpr std::size_t bucket_count = 1 + Divisions * (63 - MinShift);

    static constexpr std::size_t index_from_size(std::size_t n) noexcept {
        if (n <= (std::size_t{1} << MinShift)) return 0;
        const auto e = static_cast<std::size_t>(std::bit_width(n - 1)) - 1;  // 2^e < n <= 2^(e+1)
        const std::size_t step_shift = e - division_shift;
        const std::size_t q = ((n - 1 - (std::size_t{1} << e)) >> step_shift) + 1;  // 1 .. Divisions
        return (e - MinShift) * Divisions + q;
    }
    static constexpr std::size_t size_from_index(std::size_t i) noexcept {
        if (i == 0) return std::size_t{1} << MinShift;
        const std::size_t e = (i - 1) / Divisions + MinShift, q = (i - 1) % Divisions + 1;
        return (std::size_t{1} << e) + (q << (e - division_shift));
    }
};

// Four classes per doubling: at most 25% rounding.
using QuarterPowerOfTwoBuckets = SubdividedBuckets<4>;
// Eight classes per doubling: at most 12.5% rounding.
using EighthPowerOfTwoBuckets = SubdividedBuckets<8>;

static_assert(BucketPolicy<PowerOfTwoBuckets>);
static_assert(BucketPolicy<FixedSetBuckets>);
static_assert(BucketPolicy<QuarterPowerOfTwoBuckets>);
static_assert(BucketPolicy<EighthPowerOfTwoBuckets>);

}  // namespace clpool
