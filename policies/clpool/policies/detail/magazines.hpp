// thread_cache: the per-thread magazines behind the ThreadCached lock policy.
#pragma once

#include <clpool/core/detail/process_state.hpp>
#include <clpool/policies/spin_mutex.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace clpool::detail {

// Guards one magazine. Its thread takes it on every hit and release; others
// take it only for stats(), trim() and teardown, so it is almost never
// contended and costs one atomic exchange.
using spin_lock = clpool::spin_mutex;

// The part of a magazine that does not depend on the pool's type: what the
// thread-exit path needs. Owned jointly by its thread's list and its pool's
// registry; the last of the two to let go deletes it.
struct magazine_base {
    spin_lock lock;
    void* pool = nullptr;                            // guarded by lock; nullptr once detached
    void (*flush)(magazine_base*) noexcept = nullptr;  // gives every buffer back to `pool` (lock held)
    void (*destroy)(magazine_base*) noexcept = nullptr;
    std::atomic<int> refs{2};
    // The fork generation it was made in. In a fork child a parent's magazine
    // is never locked or flushed: a parent thread may have held its lock, or
    // its pool's, at the fork, and that thread does not exist here. It leaks.
    const std::uint32_t generation = fork_generation();

    void drop() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(this);
    }
    bool detached() noexcept {
        std::lock_guard g(lock);
        return pool == nullptr;
    }
};

// Set once the calling thread's magazine list is destroyed: anything the
// thread still releases afterwards (from other thread_local destructors)
// takes the shared lists.
inline thread_local bool thread_magazines_gone = false;

// One thread's magazines, one per pool it has used, keyed by the pool's serial
// (never reused, so a new pool at a dead pool's address is not confused with it).
struct thread_magazines {
    struct entry {
        std::uint64_t serial;
        magazine_base* mag;
    };
    std::vector<entry> entries;

    thread_magazines() = default;
    thread_magazines(const thread_magazines&) = delete;
    thread_magazines& operator=(const thread_magazines&) = delete;

    // Thread exit: every magazine goes back to its pool's shared lists.
    ~thread_magazines() {
        thread_magazines_gone = true;
        for (auto& e : entries) {
            if (!same_process(e.mag->generation)) continue;
            {
                std::lock_guard g(e.mag->lock);
                if (e.mag->pool) {
                    e.mag->flush(e.mag);
                    e.mag->pool = nullptr;
                }
            }
            e.mag->drop();
        }
    }

    // Forgets magazines whose pool has been destroyed.
    void prune() noexcept {
        std::erase_if(entries, [](const entry& e) {
            if (!same_process(e.mag->generation)) return true;  // a fork parent's: forget, never lock
            if (!e.mag->detached()) return false;
            e.mag->drop();
            return true;
        });
    }

    static thread_magazines* get() noexcept {
        if (thread_magazines_gone) return nullptr;
        thread_local thread_magazines t;
        return &t;
    }
};

inline std::atomic<std::uint64_t> next_pool_serial{1};

// A pool's side: every magazine made for it, to reach them from stats(),
// trim() and the destructor. Lock order: registry mutex, then magazines (in
// registry order), then the pool's stripe locks.
struct magazine_registry {
    const std::uint64_t serial = next_pool_serial.fetch_add(1, std::memory_order_relaxed);
    mutable std::mutex mutex;
    std::vector<magazine_base*> mags;  // each holds one reference

    // Forgets magazines whose thread has exited (mutex held).
    void prune() noexcept {
        std::erase_if(mags, [](magazine_base* m) {
            if (!m->detached()) return false;
            m->drop();
            return true;
        });
    }
};

