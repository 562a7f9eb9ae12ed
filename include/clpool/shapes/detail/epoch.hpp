// epoch: process-wide epoch-based reclamation (EBR) for lock-free readers, with membarrier-backed cheap pins.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>

#include <clpool/platform/asymmetric_fence.hpp>
#include <clpool/platform/fork_locks.hpp>

// ThreadSanitizer does not model the asymmetric fence: there pins are seq_cst.
#define CLPOOL_EPOCH_TSAN CLPOOL_ASYMMETRIC_FENCE_TSAN

namespace clpool::detail {

// Something that can be retired: unlinked from every shared structure, to be
// freed once no reader can still hold a pointer to it. The hook lives inside
// the object (intrusive), so retire() never allocates and never fails.
struct epoch_retired {
    epoch_retired* retired_next = nullptr;
    void (*reclaim)(epoch_retired*) noexcept = nullptr;  // frees the object
    std::uint64_t retired_epoch = 0;
};

// One thread's view: whether it is inside a read section, and at which epoch;
// and what it has retired since the last reclaim. Allocated once, kept in a
// push-only list, taken over by a later thread after its owner exits.
struct alignas(64) epoch_record {
    // 0: outside any read section; otherwise (epoch << 1) | 1. Written only
    // by the owner (plain stores); read by the reclaimer.
    std::atomic<std::uint64_t> state{0};
    std::uint32_t nest = 0;           // read-section nesting; owner only
    std::uint32_t since_reclaim = 0;  // retires since this thread last tried to reclaim; owner only
    std::atomic<epoch_retired*> retired{nullptr};  // pushed by the owner, taken whole by the reclaimer
    std::atomic<bool> in_use{true};
    // Lent to a thread already past its thread_local destructors' start (a
    // thread_local holder dropping Shapes after the releaser below ran): given
    // back at the end of each outermost section or retire, so a dying thread
    // never keeps a record for good. Owner only.
    bool transient = false;
    epoch_record* next = nullptr;  // immutable once the record is in the list
};

// This thread's record (nullptr until its first pin or retire), and whether
// the thread is past its thread_local destructors' start.
inline constinit thread_local epoch_record* epoch_tls_record = nullptr;
inline constinit thread_local bool epoch_tls_exited = false;
// Dead lists this thread has cut off and is freeing now (a reclaim function may nest a round).
inline constinit thread_local std::uint32_t epoch_tls_freeing = 0;

// Gives the thread's record back when the thread exits.
struct epoch_record_releaser {
    epoch_record* record = nullptr;
    ~epoch_record_releaser() {
        epoch_tls_exited = true;
        epoch_tls_record = nullptr;
        // Its retired objects stay on it; any later reclaim takes them.
        if (record) record->in_use.store(false, std::memory_order_release);
    }
};
inline thread_local epoch_record_releaser epoch_tls_releaser;

// The domain: one per process, never destroyed (leftover retired objects are
// simply left at exit, reachable from it, so leak checkers stay quiet and no
// destructor runs at exit).
//
// Protocol (as crossbeam-epoch, with an asymmetric fence):
//   reader pin:   state = (G << 1) | 1 (a plain store), then a compiler-only
//                 barrier; unpin: state = 0 (release store).
//   retire:       the object, already unlinked, is pushed on the thread's list.
//   reclaim:      under one mutex: take every thread's list (tagging it with
//                 the current epoch g), asymmetric_fence::heavy() (a full
//                 fence on every running thread of the process, pairing with
//                 the readers' light() barriers), scan the records: if every
//                 pinned one is at g, advance G to g + 1. Objects tagged t are
//                 freed once G >= t + 2: every reader that could have seen
//                 them has left its section.
// Without membarrier the reader's barrier is a full fence; if membarrier is
// refused after start-up, pins switch to fences and every later round forces
// the barrier another way (asymmetric_fence.hpp).
class epoch_domain {
public:
    static constexpr std::uint32_t reclaim_every = 128;  // retires per thread between reclaim attempts

    static epoch_domain& instance() noexcept {
        static epoch_domain* d = new epoch_domain();  // intentionally never deleted
        return *d;
    }

    // Whether reader pins are cheap now (membarrier registered at start-up
    // and not refused since).
    bool uses_membarrier() const noexcept { return !CLPOOL_EPOCH_TSAN && asymmetric_fence::cheap(); }

    // Enters a read section (nests). Cost: a thread_local load, a relaxed
    // load of the global epoch and a plain store, plus a compiler barrier
    // (with membarrier) or a full fence (without). Never fails.
    static epoch_record* pin() noexcept {
        epoch_record* r = epoch_tls_record;
        if (!r) [[unlikely]]
            r = instance().acquire_record();
        if (r->nest++ == 0) {
            const std::uint64_t g = global_.load(std::memory_order_relaxed);
#if CLPOOL_EPOCH_TSAN
            r->state.store((g << 1) | 1, std::memory_order_seq_cst);
            std::atomic_thread_fence(std::memory_order_seq_cst);
#else
            // Release (a plain store on x86): a reclaimer that reads this
            // state also sees the end of this thread's earlier sections.
            r->state.store((g << 1) | 1, std::memory_order_release);
            asymmetric_fence::light();
#endif
        }
        return r;
    }

