// magazines: ThreadCached's front, per-thread magazines of idle buffers before a pool's shared lists.
#pragma once

#include <clpool/core/diagnostics_hook.hpp>
#include <clpool/core/front.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/policies/detail/biased_lock.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace clpool::detail {

// Guards one magazine. Its thread takes it on every hit and release (as its
// owner: no read-modify-write); others take it only for stats(), trim(), a
// steal and teardown.
using owner_guard = biased_lock::owner_guard;

// The part of a magazine that does not depend on the pool's type: what the
// thread-exit path needs. Owned jointly by its thread's list and its pool's
// registry; the last of the two to let go deletes it.
struct magazine_base {
    biased_lock lock;
    void* lists = nullptr;  // its pool's shared lists; guarded by lock; nullptr once detached
    void (*flush)(magazine_base*) noexcept = nullptr;  // gives every buffer back to `lists` (lock held)
    void (*destroy)(magazine_base*) noexcept = nullptr;
    std::atomic<int> refs{2};
    // The fork generation it was made in. In a fork child a parent's magazine
    // is never locked or flushed: a parent thread may have held its lock, or
    // its pool's, at the fork, and that thread does not exist here. It leaks.
    const std::uint32_t generation = fork_generation();

    void drop() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(this);
    }
    // Set by its thread as it exits, after its last touch: the pool may then
    // forget it without taking its lock.
    std::atomic<bool> thread_exited{false};

    bool detached() noexcept {  // its own thread only
        owner_guard g(lock);
        return lists == nullptr;
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
                owner_guard g(e.mag->lock);
                if (e.mag->lists) {
                    e.mag->flush(e.mag);
                    e.mag->lists = nullptr;
                }
            }
            e.mag->thread_exited.store(true, std::memory_order_release);
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
    bool closed = false;               // the pool is going: no new magazine (mutex held)
};

// A pool's history settings as a front keeps them: Diag::config, or (no
// diagnostics) a history that is never on.
template <class Diag, bool = Diag::enabled>
struct history_config_of {
    struct type {
        static constexpr bool on() noexcept { return false; }
    };
};
template <class Diag>
struct history_config_of<Diag, true> {
    using type = typename Diag::config;
};

// The typed magazine: per bucket, a stack of up to K idle blocks and the
// number of slots reserved against the pool's caps (count <= reserved <= K).
// Counters are the thread's share of the pool's statistics until flushed.
// Aligned to a cache line, hot counters next to the lock: two threads'
// magazines never share a line.
template <class Block, std::size_t K, std::size_t BucketCount, class Ring>
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
    // Its thread's history events for the pool (hits and releases it served),
    // written under `lock`; nullptr while the pool records none (always,
    // without diagnostics).
    std::unique_ptr<Ring> history;
};

// ThreadCached<K>'s front over a pool's shared lists (a PoolFront, core/front.hpp):
// the calling thread's magazine serves hits and takes releases; it refills and
// drains K/2 blocks at a time through Lists::lock(index).
//
// Accounting: a block in a magazine, like a block handed out from one, stays
// on its stripe's in-use list and counts as in use in the shared counters; the
// magazine counts it as idle, and stats() moves it across. For the caps, each
// magazine slot is a slot reserved in the shared lists, so cached + pending +
// every magazine's blocks never exceeds a cap.
//
// A capped pool. A hit keeps its slot's reservation, so the next
// release fills it without the stripe lock; but an empty slot then counts
// against the caps as an idle buffer would, and buffers in use crowded idle
// ones out of the cap (35% hits against 55% for SingleMutex at 256 KiB, one
// thread). So when the caps refuse a release, every magazine's empty slots are
// given back and the release asks again. And since a cap leaves few idle
// buffers, spread over the threads' magazines, a miss looks in the other
// magazines before the driver is called, as one shared list would. Both run
// only there, with no lock held on entry: the registry mutex, then magazines
// (the registry holder alone may wait on a second magazine), then stripes.
template <class Lists, std::size_t K>
class magazines {
    using diagnostics = typename Lists::diagnostics;
    using ring_type = typename Lists::ring_type;
    using site_type = typename Lists::site_type;
    using history_config = typename history_config_of<diagnostics>::type;
    static constexpr bool recording = diagnostics::enabled;

public:
    using block_type = typename Lists::block_type;
    static constexpr FrontAbilities abilities =
        FrontAbility::inspect | FrontAbility::reclaim | (recording ? FrontAbility::history : FrontAbility::none);

