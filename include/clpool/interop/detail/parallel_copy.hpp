// parallel_copy: memcpy shared out over a few worker threads, for filling and draining staging buffers.
#pragma once

#include <clpool/platform/fork_locks.hpp>
#include <clpool/platform/numa.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>  // SSE2: streaming stores, in every x86-64 build
#endif

namespace clpool::detail {

// memcpy with non-temporal (streaming) stores where the CPU has them: the
// destination lines go to memory without being read for ownership or left
// dirty in the caches, so the DMA that reads the staging buffer next need not
// snoop them out of the caches (docs/TRANSFERS.md has the measurements).
// glibc's memcpy streams only above a threshold tied to the cache size.
// Ends with a store fence, so the stores are visible before whatever the
// caller publishes next (here: the enqueue that starts the DMA).
inline void stream_copy(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
    if (n < head + 64) {
        std::memcpy(d, s, n);
        return;
    }
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
        _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, n);
    _mm_sfence();
#else
    std::memcpy(dst, src, n);
#endif
}

// The open job (attached < max_users, pieces left) with the fewest attached
// workers, the oldest among equals; nullptr if none is open. Jobs: pointers
// to objects with `open()` and `attached`.
template <class Jobs>
auto* fewest_attached(const Jobs& jobs) noexcept {
    std::remove_cvref_t<decltype(*std::begin(jobs))> best = nullptr;
    for (auto* j : jobs)
        if (j->open() && (!best || j->attached < best->attached)) best = j;
    return best;
}

// One core's memcpy is slower than a PCIe DMA, so staging from pageable
// memory beats the driver's own pageable path only if the host copies run on
// several cores.
//
// The workers are started on first use and never stopped: the object is
// new-ed and never deleted, and the threads are detached, so nothing runs at
// process exit. Thread-safe: concurrent copies each post their own job.
//
// Work sharing, not a fixed split: a copy is cut into small pieces that the
// caller and up to parts - 1 workers claim from one atomic counter. The
// caller starts copying at once, and a worker that wakes late (a futex wake
// costs tens of microseconds in a VM, as much as a piece) just takes fewer
// pieces: nobody waits for the slowest thread's whole share. Between copies a
// worker spins (with a CPU pause) for up to worker_spin before it sleeps,
// since a staged transfer posts a chunk every few tens of microseconds; nobody
// spins where the workers and the caller outnumber the cores.
class copy_workers {
public:
    static copy_workers& instance() {
        static auto* w = new copy_workers;  // intentionally never deleted
        return *w;
    }

    // The workers for copies to a device on NUMA node `node` (numa::placement), bound to the
    // node's CPUs so the staging memory they write is the device's node's; instance() where
    // node < 0 or cpus is empty (one node: nothing changes). One set per node, made on first
    // use and never deleted. The calling thread still copies its share wherever it runs.
    static copy_workers& for_node(int node, const std::vector<unsigned>& cpus) {
        if (node < 0 || cpus.empty()) return instance();
        static std::mutex m;
        static auto* sets = new std::vector<std::pair<int, copy_workers*>>;  // intentionally never deleted
        std::lock_guard lock(m);
        for (const auto& [n, w] : *sets)
            if (n == node) return *w;
        auto* w = new copy_workers(cpus);
        sets->emplace_back(node, w);
        return *w;
    }

    // The CPUs this set's workers are bound to (empty: unbound).
    const std::vector<unsigned>& cpus() const noexcept { return cpus_; }

    // Copies n bytes on up to `parts` threads, the calling thread among them.
    // `stream`: with non-temporal stores (stream_copy), for a destination a
    // device reads next rather than the CPU. Returns when every byte is
    // copied. Never throws: if no worker can be started or posted to, the
    // calling thread copies it all.
    void copy(void* dst, const void* src, std::size_t n, unsigned parts, bool stream = false) noexcept {
        parts = std::max(1u, parts);
        if (parts == 1 || n < 2 * min_piece) {
            if (stream) stream_copy(dst, src, n);
            else std::memcpy(dst, src, n);
            return;
        }
        parts = static_cast<unsigned>(std::min<std::size_t>(parts, n / min_piece));
        ensure_workers(parts - 1);
        job j(dst, src, n, piece_for(n, parts), parts - 1, stream);
        bool posted = false;
        std::size_t wake = 0;
        {
            std::lock_guard lock(mutex_);
            try {
                jobs_.push_back(&j);
                posted = true;
            } catch (...) {}
            available_.store(jobs_.size(), std::memory_order_release);
            wake = std::min<std::size_t>(sleepers_, parts - 1);
        }
        if (wake == 1) cv_.notify_one();
        else if (wake > 1) cv_.notify_all();  // one system call for all of them
        j.work();  // the caller claims pieces until none is left
        if (!posted) return;
        {
            std::lock_guard lock(mutex_);  // no worker attaches to j after this
            jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &j));
            available_.store(jobs_.size(), std::memory_order_release);
        }
        // Every piece is claimed; wait for the workers still copying theirs.
        for (unsigned i = 1; j.users.load(std::memory_order_acquire) != 0; ++i) {
            if (i < 4096) cpu_relax();
            else std::this_thread::yield();  // a worker was preempted mid-piece
        }
    }

    // The number of threads a copy may use by default: half the cores, 1 to 16. A staged
    // copy runs at the host's pageable-to-pinned copy bandwidth, which grows with threads past 8
    // on a large host (TRANSFERS.md).
    static unsigned default_parts() noexcept {
        const unsigned hw = std::thread::hardware_concurrency();
        return std::clamp(hw / 2, 1u, 16u);
    }

