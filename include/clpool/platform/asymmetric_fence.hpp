// asymmetric_fence: a Dekker handshake whose frequent side pays a compiler barrier and whose rare side pays a system call.
#pragma once

#include <clpool/platform/fork_locks.hpp>

#include <atomic>
#include <cstddef>
#include <mutex>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define CLPOOL_ASYMMETRIC_FENCE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLPOOL_ASYMMETRIC_FENCE_TSAN 1
#endif
#endif
#ifndef CLPOOL_ASYMMETRIC_FENCE_TSAN
#define CLPOOL_ASYMMETRIC_FENCE_TSAN 0
#endif

namespace clpool::detail {

// Two threads each store to one word, then load the other's: at least one
// must see the other's store. Symmetrically that takes a full fence on both
// sides (an atomic read-modify-write on x86, several nanoseconds). When one
// side runs on every pool release and the other once per pool destruction or
// epoch reclaim, the frequent side can pay only a compiler barrier (light())
// if the rare side forces a full fence on every thread of the process
// (heavy(): membarrier(PRIVATE_EXPEDITED)), as crossbeam-epoch and Folly's
// asymmetric fences do.
//
// Without membarrier (old kernel, seccomp at start-up, ThreadSanitizer, which
// does not model it) light() is a full fence. If membarrier is refused after
// start-up, light() becomes a full fence from then on, and since a thread may
// have read the old mode just before, every later heavy() forces the barrier
// another way: taking write access away from a dirty page makes the kernel
// shoot its TLB entry down on every CPU running the process, with an
// interrupt that is a full barrier there (what .NET's FlushProcessWriteBuffers
// falls back to). heavy() returns false only if that is refused too.
class asymmetric_fence {
public:
    // The frequent side, between its store and its load.
    [[gnu::always_inline]] static void light() noexcept {
#if CLPOOL_ASYMMETRIC_FENCE_TSAN
        std::atomic_thread_fence(std::memory_order_seq_cst);
#else
        if (cheap_.load(std::memory_order_relaxed)) [[likely]]
            std::atomic_signal_fence(std::memory_order_seq_cst);
        else std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    }

    // The rare side, between its store and its load: a full barrier on every
    // thread of the process. False if none could be had (the caller must then
    // not rely on the handshake). Costs a system call (microseconds).
    static bool heavy() noexcept { return state().barrier(); }

    // Whether light() is a compiler barrier only (membarrier registered and not refused since).
    static bool cheap() noexcept {
        state();  // registers on first use
        return cheap_.load(std::memory_order_relaxed);
    }

private:
    struct domain {
        std::mutex mutex;
        bool lost = false;  // membarrier refused after start-up (under mutex)
        void* barrier_page = nullptr;  // for the TLB shootdown (under mutex)

        domain() noexcept {
            fork_locks::add_mutex(fork_rank::asymmetric_fence, mutex);
#if !CLPOOL_ASYMMETRIC_FENCE_TSAN && defined(__linux__) && defined(__NR_membarrier)
            const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
            if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
                cheap_.store(true, std::memory_order_seq_cst);
#endif
        }

        bool barrier() noexcept {
#if !CLPOOL_ASYMMETRIC_FENCE_TSAN && defined(__linux__) && defined(__NR_membarrier)
            std::lock_guard lock(mutex);
            if (cheap_.load(std::memory_order_relaxed)) {
                if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
                    std::atomic_thread_fence(std::memory_order_seq_cst);
                    return true;
                }
                // Refused after start-up (a seccomp filter installed later).
                cheap_.store(false, std::memory_order_seq_cst);
                lost = true;
            }
            std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(__x86_64__) || defined(__i386__)
            return !lost || tlb_shootdown();
#else
            return !lost;  // ARM invalidates TLBs by broadcast, not by interrupting each core: no barrier
#endif
#else
            std::atomic_thread_fence(std::memory_order_seq_cst);
            return true;
#endif
        }

#if !CLPOOL_ASYMMETRIC_FENCE_TSAN && defined(__linux__) && defined(__NR_membarrier)
        // Mutex held. False if the page or the protection change is refused.
        bool tlb_shootdown() noexcept {
            constexpr std::size_t page_bytes = 4096;
            if (!barrier_page) {
                void* p = mmap(nullptr, page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) return false;
                barrier_page = p;
            }
            if (mprotect(barrier_page, page_bytes, PROT_READ | PROT_WRITE) != 0) return false;
            static_cast<std::atomic<int>*>(barrier_page)->fetch_add(1, std::memory_order_seq_cst);  // dirty it
            const bool ok = mprotect(barrier_page, page_bytes, PROT_READ) == 0;
            std::atomic_thread_fence(std::memory_order_seq_cst);
            return ok;
        }
#endif
    };

    // Never destroyed: heavy() may run from static destructors (a pool's).
    static domain& state() noexcept {
        static domain* d = new domain();
        return *d;
    }

    static constinit inline std::atomic<bool> cheap_{false};
};

}  // namespace clpool::detail