    // A hit from the calling thread's magazine, refilled from the shared lists
    // when empty. nullptr (no magazine, nothing free, or the exact bucket): the
    // pool takes from the shared lists.
    // With a history on, the hit goes into the magazine's ring (with the call site if given).
    block_type* take(Lists& lists, std::size_t index, std::size_t nbytes, const site_type* site = nullptr) noexcept {
        if (index >= Lists::exact_bucket) return nullptr;
        mag_type* m = mine(lists);
        if (!m) return nullptr;
        {
            owner_guard g(m->lock);
            if (block_type* b = pop(lists, *m, index, nbytes, site)) return b;
        }
        if constexpr (Lists::capped) {
            if (steal(lists, *m, index)) {
                owner_guard g(m->lock);
                return pop(lists, *m, index, nbytes,
                           site);  // nullptr if another thread stole it back meanwhile
            }
        }
        return nullptr;
    }

    // A release into the calling thread's magazine (keep_in). If the caps
    // refuse it (in a capped pool, even after every magazine's empty slots are
    // given back), the block is evicted. False (no magazine, the magazine
    // detached by ~Pool, the exact bucket, after shutdown()): the pool puts it
    // back in the shared lists. A kept block's release ends under the magazine
    // lock (block_type::end_release); an evicted one's when it leaves the
    // stripe's in-use list.
    bool put(Lists& lists, block_type* b, std::size_t nbytes, const site_type* site = nullptr) noexcept {
        const std::size_t index = b->bucket;
        if (index >= Lists::exact_bucket) return false;
        mag_type* m = mine(lists);
        if (!m) return false;
        auto kept = keep_in(lists, *m, b, nbytes, site);
        if constexpr (Lists::capped) {
            if (kept == keep_result::refused) {
                reclaim(lists);  // empty slots first: the caps are for idle buffers
                kept = keep_in(lists, *m, b, nbytes, site);
            }
        }
        if (kept == keep_result::detached) return false;  // the shared lists: where ~Pool waits, or shutdown() frees
        if (kept == keep_result::refused) {
            lists.lock(index).evict(*b, nbytes, site);
            Lists::dispose(b);  // outside the locks: the driver may take its time
        }
        return true;
    }

    // trim(): every magazine gives its buffers back first.
    void flush(Lists& lists) noexcept {
        std::lock_guard g(registry_.mutex);
        for (magazine_base* b : registry_.mags) {
            std::lock_guard ml(b->lock);
            if (b->lists) empty(lists, *static_cast<mag_type*>(b));
        }
        prune_registry();
    }

    // ~Pool: every magazine gives its buffers back and is cut loose; a thread
    // that still has it finds it detached.
    void detach(Lists& lists) noexcept {
        std::lock_guard g(registry_.mutex);
        registry_.closed = true;  // a release racing ~Pool makes no magazine now
        for (magazine_base* b : registry_.mags) {
            {
                std::lock_guard ml(b->lock);
                if (b->lists) empty(lists, *static_cast<mag_type*>(b));
                b->lists = nullptr;
            }
            b->drop();
        }
        registry_.mags.clear();
    }

    // ~Pool in a fork child: the magazines are cut loose without their locks
    // (a parent thread may have held one at the fork; it does not exist here)
    // and without the driver; their buffers leak with the pool's.
    void abandon() noexcept {
        for (magazine_base* b : registry_.mags) b->lists = nullptr;
    }

    // A consistent snapshot: the registry, every magazine, then every stripe
    // are locked while read; magazine contents are reported as cached.
    auto stats(const Lists& lists) const {
        return inspect(lists, [](auto s, const auto&) { return s; });
    }

    // Pool::snapshot(): f(stats, held) under stats()'s locks; held(block)
    // says whether a magazine holds it (idle, though on an in-use list).
    template <class F>
    decltype(auto) inspect(const Lists& lists, F&& f) const {
        std::lock_guard g(registry_.mutex);
        biased_lock::lock_all(registry_.mags, [](magazine_base* b) -> biased_lock& { return b->lock; });
        struct unlock_all {
            const std::vector<magazine_base*>& mags;
            ~unlock_all() {
                for (magazine_base* b : mags) b->lock.unlock();
            }
        } unlocker{registry_.mags};
        return lists.inspect([&](auto out) {
            fold(out);
            std::vector<const block_type*> held;  // made on first ask: stats() never asks
            bool listed = false;
            return f(std::move(out), [&](const block_type* blk) {
                if (!listed) {
                    for (magazine_base* b : registry_.mags) {
                        const auto& m = *static_cast<const mag_type*>(b);
                        for (const auto& sl : m.buckets)
                            held.insert(held.end(), sl.blocks.begin(), sl.blocks.begin() + sl.count);
                    }
                    std::sort(held.begin(), held.end());
                    listed = true;
                }
                return std::binary_search(held.begin(), held.end(), blk);
            });
        });
    }

