// bucket_map: which bucket, and how many bytes, a request is served from (the bucket policy plus the device limit).
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/core/policy_concepts.hpp>

#include <cstddef>

namespace clpool::detail {

struct bucket_choice {
    std::size_t index;  // the bucket; Buckets::bucket_count: the exact bucket
    std::size_t bytes;  // the buffer's size
};

// Buckets's rounding, with the device rule: a size that rounds past the
// device limit is served from the exact bucket (index bucket_count) at its
// own size. With ExactLarge (a sub-allocating pool whose policy asks for it,
// ExactLargeSizes), sizes above Buckets::exact_above go there too, rounded to
// Buckets::exact_round.
template <BucketPolicy Buckets, bool ExactLarge>
struct bucket_map {
    static constexpr std::size_t exact_bucket = Buckets::bucket_count;

    // Throws size_error: nbytes above max_alloc, or a rounding that overflows.
    // Inline: it is on every allocate's path, its throws out of line.
    [[gnu::always_inline]] static bucket_choice classify(std::size_t nbytes, std::size_t max_alloc) {
        const std::size_t n = nbytes == 0 ? 1 : nbytes;
        if (n > max_alloc) [[unlikely]]
            too_large(nbytes, max_alloc, "above the device's maximum allocation size");
        if constexpr (ExactLarge) {
            if (n > Buckets::exact_above) return {exact_bucket, exact_size(n, max_alloc)};
        }
        const std::size_t index = Buckets::index_from_size(n);
        if (index >= Buckets::bucket_count) [[unlikely]]
            too_large(nbytes, Buckets::size_from_index(Buckets::bucket_count - 1), "rounding up to a bucket overflows");
        const std::size_t bytes = Buckets::size_from_index(index);
        if (bytes > max_alloc) return {exact_bucket, n};  // never round past the device limit
        return {index, bytes};
    }

    [[noreturn, gnu::cold, gnu::noinline]] static void too_large(std::size_t nbytes, std::size_t limit,
                                                                 const char* why) {
        throw size_error(nbytes, limit, why);
    }

    // n (at most max_alloc) rounded up to the policy's exact_round, unless
    // that passes the device limit.
    static std::size_t exact_size(std::size_t n, std::size_t max_alloc) noexcept {
        constexpr std::size_t r = Buckets::exact_round;
        const std::size_t up = n + (r - 1);
        if (up < n) return n;  // wraps
        const std::size_t rounded = up & ~(r - 1);
        return rounded <= max_alloc ? rounded : n;
    }
};

}  // namespace clpool::detail