// The typed magazine: per bucket, a stack of up to K idle blocks and the
// number of slots reserved against the pool's caps (count <= reserved <= K).
// Counters are the thread's share of the pool's statistics until flushed.
// Aligned to a cache line, hot counters next to the lock: two threads'
// magazines never share a line.
template <class Block, std::size_t K, std::size_t BucketCount>
struct alignas(64) magazine : magazine_base {
    struct slots {
        std::uint32_t count = 0;
        std::uint32_t reserved = 0;
        std::uint64_t hits = 0;
        std::array<Block*, K> blocks;
    };
    std::size_t bytes_idle = 0;
    std::size_t requested = 0;  // change to bytes_requested, modulo 2^64 (a buffer may come back to another thread)
    std::array<slots, BucketCount> buckets{};
};

// The state a thread-cached pool adds: its registry and, per bucket, how many
// magazine slots are reserved against the caps (guarded by the bucket's stripe).
template <std::size_t BucketCount>
struct thread_cache_state {
    magazine_registry registry;
    std::array<std::size_t, BucketCount> reserved{};
};

// What pools with other lock policies carry instead: nothing.
struct no_thread_cache {};

// The thread-cache paths of Pool<..., ThreadCached<K, Shared>, ...>. A friend
// of the pool: the shared lists and counters are the pool's own.
//
// Accounting: a block in a magazine, like a block handed out from one, stays
// on its stripe's in-use list and counts as in use in the shared counters; the
// magazine counts it as idle, and stats() moves it across. For the caps, each
// magazine slot is reserved in the shared idle total and per-bucket count, so
// cached + pending + every magazine's blocks never exceeds a cap.
template <class P>
struct thread_cache_ops {
    using block_type = typename P::block_type;
    static constexpr std::size_t K = P::lock_policy::magazine_size;
    static constexpr std::size_t batch = K / 2;
    using mag_type = magazine<block_type, K, P::exact_bucket>;

    // The calling thread's magazine for `pool`, made on first use; nullptr if
    // none can be had (thread exiting, out of host memory): use the shared lists.
    static mag_type* mine(P& pool) noexcept {
        thread_magazines* t = thread_magazines::get();
        if (!t) return nullptr;
        const auto serial = pool.tc_.registry.serial;
        for (auto& e : t->entries)
            if (e.serial == serial) return static_cast<mag_type*>(e.mag);
        return enroll(pool, *t);
    }

    static mag_type* enroll(P& pool, thread_magazines& t) noexcept {
        auto& reg = pool.tc_.registry;
        mag_type* m = nullptr;
        try {
            t.prune();
            t.entries.reserve(t.entries.size() + 1);
            std::lock_guard g(reg.mutex);
            reg.prune();
            reg.mags.reserve(reg.mags.size() + 1);
            m = new mag_type;
            m->pool = &pool;
            m->flush = &flush_thunk;
            m->destroy = [](magazine_base* b) noexcept { delete static_cast<mag_type*>(b); };
            reg.mags.push_back(m);  // capacity reserved: cannot throw
        } catch (...) {
            return nullptr;
        }
        t.entries.push_back({reg.serial, m});
        return m;
    }

    // A hit from the magazine, refilled from the shared lists when empty.
    // nullptr is a miss (counted): the caller creates a buffer.
    static block_type* take(P& pool, mag_type& m, std::size_t index, std::size_t nbytes) noexcept {
        std::lock_guard g(m.lock);
        auto& sl = m.buckets[index];
        if (sl.count == 0 && !refill(pool, m, index)) return nullptr;
        block_type* b = sl.blocks[--sl.count];
        ++sl.hits;
        m.bytes_idle -= b->bucket_bytes;
        m.requested += nbytes;
        b->requested = nbytes;
        return b;
    }