    // Leaves a read section: the outermost one clears the state (a release store).
    static void unpin(epoch_record* r) noexcept {
        if (--r->nest == 0) {
            r->state.store(0, std::memory_order_release);
            if (r->transient) [[unlikely]]
                give_back(r);
        }
    }

    // Hands over an object already unreachable for new readers; it is freed
    // by a later reclaim. Never allocates, never throws. Every
    // reclaim_every retires on one thread, tries a reclaim (skipped if
    // another thread is reclaiming).
    static void retire(epoch_retired* p, void (*reclaim)(epoch_retired*) noexcept) noexcept {
        p->reclaim = reclaim;
        epoch_record* r = epoch_tls_record;
        if (!r) r = instance().acquire_record();
        epoch_retired* head = r->retired.load(std::memory_order_relaxed);
        do p->retired_next = head;
        while (!r->retired.compare_exchange_weak(head, p, std::memory_order_release, std::memory_order_relaxed));
        if (r->transient) {  // a dying thread: its retires stay on the record for any later reclaim
            if (r->nest == 0) give_back(r);
            return;
        }
        if (++r->since_reclaim >= reclaim_every) {
            r->since_reclaim = 0;
            instance().reclaim(false);
        }
    }

    // Reclaims as much as can be reclaimed now: three rounds (enough, with no
    // thread inside a read section, to free everything retired before the
    // call). Blocks only on another reclaim, and returns only once the
    // objects other threads' rounds took off the lists are freed too (a round
    // frees outside the mutex). Called from a reclaim function (inside a
    // round's frees), it runs its rounds but waits for no other round: two
    // such rounds on two threads would wait for each other. Returns the
    // objects freed. Cost: three membarrier calls (microseconds) plus the frees.
    std::size_t collect() noexcept {
        std::size_t n = 0;
        for (int i = 0; i < 3; ++i) n += reclaim(true);
        if (epoch_tls_freeing) return n;
        for (std::uint32_t f; (f = freeing_.load(std::memory_order_acquire)) != 0;)
            freeing_.wait(f, std::memory_order_acquire);
        return n;
    }

    // Objects retired and not yet freed (a snapshot; walks the lists under the reclaim mutex).
    std::size_t pending() noexcept {
        std::lock_guard lock(mutex_);
        std::size_t n = 0;
        for (auto* p = limbo_; p; p = p->retired_next) ++n;
        for (auto* r = records_.load(std::memory_order_acquire); r; r = r->next)
            for (auto* p = r->retired.load(std::memory_order_acquire); p; p = p->retired_next) ++n;
        return n;
    }

    std::uint64_t epoch() const noexcept { return global_.load(std::memory_order_relaxed); }

    // Records in the list (held or free), and those held by a thread now.
    // Snapshots, for tests and diagnostics: the list only grows when more
    // threads use the domain at once than ever before.
    std::size_t records() const noexcept {
        std::size_t n = 0;
        for (auto* r = records_.load(std::memory_order_acquire); r; r = r->next) ++n;
        return n;
    }
    std::size_t records_in_use() const noexcept {
        std::size_t n = 0;
        for (auto* r = records_.load(std::memory_order_acquire); r; r = r->next)
            n += r->in_use.load(std::memory_order_relaxed) ? 1 : 0;
        return n;
    }

private:
    epoch_domain() noexcept {
        asymmetric_fence::cheap();  // registers membarrier before the first pin
        fork_locks::add(fork_rank::epoch,
                        {[](void* d) noexcept { static_cast<epoch_domain*>(d)->mutex_.lock(); },
                         [](void* d) noexcept { static_cast<epoch_domain*>(d)->mutex_.unlock(); },
                         [](void* d) noexcept { static_cast<epoch_domain*>(d)->after_fork_child(); }, this});
    }

    // In a fork child, before any other code runs there: only the forking
    // thread lives on. Every other thread's record is idle for good, though it
    // may show a read section the parent thread was inside at the fork, which
    // would keep the epoch from ever advancing here: unpin and free those
    // records (their retired objects stay on them for the next reclaim).
    // mutex_ is held (taken by the prepare handler).
    void after_fork_child() noexcept {
        epoch_record* mine = epoch_tls_record;
        for (auto* r = records_.load(std::memory_order_relaxed); r; r = r->next) {
            if (r == mine || !r->in_use.load(std::memory_order_relaxed)) continue;
            r->nest = 0;
            r->transient = false;
            r->state.store(0, std::memory_order_relaxed);
            r->in_use.store(false, std::memory_order_release);
        }
        // Rounds other parent threads were freeing do not go on here: a collect must not wait for them.
        freeing_.store(epoch_tls_freeing, std::memory_order_relaxed);
        mutex_.unlock();
    }

