// ArenaBuckets: the fine size classes of the sub-allocating pools (docs/ARENA.md).
#pragma once

#include <clpool/core/policy_concepts.hpp>

#include <bit>
#include <cstddef>
#include <limits>

namespace clpool {

// 512-byte steps up to 8 KiB, then 16 classes per doubling: a request is
// rounded up by at most 1/16 (6.25%) of the doubling's base above 8 KiB, at
// most 511 bytes below. Every class is a multiple of 512 bytes, the base-address
// alignment NVIDIA reports, so blocks carved to these sizes stay aligned.
// Cheap to carve (SubAllocated serves a miss from a segment) is what makes
// this many classes affordable: a class that misses costs a split, not a
// driver allocation.
//
// Above 1 MiB (PyTorch's small / large boundary, and SubAllocated's
// small_limit) a sub-allocating pool holds a request at its own size rounded
// to 512 bytes instead (ExactLargeSizes): a transformer's sizes are multiples
// of each other (qkv 3x, the MLP 4x the hidden size), and exact blocks that
// merge on release keep those relations, where 1/16 classes break them.
struct ArenaBuckets {
    static constexpr std::size_t exact_above = std::size_t{1} << 20;
    static constexpr std::size_t exact_round = std::size_t{1} << 9;
    static constexpr std::size_t step_shift = 9;   // 512 B
    static constexpr std::size_t linear_count = 16;  // 512 B .. 8 KiB
    static constexpr std::size_t per_doubling = 16;
    static constexpr std::size_t first_log = 14;  // (8 KiB, 16 KiB] is the first doubling
    static constexpr std::size_t bucket_count =
        linear_count + per_doubling * (std::numeric_limits<std::size_t>::digits - first_log + 1);

    static constexpr std::size_t index_from_size(std::size_t n) noexcept {
        if (n <= (linear_count << step_shift)) return n == 0 ? 0 : ((n - 1) >> step_shift);
        const auto e = static_cast<std::size_t>(std::bit_width(n - 1));  // 2^(e-1) < n <= 2^e
        const std::size_t base = std::size_t{1} << (e - 1);
        const std::size_t step_log = e - 5;  // base / 16
        const std::size_t k = (n - base + (std::size_t{1} << step_log) - 1) >> step_log;  // 1..16
        return linear_count + (e - first_log) * per_doubling + (k - 1);
    }
    static constexpr std::size_t size_from_index(std::size_t i) noexcept {
        if (i < linear_count) return (i + 1) << step_shift;
        const std::size_t j = i - linear_count;
        const std::size_t e = first_log + j / per_doubling;
        const std::size_t k = j % per_doubling + 1;
        if (e == std::numeric_limits<std::size_t>::digits && k == per_doubling)
            return std::numeric_limits<std::size_t>::max();
        return (std::size_t{1} << (e - 1)) + (k << (e - 5));
    }
};

static_assert(BucketPolicy<ArenaBuckets>);
static_assert(ExactLargeSizes<ArenaBuckets>);

}  // namespace clpool