    // Starts, restarts or stops the history: apply() (the shared lists' part)
    // runs with the registry and every magazine locked, then every magazine
    // gets a new ring (or none) and exited threads' rings are dropped. If
    // apply() throws, nothing has changed: all that follows it cannot throw.
    template <class Apply>
    void set_history(Lists&, const history_config& cfg, Apply&& apply) {
        std::lock_guard g(registry_.mutex);
        std::vector<std::unique_ptr<ring_type>> rings;  // made before the magazine locks; the old ones after
        rings.reserve(registry_.mags.size());
        for (std::size_t i = 0; i < registry_.mags.size(); ++i)
            rings.push_back(cfg.on() ? std::make_unique<ring_type>(cfg) : nullptr);
        biased_lock::lock_all(registry_.mags, [](magazine_base* b) -> biased_lock& { return b->lock; });
        struct unlock_all {
            const std::vector<magazine_base*>& mags;
            ~unlock_all() {
                for (magazine_base* b : mags) b->lock.unlock();
            }
        } unlocker{registry_.mags};
        apply();
        for (std::size_t i = 0; i < registry_.mags.size(); ++i)
            static_cast<mag_type*>(registry_.mags[i])->history.swap(rings[i]);
        history_cfg_ = cfg;
        retired_.clear();
    }

    // Only within inspect(): every magazine's history and the exited threads'.
    template <class Events>
    void collect_history(Events& out) const {
        for (magazine_base* b : registry_.mags)
            if (const auto& h = static_cast<const mag_type*>(b)->history) out.add(*h);
        for (const auto& r : retired_) out.add(*r);
    }

private:
    // Moves the magazines' buffers from in use to cached, and their hits in (all locked).
    template <class Stats>
    void fold(Stats& out) const {
        for (magazine_base* b : registry_.mags) {
            const auto& m = *static_cast<const mag_type*>(b);
            out.bytes_cached += m.bytes_idle;
            out.bytes_in_use -= m.bytes_idle;
            out.bytes_requested += m.requested;
            for (std::size_t i = 0; i < Lists::exact_bucket; ++i) {
                const auto& sl = m.buckets[i];
                if (sl.count == 0 && sl.hits == 0) continue;
                out.hits += sl.hits;
                const std::size_t size = Lists::size_of(i);
                auto it = std::find_if(out.buckets.begin(), out.buckets.end(),
                                       [&](const auto& bs) { return bs.bucket_size == size; });
                if (it == out.buckets.end()) continue;  // cannot happen: the bucket has seen a miss
                it->hits += sl.hits;
                it->cached_buffers += sl.count;
                it->in_use_buffers -= sl.count;
            }
        }
    }

    static constexpr std::size_t batch = K / 2;
    using mag_type = magazine<block_type, K, Lists::exact_bucket, ring_type>;
    using locked_bucket = typename Lists::locked_bucket;

    // A hit from m's bucket, refilled from the shared lists if empty; nullptr
    // if nothing is free there either. m's lock held.
    static block_type* pop(Lists& lists, mag_type& m, std::size_t index, std::size_t nbytes,
                           const site_type* site) noexcept {
        auto& sl = m.buckets[index];
        if (sl.count == 0 && !refill(lists, m, index)) return nullptr;
        block_type* b = sl.blocks[--sl.count];
        ++sl.hits;
        m.bytes_idle -= b->bucket_bytes;
        m.requested += nbytes;
        b->requested = nbytes;
        // A hand-out from a magazine does not move handout_seq: the last
        // holder's tag goes here (a load, not a store, when there is none).
        if (b->tag.load(std::memory_order_relaxed)) [[unlikely]]
            b->clear_tag();
        if constexpr (recording) {
            if (m.history) [[unlikely]]
                b = m.history->note_alloc(*b, nbytes, true, false, site);
        }
        return b;
    }