    // A record for this thread: a released one if any, else a new one.
    epoch_record* acquire_record() noexcept {
        epoch_record* r = nullptr;
        for (auto* p = records_.load(std::memory_order_acquire); p; p = p->next) {
            bool free = false;
            if (!p->in_use.load(std::memory_order_relaxed) &&
                p->in_use.compare_exchange_strong(free, true, std::memory_order_acquire)) {
                r = p;
                break;
            }
        }
        if (!r) {
            r = new (std::nothrow) epoch_record();
            if (!r) std::terminate();  // a few dozen bytes once per thread: nothing sensible to do without it
            epoch_record* head = records_.load(std::memory_order_relaxed);
            do r->next = head;
            while (!records_.compare_exchange_weak(head, r, std::memory_order_seq_cst, std::memory_order_relaxed));
        }
        r->nest = 0;
        r->since_reclaim = 0;
        epoch_tls_record = r;
        // Give the record back at thread exit. A thread already past that
        // point (a thread_local destructor dropping or interning a shape)
        // only borrows it: see epoch_record::transient.
        r->transient = epoch_tls_exited;
        if (!r->transient) epoch_tls_releaser.record = r;
        return r;
    }

    // A dying thread's borrowed record, idle again: back to the free list.
    static void give_back(epoch_record* r) noexcept {
        r->transient = false;
        epoch_tls_record = nullptr;
        r->in_use.store(false, std::memory_order_release);
    }

    // The reclaimer's half of the pin protocol: a full barrier on every
    // thread that may have pinned cheaply. Returns false when no such barrier
    // could be had: the round then advances nothing (leak, never free early).
    static bool heavy_barrier() noexcept { return asymmetric_fence::heavy(); }

    // One round. Returns the objects freed. `wait`: block on the mutex, else skip if busy.
    std::size_t reclaim(bool wait) noexcept {
        std::unique_lock lock(mutex_, std::defer_lock);
        if (wait) lock.lock();
        else if (!lock.try_lock()) return 0;
        const std::uint64_t g = global_.load(std::memory_order_relaxed);  // only changed under mutex_
        // Take every thread's retired objects, tagged g, onto the front of limbo_
        // (limbo_ stays sorted newest first).
        for (auto* r = records_.load(std::memory_order_acquire); r; r = r->next) {
            epoch_retired* batch = r->retired.exchange(nullptr, std::memory_order_acquire);
            if (!batch) continue;
            epoch_retired* tail = batch;
            for (;; tail = tail->retired_next) {
                tail->retired_epoch = g;
                if (!tail->retired_next) break;
            }
            tail->retired_next = limbo_;
            limbo_ = batch;
        }
        bool ok = heavy_barrier();
        for (auto* r = records_.load(std::memory_order_acquire); ok && r; r = r->next) {
            const std::uint64_t s = r->state.load(std::memory_order_acquire);
            if ((s & 1) && (s >> 1) != g) ok = false;  // pinned in an older epoch
        }
        std::uint64_t now = g;
        if (ok) global_.store(now = g + 1, std::memory_order_seq_cst);
        // Cut off everything tagged now - 2 or older.
        epoch_retired* dead = nullptr;
        epoch_retired** link = &limbo_;
        while (*link && (*link)->retired_epoch + 2 > now) link = &(*link)->retired_next;
        dead = *link;
        *link = nullptr;
        if (dead) freeing_.fetch_add(1, std::memory_order_relaxed);  // under the mutex: a collect after it waits
        lock.unlock();
        if (!dead) return 0;
        // Free outside the mutex: a reclaim function may release a Shape and retire more.
        ++epoch_tls_freeing;
        std::size_t n = 0;
        while (dead) {
            epoch_retired* next = dead->retired_next;
            dead->reclaim(dead);
            dead = next;
            ++n;
        }
        --epoch_tls_freeing;
        freeing_.fetch_sub(1, std::memory_order_release);
        freeing_.notify_all();
        return n;
    }

    static constinit inline std::atomic<std::uint64_t> global_{1};
    std::atomic<epoch_record*> records_{nullptr};
    std::mutex mutex_;
    epoch_retired* limbo_ = nullptr;  // under mutex_
    std::atomic<std::uint32_t> freeing_{0};  // rounds freeing their dead list now (outside mutex_)
};

// RAII read section on the calling thread (nests). Not to be moved to or
// destroyed on another thread.
class epoch_guard {
public:
    epoch_guard() noexcept : r_(epoch_domain::pin()) {}
    ~epoch_guard() { epoch_domain::unpin(r_); }
    epoch_guard(const epoch_guard&) = delete;
    epoch_guard& operator=(const epoch_guard&) = delete;

private:
    epoch_record* r_;
};

}  // namespace clpool::detail
