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

static_assert(BucketPolicy<PowerOfTwoBuckets>);
static_assert(BucketPolicy<FixedSetBuckets>);

}  // namespace clpool
