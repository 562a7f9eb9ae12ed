// The four policy concepts a Pool is built from: buckets, flags, limits, locks.
#pragma once

#include <clpool/core/memory_kind.hpp>

#include <concepts>
#include <cstddef>

namespace clpool {

// A bucket policy is a stateless type with
//   static constexpr std::size_t bucket_count;
//   static constexpr std::size_t index_from_size(std::size_t n) noexcept;   // n >= 1
//   static constexpr std::size_t size_from_index(std::size_t i) noexcept;
// such that size_from_index(index_from_size(n)) >= n, and an index of
// bucket_count or more means "no bucket can hold n" (the rounding overflows).
// The pool, not the policy, applies the device's maximum allocation size.
template <class P>
concept BucketPolicy = requires(std::size_t n) {
    { P::bucket_count } -> std::convertible_to<std::size_t>;
    { P::index_from_size(n) } noexcept -> std::same_as<std::size_t>;
    { P::size_from_index(n) } noexcept -> std::same_as<std::size_t>;
};

// A bucket policy may also name
//   static constexpr std::size_t exact_above;  // requests above this many bytes ...
//   static constexpr std::size_t exact_round;  // ... are held at their size rounded up to this (a power of two)
// Over a sub-allocating backend (SubAllocated) the pool then holds such a
// request in its exact bucket at that size, not its class's, and gives the
// block back to the backend on release, where it merges with its free
// neighbours (docs/ARENA.md). Over any other backend the classes apply.
template <class P>
concept ExactLargeSizes = BucketPolicy<P> && requires {
    { P::exact_above } -> std::convertible_to<std::size_t>;
    { P::exact_round } -> std::convertible_to<std::size_t>;
} && P::exact_round != 0 && (P::exact_round & (P::exact_round - 1)) == 0;

// A flag policy answers `kind(backend)` with a MemoryKind. Backends turn the
// kind into their native flags (CL_MEM_READ_WRITE, CL_MEM_ALLOC_HOST_PTR, ...),
// so one policy serves every backend.
template <class P, class Backend>
concept FlagPolicyFor = requires(const P& p, const Backend& b) {
    { p.kind(b) } noexcept -> std::same_as<MemoryKind>;
};

// A limit policy answers, when a buffer comes back, whether keeping it cached
// stays within its caps. A "no" sends the buffer back to the driver and counts
// as an eviction. `cached_total` and `cached_in_bucket` are the figures before
// the buffer would be added.
template <class P>
concept LimitPolicy = requires(const P& p, std::size_t n) {
    { p.admit(n, n, n) } noexcept -> std::same_as<bool>;
    { p.max_cached_bytes() } noexcept -> std::same_as<std::size_t>;
};

// A lock policy names a BasicLockable `mutex_type` and how many independent
// stripes a pool's buckets are spread over. Stripe s guards the buckets with
// index % stripes == s; statistics are kept per stripe, and a snapshot locks
// every stripe in order. It may also supply a front, a cache the pool calls
// before its shared lists: `template <class SharedLists> using front = ...;`
// (a PoolFront, front.hpp; ThreadCached's per-thread magazines). Without one
// the pool has none (no_front).
template <class P>
concept LockPolicy = requires {
    typename P::mutex_type;
    { P::stripes } -> std::convertible_to<std::size_t>;
} && (P::stripes >= 1);

}  // namespace clpool