    // Moves up to K/2 free blocks into the magazine (stripe lock taken here).
    static bool refill(P& pool, mag_type& m, std::size_t index) noexcept {
        auto& bucket = pool.buckets_[index];
        auto& s = pool.stripes_[P::stripe_of(index)];
        auto& sl = m.buckets[index];
        std::lock_guard lock(s.mutex);
        if constexpr (P::traits::has_events) {
            if (!bucket.pending.empty()) pool.reap_pending(bucket, s);
        }
        std::size_t got = 0;
        for (; got < batch && !bucket.free.empty(); ++got) {
            block_type& b = bucket.free.front();
            bucket.free.pop_front();
            const std::size_t bytes = b.bucket_bytes;
            --bucket.cached_count;
            ++bucket.in_use_count;
            s.bytes_cached -= bytes;
            s.bytes_in_use += bytes;
            s.in_use.push_back(b);
            if (sl.count < sl.reserved) {
                pool.idle_total_.sub(bytes);  // it fills a slot already counted as idle
            } else {
                ++sl.reserved;  // its place in the caps moves with it
                ++pool.tc_.reserved[index];
            }
            sl.blocks[sl.count++] = &b;
            m.bytes_idle += bytes;
        }
        if (got == 0) {
            ++s.misses;
            ++bucket.misses;
            return false;
        }
        s.peak_in_use = std::max(s.peak_in_use, s.bytes_in_use);
        return true;
    }

    // A release into the magazine: a free reserved slot takes it at once;
    // otherwise, under the stripe lock, a full magazine drains K/2 and one more
    // slot is reserved if the limit policy admits it, else the block is evicted.
    static void put(P& pool, mag_type& m, block_type* b, std::size_t nbytes) noexcept {
        const std::size_t index = b->bucket;
        const std::size_t bytes = b->bucket_bytes;
        bool keep = true;
        {
            std::lock_guard g(m.lock);
            auto& sl = m.buckets[index];
            if (sl.count >= sl.reserved) {
                auto& bucket = pool.buckets_[index];
                auto& s = pool.stripes_[P::stripe_of(index)];
                std::lock_guard lock(s.mutex);
                if (sl.count == K) drain(pool, m, index, batch);
                const std::size_t in_bucket = bucket.cached_count + bucket.pending_count + pool.tc_.reserved[index];
                keep = pool.idle_total_.try_reserve(bytes, [&](std::size_t idle_before) {
                    return pool.limits_.admit(bytes, idle_before, in_bucket);
                });
                if (keep) {
                    ++sl.reserved;
                    ++pool.tc_.reserved[index];
                } else {
                    s.in_use.erase(s.in_use.iterator_to(*b));
                    --bucket.in_use_count;
                    s.bytes_in_use -= bytes;
                    s.bytes_requested -= nbytes;
                    ++s.evictions;
                    ++bucket.evictions;
                    ++s.driver_frees;
                    pool.held_.sub(bytes);
                }
            }
            if (keep) {
                sl.blocks[sl.count++] = b;
                m.bytes_idle += bytes;
                m.requested -= nbytes;
            }
        }
        if (!keep) delete b;  // outside the locks: the driver may take its time
    }

    // Moves the n coldest blocks of a bucket's magazine to the shared free
    // list, with their reservations. Magazine and stripe locks held.
    static void drain(P& pool, mag_type& m, std::size_t index, std::size_t n) noexcept {
        auto& bucket = pool.buckets_[index];
        auto& s = pool.stripes_[P::stripe_of(index)];
        auto& sl = m.buckets[index];
        n = std::min<std::size_t>(n, sl.count);
        for (std::size_t i = 0; i < n; ++i) {
            block_type& b = *sl.blocks[i];
            const std::size_t bytes = b.bucket_bytes;
            s.in_use.erase(s.in_use.iterator_to(b));
            --bucket.in_use_count;
            s.bytes_in_use -= bytes;
            bucket.free.push_back(b);  // the cold end: warmer buffers stay in front
            ++bucket.cached_count;
            s.bytes_cached += bytes;
            m.bytes_idle -= bytes;
        }
        std::copy(sl.blocks.begin() + n, sl.blocks.begin() + sl.count, sl.blocks.begin());
        sl.count -= static_cast<std::uint32_t>(n);
        sl.reserved -= static_cast<std::uint32_t>(n);
        pool.tc_.reserved[index] -= n;
    }

