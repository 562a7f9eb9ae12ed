// Lock policies: how a pool serialises access to its free lists.
#pragma once

#include <cstddef>
#include <mutex>

namespace clpool {

// A lock policy names a BasicLockable `mutex_type` and how many independent
// stripes a pool's buckets are spread over. Stripe s guards the buckets with
// index % stripes == s; statistics are kept per stripe, and a snapshot locks
// every stripe in order.
template <class P>
concept LockPolicy = requires {
    typename P::mutex_type;
    { P::stripes } -> std::convertible_to<std::size_t>;
} && (P::stripes >= 1);

// A mutex that does nothing: for pools used by one thread at a time. Free.
struct null_mutex {
    constexpr void lock() noexcept {}
    constexpr bool try_lock() noexcept { return true; }
    constexpr void unlock() noexcept {}
};

// No locking. Fastest; the pool must not be shared between threads.
struct NoLock {
    using mutex_type = null_mutex;
    static constexpr std::size_t stripes = 1;
};

// One mutex for the whole pool. Simple and cheap when uncontended; threads
// serialise on it under load.
struct SingleMutex {
    using mutex_type = std::mutex;
    static constexpr std::size_t stripes = 1;
};

// N mutexes chosen by bucket (the Deeplearning4j record's striped locks):
// threads working on different sizes do not contend. Threads hammering one
// size still share one stripe, and the byte cap becomes an atomic counter.
template <std::size_t N = 16>
struct Striped {
    static_assert(N >= 1, "Striped<N> needs at least one stripe");
    using mutex_type = std::mutex;
    static constexpr std::size_t stripes = N;
};

static_assert(LockPolicy<NoLock>);
static_assert(LockPolicy<SingleMutex>);
static_assert(LockPolicy<Striped<>>);

}  // namespace clpool
