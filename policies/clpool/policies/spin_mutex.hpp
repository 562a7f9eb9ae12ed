// SpinMutex: a mutex for critical sections of a few dozen instructions, such as a pool's list pop.
#pragma once

#include <atomic>

#include <sched.h>

namespace clpool {

// A test-and-test-and-set lock that never sleeps in the kernel (the oneTBB
// SpinMutex design). Why not std::mutex: a pool hit holds the lock for a few
// nanoseconds, and pthread_mutex_lock/unlock cost several times that on their
// own (two atomic read-modify-writes plus a call each; docs/BENCHMARKS.md has
// the measurements). Here lock() is one atomic
// exchange and unlock() a plain release store: no waiters are woken, because
// none sleep.
//
// Waiting: spin on a read (no cache-line ping-pong) with a growing number of
// pause instructions, then sched_yield() so a preempted holder can
// run. The trade-off: a waiter burns its core (or yields in a loop) instead of
// sleeping, which is right for the pools' short sections and wrong for long
// ones. Pools never hold it across a driver allocation or free. If your threads
// far outnumber your cores, pick a lock policy over std::mutex
// (LockedBy<std::mutex>) or ThreadCached.
//
// Meets BasicLockable and Lockable. Not recursive; not fair.
class SpinMutex {
public:
    SpinMutex() = default;
    SpinMutex(const SpinMutex&) = delete;
    SpinMutex& operator=(const SpinMutex&) = delete;

    void lock() noexcept {
        if (!locked_.exchange(true, std::memory_order_acquire)) [[likely]]
            return;
        wait_and_lock();
    }
    bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
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

    [[gnu::noinline]] void wait_and_lock() noexcept {
        // 1, 2, 4 .. 16 pauses per look (a pause is ~40-140 cycles), then yield.
        int pauses = 1;
        do {
            while (locked_.load(std::memory_order_relaxed)) {
                if (pauses <= 16) {
                    for (int i = 0; i < pauses; ++i) pause();
                    pauses *= 2;
                } else {
                    sched_yield();  // what std::this_thread::yield calls, without <thread>
                }
            }
        } while (locked_.exchange(true, std::memory_order_acquire));
    }

    // Alone on its cache line is the pool's business (its stripes are aligned).
    std::atomic<bool> locked_{false};
};

}  // namespace clpool
