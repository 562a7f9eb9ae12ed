// biased_lock: a ThreadCached magazine's lock, which its own thread takes with plain stores.
#pragma once

#include <clpool/policies/detail/owner_presence.hpp>
#include <clpool/policies/spin_mutex.hpp>

#include <atomic>
#include <cstdint>

namespace clpool::detail {

// A magazine is locked by its own thread on every hit and release, and by
// other threads only for stats(), trim(), a steal and teardown. Its thread
// enters as the owner (owner_presence: no read-modify-write); another thread
// takes the mutex, closes the gate for as long as it holds the lock, and
// waits the owner out. An owner that finds the gate closed takes the mutex.
class biased_lock {
public:
    biased_lock() = default;
    biased_lock(const biased_lock&) = delete;
    biased_lock& operator=(const biased_lock&) = delete;

    // The owner thread only; not nested, and not while that thread holds lock().
    void owner_enter() noexcept {
        if (!presence_.enter(closed_, open)) [[unlikely]]
            owner_take_mutex();
    }
    void owner_exit() noexcept {
        if (owner_has_mutex_) [[unlikely]] {
            owner_has_mutex_ = false;
            mutex_.unlock();
            return;
        }
        presence_.leave();
    }

    // owner_enter() .. owner_exit() for a scope.
    class owner_guard {
    public:
        explicit owner_guard(biased_lock& l) noexcept : l_(l) { l_.owner_enter(); }
        ~owner_guard() { l_.owner_exit(); }
        owner_guard(const owner_guard&) = delete;
        owner_guard& operator=(const owner_guard&) = delete;

    private:
        biased_lock& l_;
    };

    // Any thread, the owner included (outside owner_enter/owner_exit).
    void lock() noexcept {
        mutex_.lock();
        closed_.store(closed, std::memory_order_relaxed);
        owner_presence::barrier();
        presence_.wait_out();
    }
    void unlock() noexcept {
        closed_.store(open, std::memory_order_release);
        mutex_.unlock();
    }

    // lock() on each of a range of locks, with one barrier for all of them
    // (stats() and snapshots lock every magazine of a pool). In range order:
    // lock order is the caller's.
    template <class Range, class Get>
    static void lock_all(Range&& range, Get&& get) noexcept {
        for (auto&& x : range) {
            biased_lock& l = get(x);
            l.mutex_.lock();
            l.closed_.store(closed, std::memory_order_relaxed);
        }
        owner_presence::barrier();
        for (auto&& x : range) get(x).presence_.wait_out();
    }

private:
    static constexpr std::uint8_t open = 0, closed = 1;

    [[gnu::cold, gnu::noinline]] void owner_take_mutex() noexcept {
        mutex_.lock();
        owner_has_mutex_ = true;
    }

    // The owner's word, the gate and the mutex share a cache line: the
    // owner's hit touches one line, and the others are rare.
    owner_presence presence_;
    owner_presence::gate_word closed_{open};
    bool owner_has_mutex_ = false;  // the owner's alone
    SpinMutex mutex_;
};

}  // namespace clpool::detail
