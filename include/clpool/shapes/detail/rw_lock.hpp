// rw_lock: a one-word reader-writer lock for the shape trie's stripes (one atomic add to enter, one to leave).
#pragma once

#include <atomic>
#include <cstdint>

namespace clpool::detail {

// Why not std::shared_mutex: glibc's pthread_rwlock costs about three atomic
// read-modify-writes per shared lock/unlock pair, and on a trie hit that was
// more than the whole walk (docs/SHAPES.md has the numbers). This one costs
// two. Writers take priority: once a writer has announced itself, arriving
// readers step back and wait, so a stream of readers cannot starve it.
// Waiting uses std::atomic::wait (a futex after a short spin), so
// oversubscribed threads sleep instead of spinning.
// Meets SharedLockable and Lockable (std::shared_lock / std::unique_lock).
class rw_lock {
public:
    void lock_shared() noexcept {
        if (!(state_.fetch_add(reader, std::memory_order_acquire) & writer)) return;
        lock_shared_slow();
    }
    void unlock_shared() noexcept {
        // The last reader to leave while a writer waits wakes it.
        if (state_.fetch_sub(reader, std::memory_order_release) == (reader | writer)) state_.notify_all();
    }
    void lock() noexcept {
        std::uint32_t s = state_.load(std::memory_order_relaxed);
        for (;;) {  // claim the writer bit
            if (s & writer) {
                state_.wait(s, std::memory_order_relaxed);
                s = state_.load(std::memory_order_relaxed);
            } else if (state_.compare_exchange_weak(s, s | writer, std::memory_order_acquire)) {
                break;
            }
        }
        // Readers already inside drain; new ones step back.
        while ((s = state_.load(std::memory_order_acquire)) != writer) state_.wait(s, std::memory_order_acquire);
    }
    void unlock() noexcept {
        state_.fetch_and(~writer, std::memory_order_release);
        state_.notify_all();
    }

private:
    static constexpr std::uint32_t writer = 1;
    static constexpr std::uint32_t reader = 2;

    void lock_shared_slow() noexcept {
        for (;;) {
            // Step back so the writer can drain, then wait for it to finish.
            std::uint32_t s = state_.fetch_sub(reader, std::memory_order_relaxed) - reader;
            if (s == writer) state_.notify_all();  // we were the reader it waited for
            while (s & writer) {
                state_.wait(s, std::memory_order_relaxed);
                s = state_.load(std::memory_order_relaxed);
            }
            if (!(state_.fetch_add(reader, std::memory_order_acquire) & writer)) return;
        }
    }

    std::atomic<std::uint32_t> state_{0};
};

}  // namespace clpool::detail
