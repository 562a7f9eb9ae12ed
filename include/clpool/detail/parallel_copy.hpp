// parallel_copy: memcpy split over a few worker threads, for filling and draining staging buffers.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace clpool::detail {

// One memcpy runs at roughly one core's memory bandwidth (10-20 GB/s), below
// what a PCIe 5 DMA moves; staging from pageable memory only beats the
// driver's own pageable path if the host copies run on several cores.
//
// The workers are started on first use and never stopped: the object is
// new-ed and never deleted, and the threads are detached, so nothing runs at
// process exit. Thread-safe: concurrent copies queue their parts.
//
// Hand-off: a staged transfer hands a chunk every few tens of microseconds,
// and waking a sleeping thread through a futex costs about as much (more in a
// VM). So a worker that finished a part spins (with a CPU pause) for up to
// worker_spin before it sleeps, a copy wakes only as many sleepers as it has
// parts for (notify_one each, none when all are spinning), and the caller
// spins on the parts' counter before it blocks. Nobody spins where the
// workers and the caller outnumber the cores.
class copy_workers {
public:
    static copy_workers& instance() {
        static auto* w = new copy_workers;  // intentionally never deleted
        return *w;
    }

    // Copies n bytes in `parts` pieces, the calling thread doing one of them.
    // Returns when all are done. Never throws: if a worker cannot be started
    // the calling thread copies the rest itself.
    void copy(void* dst, const void* src, std::size_t n, unsigned parts) noexcept {
        parts = std::max(1u, parts);
        if (parts == 1 || n < 2 * min_part) {
            std::memcpy(dst, src, n);
            return;
        }
        parts = static_cast<unsigned>(std::min<std::size_t>(parts, n / min_part));
        ensure_workers(parts - 1);
        // Pieces on 4 KiB boundaries so two threads never write one page.
        const std::size_t piece = ((n / parts) + 4095) & ~std::size_t{4095};
        latch done;
        std::size_t queued = 0, wake = 0;
        {
            std::lock_guard lock(mutex_);
            for (std::size_t off = piece; off < n && queued + 1 < parts && queued < workers_; off += piece, ++queued) {
                const std::size_t len = std::min(piece, n - off);
                auto* d = static_cast<char*>(dst) + off;
                auto* s = static_cast<const char*>(src) + off;
                try {
                    tasks_.push_back(task{d, s, len, &done});
                } catch (...) {
                    break;
                }
            }
            done.pending.store(queued, std::memory_order_relaxed);
            available_.store(tasks_.size(), std::memory_order_release);
            wake = std::min(queued, sleepers_);
        }
        for (std::size_t i = 0; i < wake; ++i) cv_.notify_one();
        // The caller copies the first piece, and whatever could not be queued.
        const std::size_t mine_end = std::min(n, piece * (queued + 1));
        std::memcpy(dst, src, std::min(piece, n));
        if (mine_end < n)
            std::memcpy(static_cast<char*>(dst) + mine_end, static_cast<const char*>(src) + mine_end, n - mine_end);
        if (spinning_allowed())
            spin_until(caller_spin, [&] { return done.pending.load(std::memory_order_acquire) == 0; });
        // Taken even when the count is already 0: a worker touches `done` only under
        // its mutex, so once we hold it no worker still uses it.
        std::unique_lock lock(done.mutex);
        done.waiting = true;
        done.cv.wait(lock, [&] { return done.pending.load(std::memory_order_acquire) == 0; });
    }

    // The number of threads a copy may use by default: half the cores, 1 to 8.
    static unsigned default_parts() noexcept {
        const unsigned hw = std::thread::hardware_concurrency();
        return std::clamp(hw / 2, 1u, 8u);
    }

private:
    static constexpr std::size_t min_part = 256 * 1024;  // below this a thread hand-off costs more than it saves
    // How long a worker waits hot for the next part, and a caller for its parts, before sleeping.
    static constexpr std::chrono::microseconds worker_spin{200};
    static constexpr std::chrono::microseconds caller_spin{500};

    struct latch {
        std::mutex mutex;
        std::condition_variable cv;
        std::atomic<std::size_t> pending{0};
        bool waiting = false;  // the caller sleeps on cv (under mutex)
    };
    struct task {
        char* dst;
        const char* src;
        std::size_t n;
        latch* done;
    };

    copy_workers() = default;

    void ensure_workers(std::size_t want) noexcept {
        std::lock_guard lock(mutex_);
        while (workers_ < want) {
            try {
                std::thread([this] { run(); }).detach();
            } catch (...) {
                return;  // fewer workers: copy() does the rest on the caller
            }
            ++workers_;
            workers_count_.store(workers_, std::memory_order_relaxed);
        }
    }

    static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }

    // Spins until done() or `limit` has passed; returns done().
    template <class Done>
    static bool spin_until(std::chrono::microseconds limit, Done done) noexcept {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        for (unsigned i = 1;; ++i) {
            if (done()) return true;
            cpu_relax();
            if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
        }
    }

    // Spinning only pays where every worker and the caller have a core.
    bool spinning_allowed() const noexcept {
        const unsigned hw = std::thread::hardware_concurrency();
        return hw > 0 && workers_count_.load(std::memory_order_relaxed) < hw;
    }

    bool try_pop(task& t) noexcept {
        std::lock_guard lock(mutex_);
        if (tasks_.empty()) return false;
        t = tasks_.front();
        tasks_.pop_front();
        available_.store(tasks_.size(), std::memory_order_relaxed);
        return true;
    }

    void run() noexcept {
        for (;;) {
            task t{};
            const bool hot = spinning_allowed() && spin_until(worker_spin, [&] {
                return available_.load(std::memory_order_acquire) != 0 && try_pop(t);
            });
            if (!hot) {
                std::unique_lock lock(mutex_);
                ++sleepers_;
                cv_.wait(lock, [&] { return !tasks_.empty(); });
                --sleepers_;
                t = tasks_.front();
                tasks_.pop_front();
                available_.store(tasks_.size(), std::memory_order_relaxed);
            }
            std::memcpy(t.dst, t.src, t.n);
            std::lock_guard lock(t.done->mutex);
            if (t.done->pending.fetch_sub(1, std::memory_order_acq_rel) == 1 && t.done->waiting)
                t.done->cv.notify_one();
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<task> tasks_;
    std::atomic<std::size_t> available_{0};      // tasks_.size(), for spinners to poll without the lock
    std::size_t workers_ = 0;                     // under mutex_
    std::atomic<std::size_t> workers_count_{0};  // workers_, for spinning_allowed without the lock
    std::size_t sleepers_ = 0;                    // workers blocked on cv_ (under mutex_)
};

}  // namespace clpool::detail
