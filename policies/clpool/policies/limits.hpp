// Limit policies: whether a released buffer may stay cached.
#pragma once

#include <clpool/core/policy_concepts.hpp>

#include <cstddef>
#include <cstdint>

namespace clpool {

// Keep everything: highest hit rate, memory grows to the peak working set and
// stays there until trim().
struct Unlimited {
    // Tells the pool it need keep no running total of idle bytes.
    static constexpr bool admits_everything = true;
    constexpr bool admit(std::size_t, std::size_t, std::size_t) const noexcept { return true; }
    constexpr std::size_t max_cached_bytes() const noexcept { return static_cast<std::size_t>(-1); }
};

// Cap the idle cache by bytes and by buffers per bucket, so a long run's peak
// does not stay reserved forever and one size cannot hoard the cache.
// The caps are given explicitly; the named pools (pools/aliases.hpp) take
// them from the environment.
struct Capped {
    std::size_t max_bytes;
    std::size_t max_per_bucket;

    static constexpr std::size_t default_per_bucket = 16;

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
