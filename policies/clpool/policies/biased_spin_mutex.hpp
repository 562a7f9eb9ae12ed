// BiasedSpinMutex: a SpinMutex that the one thread using it takes with plain stores, until a second thread comes.
#pragma once

#include <clpool/platform/asymmetric_fence.hpp>
#include <clpool/policies/detail/owner_presence.hpp>
#include <clpool/policies/spin_mutex.hpp>

#include <atomic>
#include <cstdint>

namespace clpool {

// Most pools are used by one thread: an engine's allocating thread, a
// benchmark, a tool. For them a lock's two atomic read-modify-writes per hit
// pair are most of its cost (each drains the store buffer on x86). This
// mutex starts as a SpinMutex. Once one thread has taken it `bias_after`
// times in a row, it is biased to that thread, which from then on locks it
// with a store, a compiler barrier and a load, and unlocks it with a store
// (detail::owner_presence). The first other thread to lock it revokes the
// bias for good: it forces a barrier on every thread of the process (one
// membarrier system call, microseconds) and waits the owner out; from then
// on every thread takes the SpinMutex, with one more load and compare per
// lock than a plain SpinMutex.
//
// BasicLockable, not Lockable: a try_lock() that revokes would have to wait
// for the owner to leave, which is not what a try promises.
//
// Threads are told apart by their thread pointer (the TLS base): free to
// read, unique among live threads. A thread that reuses an exited owner's
// thread pointer inherits the bias; the owner's writes happen before it, as
// the exited thread's stack was handed over under the C library's lock. In a
// fork child, glibc gives new threads the stacks of the parent's other
// threads even if one was inside: a thread that finds its pointer's
// predecessor inside takes the mutex path, and the lock stays held in the
// child, as any mutex held at a fork does.
class BiasedSpinMutex {
public:
    // Locks in a row by one thread, with no other in between, before the bias.
    static constexpr std::uint8_t bias_after = 64;

    BiasedSpinMutex() = default;
    BiasedSpinMutex(const BiasedSpinMutex&) = delete;
    BiasedSpinMutex& operator=(const BiasedSpinMutex&) = delete;

    void lock() noexcept {
        if (try_biased()) [[likely]]
            return;
        lock_mutex();
    }
    void unlock() noexcept {
        if (held_biased_) [[likely]] {
            held_biased_ = false;
            presence_.leave();
            return;
        }
        mutex_.unlock();
    }

    // Whether one thread holds the bias now (tests use it).
    bool is_biased() const noexcept { return mode_.load(std::memory_order_relaxed) == biased; }

private:
    static constexpr std::uint8_t unbiased = 0, biased = 1, revoked = 2;

    static const void* self() noexcept { return __builtin_thread_pointer(); }

    // Only the biased thread may store to presence_: a thread that read
    // itself as owner_ while counting toward the bias, then stopped while
    // another thread gained it, would enter that thread's bias, or wipe its
    // presence. So the mode comes first: read biased (acquire), owner_ is
    // the thread it was given to, or nullptr once revoked.
    bool try_biased() noexcept {
        if (mode_.load(std::memory_order_acquire) != biased || owner_.load(std::memory_order_relaxed) != self() ||
            presence_.occupied() || !presence_.enter(mode_, biased))
            return false;
        held_biased_ = true;
        return true;
    }

    // Out of line, so that lock() inlines to its biased case.
    [[gnu::noinline]] void lock_mutex() noexcept {
        mutex_.lock();
        after_mutex();
    }

    // Under mutex_: revokes another thread's bias, or counts toward one.
    void after_mutex() noexcept {
        switch (mode_.load(std::memory_order_relaxed)) {
            case biased:  // another thread's: its owner never takes the mutex while biased
                revoke();
                break;
            case unbiased:
                if (owner_.load(std::memory_order_relaxed) != self()) {
                    owner_.store(self(), std::memory_order_relaxed);
                    streak_ = 1;
                } else if (++streak_ == bias_after) {
                    // Registers membarrier if no pool has yet, so the owner's fence is a compiler barrier.
                    detail::asymmetric_fence::cheap();
                    mode_.store(biased, std::memory_order_release);  // after owner_: try_biased reads them so
                }
                break;
            default: break;
        }
    }

    [[gnu::cold, gnu::noinline]] void revoke() noexcept {
        mode_.store(revoked, std::memory_order_relaxed);
        detail::owner_presence::barrier();
        presence_.wait_out();
        owner_.store(nullptr, std::memory_order_relaxed);  // spares the old owner its tries
    }

    // 16 bytes: a pool's stripe (lock, in-use list, counters) keeps to two cache lines.
    detail::owner_presence presence_;  // the owner is inside
    detail::owner_presence::gate_word mode_{unbiased};
    bool held_biased_ = false;  // the holder's
    std::uint8_t streak_ = 0;  // under mutex_
    SpinMutex mutex_;
    std::atomic<const void*> owner_{nullptr};  // the biased thread, or the one counting toward it
};

}  // namespace clpool
