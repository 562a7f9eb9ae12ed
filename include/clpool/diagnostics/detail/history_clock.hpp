// history_clock: the history's time stamps (a steady clock one ticker thread keeps to the millisecond) and per-thread order stamps.
#pragma once

#include <clpool/platform/process_state.hpp>
#include <clpool/core/steady_clock.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace clpool::detail {

// Why not read a clock per event: a time-stamp counter read costs 12-18 ns
// on the virtual machines we measured and a steady_clock read more, while a
// hit pair, which records two events, is some 20-30 ns (docs/OBSERVABILITY.md).
// So the first history a process turns on starts one thread that stores
// steady_ns() every `period`, and an event's time stamp is one relaxed load
// of that word: late by up to a period (more on a machine too busy to run the
// ticker). Order does not depend on it: each event also carries its thread's
// order stamp (thread_order), each ring keeps its events in the order
// recorded, and a snapshot's merge (history_ring::merge_order) keeps both
// orders, and each buffer's hand-out before its release.
//
// The ticker never calls OpenCL and never stops; it sleeps between ticks.
// Until it runs, or when no thread can be started, now() reads the steady
// clock itself. A fork child has no ticker until a history is turned on
// there (the parent's pools, and their histories, do no work in a child).
class history_clock {
public:
    static constexpr std::chrono::milliseconds period{1};

    // The ticker's last time, or 0 while it does not run.
    static std::uint64_t ticked() noexcept { return coarse_.load(std::memory_order_relaxed); }

    static std::uint64_t now() noexcept {
        const std::uint64_t t = coarse_.load(std::memory_order_relaxed);
        return t != 0 ? t : steady_ns();
    }

    // Starts this process's ticker if it is not running. Thread-safe and
    // cheap once it runs. False if no thread could be started.
    static bool start() noexcept {
        const std::uint32_t mine = fork_generation() + 1;  // 0: no ticker in any generation
        std::uint32_t seen = ticker_generation_.load(std::memory_order_acquire);
        if (seen == mine) return true;
        raise_to(steady_ns());  // fresh before any caller's next event
        if (!ticker_generation_.compare_exchange_strong(seen, mine, std::memory_order_acq_rel))
            return seen == mine;  // another thread started it
        try {
            std::thread([mine] { tick(mine); }).detach();
            return true;
        } catch (...) {
            coarse_.store(0, std::memory_order_relaxed);  // now() reads the clock per event
            ticker_generation_.store(0, std::memory_order_release);
            return false;
        }
    }

private:
    static void tick(std::uint32_t generation) noexcept {
        while (ticker_generation_.load(std::memory_order_relaxed) == generation) {
            raise_to(steady_ns());
            std::this_thread::sleep_for(period);
        }
    }

    // Sets the time to t unless it is already later: a caller of start() that
    // read the clock before the ticker's last store must not take time back.
    static void raise_to(std::uint64_t t) noexcept {
        std::uint64_t seen = coarse_.load(std::memory_order_relaxed);
        while (seen < t && !coarse_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {}
    }

    // Trivially destructible globals: the detached ticker may outlive main().
    static inline std::atomic<std::uint64_t> coarse_{0};
    static inline std::atomic<std::uint32_t> ticker_generation_{0};
};

// A thread's events in the order it recorded them, whichever rings they went
// to: the thread's number (from 1) in the high 24 bits, a count in the low 40.
// A thread-local count, so no shared cache line. Numbers wrap after 2^24
// threads; a reused number only weakens the merge's order between the two.
class thread_order {
public:
    static constexpr unsigned count_bits = 40;

    static std::uint64_t next() noexcept {
        std::uint64_t s = stamp_;
        if (s == 0) [[unlikely]]
            s = first();
        stamp_ = s + 1;
        return s;
    }
    // next() in two halves, for a caller that checks for 0 (the thread's
    // first stamp not made yet; next() makes it) along with other rare cases.
    static std::uint64_t current() noexcept { return stamp_; }
    static void advance(std::uint64_t taken) noexcept { stamp_ = taken + 1; }
    static std::uint64_t thread_of(std::uint64_t stamp) noexcept { return stamp >> count_bits; }

private:
    [[gnu::noinline]] static std::uint64_t first() noexcept {
        const std::uint64_t n = threads_.fetch_add(1, std::memory_order_relaxed) % ((std::uint64_t{1} << 24) - 1) + 1;
        return n << count_bits;
    }
    static inline std::atomic<std::uint64_t> threads_{0};
    static inline thread_local std::uint64_t stamp_ = 0;
};

}  // namespace clpool::detail