private:
    // Large enough that one atomic add per claim is noise.
    static constexpr std::size_t min_piece = std::size_t{64} * 1024;
    // How long a worker waits hot for the next job before it sleeps.
    static constexpr std::chrono::microseconds worker_spin{200};

    // One copy. Lives on its caller's stack; workers attach under the mutex
    // while it is posted and detach (users) after their last piece.
    struct job {
        char* dst;
        const char* src;
        std::size_t n;
        std::size_t piece;
        unsigned max_users;
        bool stream;
        std::atomic<std::size_t> next{0};  // offset of the next unclaimed piece
        std::atomic<unsigned> users{0};    // workers attached
        unsigned attached = 0;             // ever attached (under the mutex)

        job(void* d, const void* s, std::size_t len, std::size_t p, unsigned helpers, bool streaming) noexcept
            : dst(static_cast<char*>(d)), src(static_cast<const char*>(s)), n(len), piece(p), max_users(helpers),
              stream(streaming) {}

        bool open() const noexcept { return attached < max_users && next.load(std::memory_order_relaxed) < n; }

        void work() noexcept {
            for (;;) {
                const std::size_t off = next.fetch_add(piece, std::memory_order_relaxed);
                if (off >= n) return;
                if (stream) stream_copy(dst + off, src + off, std::min(piece, n - off));
                else std::memcpy(dst + off, src + off, std::min(piece, n - off));
            }
        }
    };

    // Pieces on 4 KiB boundaries (two threads never write one page), about
    // four per thread, so a late thread costs at most a quarter of a share.
    static std::size_t piece_for(std::size_t n, unsigned parts) noexcept {
        const std::size_t want = n / (std::size_t{parts} * 4);
        return std::max(min_piece, (want + 4095) & ~std::size_t{4095});
    }

    explicit copy_workers(std::vector<unsigned> cpus = {}) noexcept : cpus_(std::move(cpus)) {
        fork_locks::add(fork_rank::copy_workers,
                        {[](void* w) noexcept { static_cast<copy_workers*>(w)->mutex_.lock(); },
                         [](void* w) noexcept { static_cast<copy_workers*>(w)->mutex_.unlock(); },
                         [](void* w) noexcept { static_cast<copy_workers*>(w)->after_fork_child(); }, this});
    }

    // In a fork child (mutex_ held by the prepare handler): the workers did
    // not come along, nor did the callers whose jobs are posted. Forget them
    // all, so the child starts its own workers; the condition variable may
    // count waiters that no longer exist, so it is made anew (the old one is
    // abandoned, not destroyed).
    void after_fork_child() noexcept {
        jobs_.clear();
        available_.store(0, std::memory_order_relaxed);
        workers_ = 0;
        workers_count_.store(0, std::memory_order_relaxed);
        sleepers_ = 0;
        ::new (static_cast<void*>(&cv_)) std::condition_variable();
        mutex_.unlock();
    }

    // Enough workers for this copy's parts beside the copies already in
    // flight (one per device when several upload at once), one per core at most.
    void ensure_workers(std::size_t per_copy) noexcept {
        std::lock_guard lock(mutex_);
        const std::size_t cores = cpus_.empty() ? std::max(1u, std::thread::hardware_concurrency()) : cpus_.size();
        const std::size_t want = std::max(per_copy, std::min(per_copy * (jobs_.size() + 1), cores - 1));
        while (workers_ < want) {
            try {
                std::thread([this] {
                    numa::bind_current_thread(cpus_);  // unbound where the kernel refuses
                    run();
                }).detach();
            } catch (...) {
                return;  // fewer workers: the caller copies more itself
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

    // Spinning only pays where every worker and the caller have a core.
    bool spinning_allowed() const noexcept {
        const unsigned hw = std::thread::hardware_concurrency();
        return hw > 0 && workers_count_.load(std::memory_order_relaxed) < hw;
    }

    // The posted job with room for one more worker and the fewest workers
    // attached, now attached; or nullptr. Mutex held. Fewest first, not oldest
    // first: copies to several devices at once (one staged transfer each)
    // share the workers instead of the first one taking them all.
    job* attach_locked() noexcept {
        job* j = fewest_attached(jobs_);
        if (!j) return nullptr;
        ++j->attached;
        j->users.fetch_add(1, std::memory_order_relaxed);
        return j;
    }

    job* try_attach() noexcept {
        std::lock_guard lock(mutex_);
        return attach_locked();
    }

    // Spins for up to worker_spin polling for a job; nullptr if none came.
    job* spin_for_job() noexcept {
        const auto deadline = std::chrono::steady_clock::now() + worker_spin;
        for (unsigned i = 1;; ++i) {
            if (available_.load(std::memory_order_acquire) != 0)
                if (job* j = try_attach()) return j;
            cpu_relax();
            if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return nullptr;
        }
    }

    void run() noexcept {
        for (;;) {
            job* j = spinning_allowed() ? spin_for_job() : nullptr;
            if (!j) {
                std::unique_lock lock(mutex_);
                ++sleepers_;
                cv_.wait(lock, [&] { return (j = attach_locked()) != nullptr; });
                --sleepers_;
            }
            j->work();
            j->users.fetch_sub(1, std::memory_order_release);  // j may be gone after this
        }
    }

    const std::vector<unsigned> cpus_;  // the node's CPUs the workers run on; empty: anywhere
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<job*> jobs_;                      // posted copies (under mutex_)
    std::atomic<std::size_t> available_{0};      // jobs_.size(), for spinners to poll without the lock
    std::size_t workers_ = 0;                     // under mutex_
    std::atomic<std::size_t> workers_count_{0};  // workers_, for spinning_allowed without the lock
    std::size_t sleepers_ = 0;                    // workers blocked on cv_ (under mutex_)
};

}  // namespace clpool::detail
