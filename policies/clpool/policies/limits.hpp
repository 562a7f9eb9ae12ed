// Limit policies: whether a released buffer may stay cached.
#pragma once

#include <clpool/config.hpp>

#include <cstddef>
#include <cstdint>

namespace clpool {

// A limit policy answers, when a buffer comes back, whether keeping it cached
// stays within its caps. A "no" sends the buffer back to the driver and counts
// as an eviction. `cached_total` and `cached_in_bucket` are the figures before
// the buffer would be added.
template <class P>
concept LimitPolicy = requires(const P& p, std::size_t n) {
    { p.admit(n, n, n) } noexcept -> std::same_as<bool>;
    { p.max_cached_bytes() } noexcept -> std::same_as<std::size_t>;
};

// Keep everything: highest hit rate, memory grows to the peak working set and
// stays there until trim().
struct Unlimited {
    constexpr bool admit(std::size_t, std::size_t, std::size_t) const noexcept { return true; }
    constexpr std::size_t max_cached_bytes() const noexcept { return static_cast<std::size_t>(-1); }
};

// Cap the idle cache by bytes and by buffers per bucket, so a long run's peak
// does not stay reserved forever and one size cannot hoard the cache.
// Default caps: CLPOOL_MAX_CACHED_GB (4 GiB if unset) and 16 per bucket.
struct Capped {
    std::size_t max_bytes;
    std::size_t max_per_bucket;

    static constexpr std::size_t default_per_bucket = 16;

    // Throws config_error if CLPOOL_MAX_CACHED_GB is set but invalid.
    Capped() : Capped(static_cast<std::size_t>(config::max_cached_bytes()), default_per_bucket) {}
    constexpr Capped(std::size_t bytes, std::size_t per_bucket) noexcept
        : max_bytes(bytes), max_per_bucket(per_bucket) {}

    constexpr bool admit(std::size_t bucket_bytes, std::size_t cached_total,
                         std::size_t cached_in_bucket) const noexcept {
        return cached_in_bucket < max_per_bucket && bucket_bytes <= max_bytes &&
               cached_total <= max_bytes - bucket_bytes;
    }
    constexpr std::size_t max_cached_bytes() const noexcept { return max_bytes; }
};

static_assert(LimitPolicy<Unlimited>);
static_assert(LimitPolicy<Capped>);

}  // namespace clpool