    // Keeps a released block in m: in a free reserved slot at once; otherwise,
    // under the stripe lock, a full magazine drains K/2 and one more slot is
    // reserved if the caps admit it. refused: the caps refuse; detached: ~Pool
    // has emptied the magazine, or shutdown() has run. Either way the block is
    // not kept. shutdown() is read under the lock, as the shared lists read it
    // under theirs: a release that locks after a trim() that followed
    // shutdown() does not cache.
    enum class keep_result { kept, refused, detached };

    static keep_result keep_in(Lists& lists, mag_type& m, block_type* b, std::size_t nbytes,
                               const site_type* site) noexcept {
        owner_guard g(m.lock);
        if (!m.lists || shut_down()) return keep_result::detached;
        const std::size_t index = b->bucket;
        auto& sl = m.buckets[index];
        if (sl.count >= sl.reserved) {
            auto bucket = lists.lock(index);
            if (sl.count == K) drain(bucket, m, index, batch);
            if (!bucket.reserve()) return keep_result::refused;
            ++sl.reserved;
        }
        sl.blocks[sl.count++] = b;
        m.bytes_idle += b->bucket_bytes;
        m.requested -= nbytes;
        if constexpr (recording) {
            if (m.history) [[unlikely]]
                b = m.history->note_release(HistoryAction::free, *b, nbytes, false, site);
        }
        b->end_release();  // ~Pool's detach() takes this lock before it goes on
        return keep_result::kept;
    }

public:
    // A capped pool's refused release: every magazine gives back its empty
    // slots. No lock held on entry. The pool calls it too, when the caps
    // refuse a release that takes the shared lists (pending, exact-size).
    void reclaim(Lists& lists) noexcept {
        std::lock_guard g(registry_.mutex);
        for (magazine_base* o : registry_.mags) {
            std::lock_guard ml(o->lock);
            if (!o->lists) continue;
            auto& m = *static_cast<mag_type*>(o);
            for (std::size_t i = 0; i < Lists::exact_bucket; ++i) {
                auto& sl = m.buckets[i];
                if (sl.reserved == sl.count) continue;
                lists.lock(i).unreserve(sl.reserved - sl.count);
                sl.reserved = sl.count;
            }
        }
    }

private:
    // A capped pool's miss: moves up to K/2 idle blocks of the bucket, with
    // their reservations, from another thread's magazine into self's. True if
    // some came. No lock held on entry.
    bool steal(Lists& lists, mag_type& self, std::size_t index) noexcept {
        std::lock_guard g(registry_.mutex);
        std::lock_guard sg(self.lock);
        auto& mine = self.buckets[index];
        if (mine.count != 0) return true;  // a release came in meanwhile
        for (magazine_base* o : registry_.mags) {
            if (o == &self) continue;
            std::lock_guard ol(o->lock);
            if (!o->lists) continue;
            auto& m = *static_cast<mag_type*>(o);
            auto& theirs = m.buckets[index];
            if (theirs.count == 0) continue;
            const auto n = std::min<std::uint32_t>(theirs.count, batch);
            theirs.count -= n;
            theirs.reserved -= n;
            std::copy_n(theirs.blocks.begin() + theirs.count, n, mine.blocks.begin());
            const std::size_t bytes = n * Lists::size_of(index);
            m.bytes_idle -= bytes;
            self.bytes_idle += bytes;
            // Where self already held empty slots, one of two reservations is given back.
            const auto spare = std::min(n, mine.reserved);
            if (spare) lists.lock(index).unreserve(spare);
            mine.count = n;
            mine.reserved += n - spare;
            return true;
        }
        return false;
    }

    // The calling thread's magazine for this pool, made on first use; nullptr if
    // none can be had (thread exiting, out of host memory): use the shared lists.
    mag_type* mine(Lists& lists) noexcept {
        thread_magazines* t = thread_magazines::get();
        if (!t) return nullptr;
        const auto serial = registry_.serial;
        for (auto& e : t->entries)
            if (e.serial == serial) return static_cast<mag_type*>(e.mag);
        return enroll(lists, *t);
    }

