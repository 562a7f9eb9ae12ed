// Lock policies: how a pool serialises access to its free lists.
#pragma once

#include <clpool/core/policy_concepts.hpp>
#include <clpool/policies/biased_spin_mutex.hpp>
#include <clpool/policies/spin_mutex.hpp>

#include <cstddef>

namespace clpool {

// A mutex that does nothing: for pools used by one thread at a time. Free.
struct NullMutex {
    constexpr void lock() noexcept {}
    constexpr bool try_lock() noexcept { return true; }
    constexpr void unlock() noexcept {}
};
// clpool 0.1's spelling, kept for one minor version (CHANGELOG.md, "Migrating from 0.1").
using null_mutex [[deprecated("use clpool::NullMutex")]] = NullMutex;

// No locking. Fastest; the pool must not be shared between threads.
struct NoLock {
    using mutex_type = NullMutex;
    static constexpr std::size_t stripes = 1;
};

// One lock for the whole pool: a SpinMutex (one compare-exchange to lock, a
// store to unlock; see spin_mutex.hpp for why not std::mutex), biased to the
// pool's thread while only one uses it (biased_spin_mutex.hpp: a store and a
// load to lock). Cheap when uncontended; threads serialise on it under load.
struct SingleMutex {
    using mutex_type = BiasedSpinMutex;
    static constexpr std::size_t stripes = 1;
};

// N locks chosen by bucket (the Deeplearning4j record's striped locks):
// threads working on different sizes do not contend. Threads hammering one
// size still share one stripe, and the byte cap becomes an atomic counter.
template <std::size_t N = 16, class Mutex = SpinMutex>
struct Striped {
    static_assert(N >= 1, "Striped<N> needs at least one stripe");
    using mutex_type = Mutex;
    static constexpr std::size_t stripes = N;
};

// Any BasicLockable over N stripes, e.g. LockedBy<std::mutex> for a lock
// whose waiters sleep in the kernel: slower per hit (pthread's lock and unlock
// are two atomic read-modify-writes and two calls) but kinder when threads far
// outnumber cores.
template <class Mutex, std::size_t N = 1>
struct LockedBy {
    static_assert(N >= 1, "LockedBy<Mutex, N> needs at least one stripe");
    using mutex_type = Mutex;
    static constexpr std::size_t stripes = N;
};

static_assert(LockPolicy<NoLock>);
static_assert(LockPolicy<SingleMutex>);
static_assert(LockPolicy<Striped<>>);

}  // namespace clpool