    // Gives everything in a magazine back to the shared lists, releases its
    // spare reservations and folds its counters into the stripes'. Magazine
    // lock held.
    static void flush(P& pool, mag_type& m) noexcept {
        for (std::size_t i = 0; i < P::exact_bucket; ++i) {
            auto& sl = m.buckets[i];
            if (sl.count == 0 && sl.reserved == 0 && sl.hits == 0) continue;
            auto& s = pool.stripes_[P::stripe_of(i)];
            std::lock_guard lock(s.mutex);
            drain(pool, m, i, sl.count);
            const std::size_t spare = sl.reserved;
            if (spare) pool.idle_total_.sub(spare * P::bucket_policy::size_from_index(i));
            pool.tc_.reserved[i] -= spare;
            sl.reserved = 0;
            s.hits += sl.hits;
            pool.buckets_[i].hits += sl.hits;
            sl.hits = 0;
        }
        if (m.requested) {
            auto& s = pool.stripes_[0];
            std::lock_guard lock(s.mutex);
            s.bytes_requested += m.requested;
            m.requested = 0;
        }
    }

    static void flush_thunk(magazine_base* b) noexcept {
        auto* m = static_cast<mag_type*>(b);
        flush(*static_cast<P*>(m->pool), *m);
    }

    // trim(): every magazine gives its buffers back first.
    static void flush_all(P& pool) noexcept {
        auto& reg = pool.tc_.registry;
        std::lock_guard g(reg.mutex);
        for (magazine_base* b : reg.mags) {
            std::lock_guard ml(b->lock);
            if (b->pool) flush(pool, *static_cast<mag_type*>(b));
        }
        reg.prune();
    }

    // ~Pool: every magazine gives its buffers back and is cut loose; a thread
    // that still has it finds it detached.
    static void detach_all(P& pool) noexcept {
        auto& reg = pool.tc_.registry;
        std::lock_guard g(reg.mutex);
        for (magazine_base* b : reg.mags) {
            {
                std::lock_guard ml(b->lock);
                if (b->pool) flush(pool, *static_cast<mag_type*>(b));
                b->pool = nullptr;
            }
            b->drop();
        }
        reg.mags.clear();
    }

    // ~Pool in a fork child: the magazines are cut loose without their locks
    // (a parent thread may have held one at the fork; it does not exist here)
    // and without the driver; their buffers leak with the pool's.
    static void abandon_all(P& pool) noexcept {
        for (magazine_base* b : pool.tc_.registry.mags) b->pool = nullptr;
    }

    // A consistent snapshot: the registry, every magazine, then every stripe
    // are locked while read; magazine contents are reported as cached.
    template <class Stats>
    static Stats stats(const P& pool) {
        auto& reg = pool.tc_.registry;
        std::lock_guard g(reg.mutex);
        for (magazine_base* b : reg.mags) b->lock.lock();
        struct unlock_all {
            const std::vector<magazine_base*>& mags;
            ~unlock_all() {
                for (magazine_base* b : mags) b->lock.unlock();
            }
        } unlocker{reg.mags};
        Stats out = pool.snapshot();
        for (magazine_base* b : reg.mags) {
            const auto& m = *static_cast<const mag_type*>(b);
            out.bytes_cached += m.bytes_idle;
            out.bytes_in_use -= m.bytes_idle;
            out.bytes_requested += m.requested;
            for (std::size_t i = 0; i < P::exact_bucket; ++i) {
                const auto& sl = m.buckets[i];
                if (sl.count == 0 && sl.hits == 0) continue;
                out.hits += sl.hits;
                const std::size_t size = P::bucket_policy::size_from_index(i);
                auto it = std::find_if(out.buckets.begin(), out.buckets.end(),
                                       [&](const auto& bs) { return bs.bucket_size == size; });
                if (it == out.buckets.end()) continue;  // cannot happen: the bucket has seen a miss
                it->hits += sl.hits;
                it->cached_buffers += sl.count;
                it->in_use_buffers -= sl.count;
            }
        }
        return out;
    }
};

}  // namespace clpool::detail