    mag_type* enroll(Lists& lists, thread_magazines& t) noexcept {
        mag_type* m = nullptr;
        try {
            t.prune();
            t.entries.reserve(t.entries.size() + 1);
            std::lock_guard g(registry_.mutex);
            if (registry_.closed) return nullptr;
            prune_registry();
            registry_.mags.reserve(registry_.mags.size() + 1);
            m = new mag_type;
            if constexpr (recording) {
                if (history_cfg_.on()) {
                    try {
                        m->history = std::make_unique<ring_type>(history_cfg_);
                    } catch (...) {
                        delete m;
                        throw;
                    }
                }
            }
            m->lists = &lists;
            m->flush = &flush_thunk;
            m->destroy = [](magazine_base* b) noexcept { delete static_cast<mag_type*>(b); };
            registry_.mags.push_back(m);  // capacity reserved: cannot throw
        } catch (...) {
            return nullptr;
        }
        t.entries.push_back({registry_.serial, m});
        return m;
    }

    // Moves up to K/2 free blocks into an empty magazine (stripe lock taken
    // here). Each lent block brings its place in the caps as a reserved slot;
    // as many as the magazine already held empty are given back.
    static bool refill(Lists& lists, mag_type& m, std::size_t index) noexcept {
        auto& sl = m.buckets[index];
        auto bucket = lists.lock(index);
        const std::size_t got = bucket.lend(sl.blocks.data() + sl.count, batch);
        if (got == 0) return false;
        const std::size_t filled = std::min<std::size_t>(got, sl.reserved - sl.count);
        bucket.unreserve(filled);
        sl.count += static_cast<std::uint32_t>(got);
        sl.reserved += static_cast<std::uint32_t>(got - filled);
        m.bytes_idle += got * Lists::size_of(index);
        return true;
    }

    // Moves the n coldest blocks of a bucket's magazine to the shared free
    // list, with their reservations. Magazine and stripe locks held.
    static void drain(locked_bucket& bucket, mag_type& m, std::size_t index, std::size_t n) noexcept {
        auto& sl = m.buckets[index];
        n = std::min<std::size_t>(n, sl.count);
        bucket.put_cold(sl.blocks.data(), n);
        m.bytes_idle -= n * Lists::size_of(index);
        std::copy(sl.blocks.begin() + n, sl.blocks.begin() + sl.count, sl.blocks.begin());
        sl.count -= static_cast<std::uint32_t>(n);
        sl.reserved -= static_cast<std::uint32_t>(n);
    }

    // Gives everything in a magazine back to the shared lists, releases its
    // spare reservations and folds its counters in. Magazine lock held.
    static void empty(Lists& lists, mag_type& m) noexcept {
        for (std::size_t i = 0; i < Lists::exact_bucket; ++i) {
            auto& sl = m.buckets[i];
            if (sl.count == 0 && sl.reserved == 0 && sl.hits == 0) continue;
            auto bucket = lists.lock(i);
            drain(bucket, m, i, sl.count);
            bucket.unreserve(sl.reserved);
            sl.reserved = 0;
            bucket.add_hits(sl.hits);
            sl.hits = 0;
        }
        if (m.requested) {
            lists.add_requested(m.requested);
            m.requested = 0;
        }
    }

    static void flush_thunk(magazine_base* b) noexcept {
        auto* m = static_cast<mag_type*>(b);
        empty(*static_cast<Lists*>(m->lists), *m);
    }

    // Forgets magazines whose thread has exited (registry mutex held); keeps their history.
    void prune_registry() noexcept {
        std::erase_if(registry_.mags, [&](magazine_base* b) {
            if (!b->thread_exited.load(std::memory_order_acquire)) return false;
            if constexpr (recording)
                retire(std::move(static_cast<mag_type*>(b)->history));  // its thread is gone: nothing writes it now
            b->drop();
            return true;
        });
    }

    // An exited thread's ring joins the retired ones (at most retired_max:
    // more are merged into one). Registry mutex held.
    void retire(std::unique_ptr<ring_type> r) noexcept {
        if (!r || r->recorded() == 0) return;
        try {
            retired_.push_back(std::move(r));
            if (retired_.size() > retired_max) {
                std::vector<const ring_type*> all;
                all.reserve(retired_.size());
                for (const auto& x : retired_) all.push_back(x.get());
                auto merged = ring_type::merge(all, history_cfg_);
                retired_.clear();
                retired_.push_back(std::move(merged));
            }
        } catch (...) {
            // Out of host memory: those events are lost, nothing else is.
        }
    }

    static constexpr std::size_t retired_max = 8;

    magazine_registry registry_;
    // The pool's history settings, and the rings of exited threads' magazines.
    // Registry mutex held.
    [[no_unique_address]] history_config history_cfg_{};
    std::vector<std::unique_ptr<ring_type>> retired_;
};

}  // namespace clpool::detail
