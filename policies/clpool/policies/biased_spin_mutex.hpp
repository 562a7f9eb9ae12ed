// BiasedSpinMutex: a SpinMutex that the one thread using it takes with plain stores, until a second thread comes.
#pragma once

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
// Threads are told apart by their thread pointer (the TLS base): free to
// read, unique among live threads. A thread that reuses an exited owner's
// thread pointer inherits the bias; the owner's writes happen before it, as
// the exited thread's stack was handed over under the C library's lock.
class BiasedSpinMutex {
public:
    // Locks in a row by one thread, with no other in between, before the bias.
    static constexpr std::uint32_t bias_after = 64;

    BiasedSpinMutex() = default;
    BiasedSpinMutex(const BiasedSpinMutex&) = delete;
    BiasedSpinMutex& operator=(const BiasedSpinMutex&) = delete;

    void lock() noexcept {
        if (owner_.load(std::memory_order_relaxed) == self() && presence_.enter(mode_, biased)) [[likely]] {
            held_biased_ = true;
            return;
        }
        lock_mutex();
    }
    bool try_lock() noexcept {
        if (owner_.load(std::memory_order_relaxed) == self() && presence_.enter(mode_, biased)) {
            held_biased_ = true;
            return true;
        }
        if (!mutex_.try_lock()) return false;
        after_mutex();
        return true;
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

    // Out of line, so that lock() inlines to its biased case.
    [[gnu::noinline]] void lock_mutex() noexcept {
        mutex_.lock();
        after_mutex();
    }

    // Under mutex_: revokes another thread's bias, or counts toward our own.
    void after_mutex() noexcept {
        switch (mode_.load(std::memory_order_relaxed)) {
        case biased:  // never ours: the owner enters as the owner while biased
            revoke();
            break;
        case unbiased:
            if (candidate_ != self()) {
                candidate_ = self();
                streak_ = 1;
            } else if (++streak_ == bias_after) {
                owner_.store(self(), std::memory_order_relaxed);
                mode_.store(biased, std::memory_order_relaxed);  // the mutex_ unlock publishes both
            }
            break;
        default:
            break;
        }
    }

    [[gnu::cold, gnu::noinline]] void revoke() noexcept {
        mode_.store(revoked, std::memory_order_relaxed);
        detail::owner_presence::barrier();
        presence_.wait_out();
        owner_.store(nullptr, std::memory_order_relaxed);  // spares the old owner a try (a stale read only costs one)
    }

    // The owner's words and the mutex share a cache line: a biased lock
    // touches one line.
    detail::owner_presence presence_;
    detail::owner_presence::gate_word mode_{unbiased};
    bool held_biased_ = false;                 // the holder's
    std::atomic<const void*> owner_{nullptr};  // set once, with the bias
    const void* candidate_ = nullptr;          // under mutex_
    std::uint32_t streak_ = 0;                 // under mutex_
    SpinMutex mutex_;
};

}  // namespace clpool
