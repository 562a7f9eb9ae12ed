// parallel_copy: memcpy split over a few worker threads, for filling and draining staging buffers.
#pragma once

#include <algorithm>
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
        std::size_t queued = 0;
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
            done.pending = queued;
        }
        cv_.notify_all();
        // The caller copies the first piece, and whatever could not be queued.
        const std::size_t mine_end = std::min(n, piece * (queued + 1));
        std::memcpy(dst, src, std::min(piece, n));
        if (mine_end < n)
            std::memcpy(static_cast<char*>(dst) + mine_end, static_cast<const char*>(src) + mine_end, n - mine_end);
        std::unique_lock lock(done.mutex);
        done.cv.wait(lock, [&] { return done.pending == 0; });
    }

    // The number of threads a copy may use by default: half the cores, 1 to 8.
    static unsigned default_parts() noexcept {
        const unsigned hw = std::thread::hardware_concurrency();
        return std::clamp(hw / 2, 1u, 8u);
    }

private:
    static constexpr std::size_t min_part = 256 * 1024;  // below this a thread hand-off costs more than it saves

    struct latch {
        std::mutex mutex;
        std::condition_variable cv;
        std::size_t pending = 0;
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
        }
    }

    void run() noexcept {
        for (;;) {
            task t{};
            {
                std::unique_lock lock(mutex_);
                cv_.wait(lock, [&] { return !tasks_.empty(); });
                t = tasks_.front();
                tasks_.pop_front();
            }
            std::memcpy(t.dst, t.src, t.n);
            std::lock_guard lock(t.done->mutex);
            if (--t.done->pending == 0) t.done->cv.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<task> tasks_;
    std::size_t workers_ = 0;
};

}  // namespace clpool::detail
