// SpinMutex: a mutex for critical sections of a few dozen instructions, such as a pool's list pop.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__linux__)
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif

namespace clpool {

// A lock that spins briefly, then sleeps in the kernel (Linux: a futex).
// Why not std::mutex: a pool hit holds the lock for a few nanoseconds, and
// pthread_mutex_lock/unlock cost several times that on their own (two atomic
// read-modify-writes plus a call each; docs/BENCHMARKS.md has the
// measurements). Here lock() is one compare-exchange, and unlock() a plain
// release store and a load of the same word: no read-modify-write, and no
// system call unless a waiter sleeps.
//
// Waiting: spin on a read (no cache-line ping-pong) with a growing number of
// pause instructions (about a microsecond in all), then park on the lock word
// until the holder wakes it. Parking, not yielding, is what lets a waiter of
// higher priority (SCHED_FIFO) give the core to a preempted holder of lower
// priority: sched_yield() never does. Parked waiters are woken by unlock();
// a wake-up lost to store reordering in unlock() (it does not fence) costs a
// waiter at most one park period (1 ms), after which it looks again, so every
// wait is bounded by the holder's critical section plus that period.
// Elsewhere than Linux the waiter yields instead of parking.
//
// Meets BasicLockable and Lockable. Not recursive; not fair.
class SpinMutex {
public:
    SpinMutex() = default;
    SpinMutex(const SpinMutex&) = delete;
    SpinMutex& operator=(const SpinMutex&) = delete;

    void lock() noexcept {
        std::uint32_t expected = unlocked;
        if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire, std::memory_order_relaxed))
            [[likely]]
            return;
        wait_and_lock();
    }
    bool try_lock() noexcept {
        std::uint32_t expected = unlocked;
        return state_.load(std::memory_order_relaxed) == unlocked &&
               state_.compare_exchange_strong(expected, locked, std::memory_order_acquire, std::memory_order_relaxed);
    }
    void unlock() noexcept {
        // The load is ordered before the store (same word): it sees every
        // waiter that marked the word before the store lands.
        const bool waiters = state_.load(std::memory_order_relaxed) == contended;
        state_.store(unlocked, std::memory_order_release);
        if (waiters) [[unlikely]]
            wake_one();
    }

private:
    static constexpr std::uint32_t unlocked = 0, locked = 1, contended = 2;  // contended: waiters may sleep

    // The CPU's spin-wait hint, without <immintrin.h> (which is about a third of
    // <clpool/core/pool.hpp>'s compile time, for this one instruction).
    static void pause() noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
        __builtin_ia32_pause();
#elif defined(__GNUC__) && defined(__aarch64__)
        __asm__ volatile("yield" ::: "memory");
#endif
        // Elsewhere no hint: the caller's relaxed load keeps the loop honest.
    }

    // Out of line and cold: lock() and unlock() inline to a few instructions.
    [[gnu::cold, gnu::noinline]] void wait_and_lock() noexcept {
        // 1, 2, 4 .. 16 pauses per look (a pause is ~40-140 cycles): the
        // holder of a short section is usually gone by then.
        for (int pauses = 1; pauses <= 16; pauses *= 2) {
            for (int i = 0; i < pauses; ++i) pause();
            if (state_.load(std::memory_order_relaxed) == unlocked) {
                std::uint32_t expected = unlocked;
                if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                                   std::memory_order_relaxed))
                    return;
            }
        }
        // Then sleep. Whoever takes the lock from here marks it contended,
        // since others may still sleep on it (Drepper, "Futexes are tricky").
        while (state_.exchange(contended, std::memory_order_acquire) != unlocked) park();
    }

    void park() noexcept {
#if defined(__linux__)
        // Sleeps only while the word is still `contended`; 1 ms at most.
        const timespec period{0, 1000000};
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, contended, &period, nullptr,
                0);
#else
        sched_yield();
#endif
    }

    [[gnu::cold, gnu::noinline]] void wake_one() noexcept {
#if defined(__linux__)
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#endif
    }

    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                      std::atomic<std::uint32_t>::is_always_lock_free,
                  "the futex word must be a plain 32-bit integer");
    // Alone on its cache line is the pool's business (its stripes are aligned).
    std::atomic<std::uint32_t> state_{unlocked};
};

// clpool 0.1's spelling, kept for one minor version (CHANGELOG.md, "Migrating from 0.1").
using spin_mutex [[deprecated("use clpool::SpinMutex")]] = SpinMutex;

}  // namespace clpool
