// shared_lists: a pool's buckets, lock stripes and counters, and the narrow interface a front uses on them.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/diagnostics_hook.hpp>
#include <clpool/core/detail/block.hpp>
#include <clpool/core/detail/counter.hpp>
#include <clpool/core/detail/guard.hpp>
#include <clpool/core/detail/pool_counters.hpp>
#include <clpool/core/detail/pool_teardown.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/core/policy_concepts.hpp>
#include <clpool/core/segments.hpp>
#include <clpool/core/stats.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace clpool {

// The shared lists of a Pool over backend B: per bucket a free and a pending
// list, per lock stripe the in-use list and the counters, and the byte totals
// the caps are checked against. The pool holds them; its front (the lock
// policy's, if any: front.hpp) reaches them only through lock(index), one
// bucket with its stripe locked.
//
// Caps: what counts against them, in a bucket and in the idle-byte total, is
// its cached and pending buffers plus the slots fronts have reserved (a front
// keeps an idle buffer only in a reserved slot). admit() is the one place that
// asks the limit policy.
//
// Diag: the pool's diagnostics (diagnostics_hook.hpp). With a history on,
// each event is recorded in its stripe's ring under the stripe's lock; with
// NoDiagnostics none of that is compiled.
template <class B, BucketPolicy Buckets, LimitPolicy Limits, LockPolicy Locks, class Diag = NoDiagnostics>
class shared_lists {
    using traits = backend_traits<B>;  // the only caller of B's optional members

public:
    using event_type = typename traits::event_type;
    using diagnostics = Diag;
    using site_type = typename Diag::site;  // a call site (diagnostics only)
    using ring_type = typename Diag::ring;
    using block_type = detail::block<typename B::memory_type, event_type, typename Diag::block_data>;

    // The bucket that holds sizes no bucket can round to (above the device
    // limit once rounded): exact-size buffers, matched by size.
    static constexpr std::size_t exact_bucket = Buckets::bucket_count;
    // Over a sub-allocating backend, a policy's large requests are held at
    // their own size (ExactLargeSizes) in the exact bucket, whose blocks go
    // back to the backend on release: there they merge with free neighbours,
    // so three freed blocks make room for one of three times the size.
    static constexpr bool exact_large = traits::sub_allocates && ExactLargeSizes<Buckets>;
    static constexpr std::size_t size_of(std::size_t index) noexcept { return Buckets::size_from_index(index); }
    // Whether the limit policy may refuse an idle buffer (a front then gives
    // back the slots it holds empty before a release is refused).
    static constexpr bool capped = !requires { requires Limits::admits_everything; };

    explicit shared_lists(Limits limits) : limits_(std::move(limits)) {}
    shared_lists(const shared_lists&) = delete;
    shared_lists& operator=(const shared_lists&) = delete;

    const Limits& limits() const noexcept { return limits_; }

    class locked_bucket;
    // Bucket `index` (not the exact bucket), its stripe locked while the result lives.
    locked_bucket lock(std::size_t index) noexcept { return locked_bucket(*this, index); }

    // A front's change to bytes_requested (modulo 2^64), folded in.
    void add_requested(std::size_t n) noexcept {
        auto& s = stripes_[0];
        lock_type lock(s.mutex);
        s.counters.bytes_requested += n;
    }

    // Keeps copies of the events if any still runs; true if so (the release
    // is then pending). Never throws: if they cannot be copied, waits for them.
    static bool hold_events(block_type& b, const event_type* events, std::size_t count) noexcept {
        if constexpr (traits::has_events) {
            std::size_t live = 0;
            for (std::size_t i = 0; i < count; ++i) live += !traits::event_complete(events[i]);
            if (live) {
                try {
                    b.events.assign(events, events + count);
                    return true;
                } catch (...) {
                    traits::wait_for(events, count);
                }
            }
        } else {
            (void)b, (void)events, (void)count;
        }
        return false;
    }

    // Frees a block outside every lock: the driver may take its time.
    // Out of line: an evicting release calls the driver anyway.
    [[gnu::noinline]] static void dispose(block_type* b) noexcept {
        if constexpr (traits::free_waits_for_events) traits::wait_for(b->events.data(), b->events.size());
        delete b;  // the driver frees it once any command still using it is done
    }

    // A hit: a cached buffer of the bucket (of exactly `bytes` in the exact
    // bucket), in use for nbytes. nullptr is a miss, counted.
    // With a history on, the hand-out is recorded (with the call site if given).
    block_type* take(std::size_t index, std::size_t bytes, std::size_t nbytes,
                     const site_type* site = nullptr) noexcept {
        auto& bucket = buckets_[index];
        auto& s = stripes_[stripe_of(index)];
        lock_type lock(s.mutex);
        if constexpr (traits::has_events) {
            if (!bucket.pending.empty()) reap_pending(bucket, s.counters);
        }
        block_type* b = nullptr;
        if (index != exact_bucket) {
            if (!bucket.free.empty()) {
                b = &bucket.free.front();
                bucket.free.pop_front();
            }
        } else {
            for (auto it = bucket.free.begin(); it != bucket.free.end(); ++it) {
                if (it->bucket_bytes != bytes) continue;
                b = &*it;
                bucket.free.erase(it);
                break;
            }
        }
        if (!b) {
            s.counters.on_miss(bucket.counts);
            return nullptr;
        }
        s.counters.on_hit(bucket.counts, b->bucket_bytes, nbytes);
        idle_total_.sub(b->bucket_bytes);
        b->requested = nbytes;
        b->handout_seq = s.counters.hits + s.counters.misses;  // a logical clock: no clock read on a hit
        ++b->uses;
        s.in_use.push_back(*b);
        if constexpr (Diag::enabled) {
            if (s.history) [[unlikely]]
                b = s.history->note_alloc(*b, nbytes, true, b->bucket == exact_bucket, site);
        }
        return b;
    }

    // A new buffer from the driver, in use for nbytes.
    void adopt(block_type& b, std::size_t nbytes, const site_type* site = nullptr) noexcept {
        auto& s = stripes_[stripe_of(b.bucket)];
        lock_type lock(s.mutex);
        peak_held_.max(held_.add(b.bucket_bytes));
        s.counters.on_create(buckets_[b.bucket].counts, b.bucket_bytes, nbytes);
        b.requested = nbytes;
        b.handout_seq = s.counters.hits + s.counters.misses;
        ++b.uses;
        s.in_use.push_back(b);
        if constexpr (Diag::enabled) {
            if (s.history) s.history->note_alloc(b, nbytes, false, b.bucket == exact_bucket, site);
        }
    }

    // A released buffer: cached (pending, if its events still run) while the
    // caps admit it, else given back to the driver. An exact_large pool's
    // exact-size block goes back to the backend unless pending (freeing it
    // would wait for its events).
    // With MayRefuse, a release the caps refuse is left as it was (in use)
    // and false returned, so that the caller may free room (a front's empty
    // reserved slots) and call again; otherwise true. (A template argument:
    // the hit path's instantiation keeps its order of work and its cost.)
    template <bool MayRefuse = false>
    bool put_back(block_type* b, std::size_t nbytes, bool pending, const site_type* site = nullptr) noexcept {
        auto& bucket = buckets_[b->bucket];
        auto& s = stripes_[stripe_of(b->bucket)];
        const bool returned = returns_on_release(b->bucket) && !pending;
        bool keep = false;
        {
            lock_type lock(s.mutex);
            // After shutdown() nothing is cached: the buffer goes straight back.
            if constexpr (MayRefuse) {
                const bool cacheable = !detail::shut_down() && !returned;
                keep = cacheable && admit(b->bucket, b->bucket_bytes);  // admit() reserves: asked once
                if (cacheable && !keep) return false;
            }
            s.in_use.erase(s.in_use.iterator_to(*b));
            s.counters.on_release(bucket.counts, b->bucket_bytes, nbytes);
            if constexpr (!MayRefuse) keep = !detail::shut_down() && !returned && admit(b->bucket, b->bucket_bytes);
            if constexpr (traits::free_waits_for_events) {
                // Freeing it would wait here for its events (a release_after must not block): it
                // stays pending past the caps, and is a cached buffer like any other once they complete.
                if (!keep && pending && !detail::shut_down()) {
                    idle_total_.add(b->bucket_bytes);
                    keep = true;
                }
            }
            if (keep && pending) {
                bucket.pending.push_back(*b);
                s.counters.on_pending(bucket.counts, b->bucket_bytes);
            } else if (keep) {
                bucket.free.push_front(*b);
                s.counters.on_cached(bucket.counts, b->bucket_bytes);
            }
            if constexpr (Diag::enabled) {
                if (s.history) [[unlikely]]
                    note(stripe_of(b->bucket),
                         !keep     ? HistoryAction::evict
                         : pending ? HistoryAction::pending
                                   : HistoryAction::free,
                         *b, nbytes, site);
            }
            if (keep) {
                b->end_release();  // the last touch of the pool is this lock's unlock
            } else {
                if (returned) s.counters.on_return(bucket.counts);
                else s.counters.on_evict(bucket.counts);
                held_.sub(b->bucket_bytes);
            }
        }
        if (!keep) dispose(b);
        return true;
    }

    // Gives every cached and pending buffer back to the driver; returns the
    // bytes. With a history, each buffer is an evict event (at `site`).
    // With_pending false: the cached ones only, pending ones whose events
    // have completed first joining them; those still running stay pending
    // (freeing them would wait for their events).
    template <bool with_pending = true>
    std::size_t trim(const site_type* site = nullptr) noexcept {
        list_type doomed;
        std::size_t freed = 0;
        for (std::size_t si = 0; si < Locks::stripes; ++si) {
            auto& s = stripes_[si];
            lock_type lock(s.mutex);
            for (std::size_t i = si; i < buckets_.size(); i += Locks::stripes) {
                auto& bucket = buckets_[i];
                if constexpr (!with_pending) {
                    if (!bucket.pending.empty()) reap_pending(bucket, s.counters);
                }
                for (auto* list : {&bucket.free, &bucket.pending}) {
                    if (!with_pending && list == &bucket.pending) continue;
                    for (auto& b : *list) {
                        freed += b.bucket_bytes;
                        if constexpr (Diag::enabled) {
                            if (s.history) [[unlikely]]
                                note(si, HistoryAction::evict, b, 0, site);
                        }
                    }
                    doomed.splice(doomed.end(), *list);
                }
                if constexpr (with_pending) s.counters.on_trim(bucket.counts);
                else s.counters.on_trim_cached(bucket.counts);
            }
            const std::size_t stripe_idle =
                with_pending ? s.counters.drop_idle_bytes() : s.counters.drop_cached_bytes();
            idle_total_.sub(stripe_idle);
            held_.sub(stripe_idle);
        }
        dispose_all(doomed);
        return freed;
    }

    // The pool is going: buffers still out become orphans (they free
    // themselves on release), every idle one is freed. A buffer whose release
    // is under way (marked `releasing`, pool.hpp) is waited for: that release
    // unlinks it under the stripe lock, then never touches the pool again.
    // pool_teardown.hpp says why every release's mark is seen or its release
    // sees pool_going.
    void close() noexcept {
        for (auto& s : stripes_) {
            lock_type lock(s.mutex);
            for (auto& b : s.in_use) b.pool_going.store(true, std::memory_order_relaxed);
        }
        detail::pool_teardown::barrier();  // from here every release either shows its mark or sees pool_going
        {
            detail::guard deciding(detail::pool_teardown::mutex());
            for (auto& s : stripes_) {
                lock_type lock(s.mutex);
                list_type in_flight;
                while (!s.in_use.empty()) {
                    // Unlinked before it is orphaned: from then on its release may free it.
                    block_type& b = s.in_use.front();
                    s.in_use.pop_front();
                    if (b.owner.load(std::memory_order_relaxed) & block_type::releasing) {
                        in_flight.push_back(b);  // its release got there first
                        continue;
                    }
                    b.orphaned = true;
                    b.owner.store(0, std::memory_order_release);
                }
                s.in_use.splice(s.in_use.end(), in_flight);  // where those releases unlink them
            }
        }
        for (auto& s : stripes_) {
            s.mutex.lock();
            while (!s.in_use.empty()) {
                s.mutex.unlock();
                detail::pool_teardown::nap();  // rare: sleep, so the releasing thread runs whatever its priority
                s.mutex.lock();
            }
            s.mutex.unlock();
        }
        list_type doomed;
        for (std::size_t si = 0; si < Locks::stripes; ++si) {
            lock_type lock(stripes_[si].mutex);
            for (std::size_t i = si; i < buckets_.size(); i += Locks::stripes) {
                doomed.splice(doomed.end(), buckets_[i].free);
                doomed.splice(doomed.end(), buckets_[i].pending);
            }
        }
        dispose_all(doomed);
    }

    // Diagnostics only (Diag::enabled): a trim() call that gave back `freed`
    // bytes, and an out-of-memory after the retry (asked nbytes): history
    // events, in stripe 0's ring and the bucket's stripe's.
    void note_trim(std::size_t freed, const site_type* site) noexcept {
        auto& s = stripes_[0];
        lock_type lock(s.mutex);
        if (s.history) s.history->record(HistoryAction::trim, false, 0, 0, 0, freed, true, nullptr, site);
    }
    void note_oom(std::size_t index, std::size_t nbytes, const site_type* site) noexcept {
        auto& s = stripes_[stripe_of(index)];
        lock_type lock(s.mutex);
        if (s.history) s.history->record(HistoryAction::oom, false, 0, 0, nbytes, 0, true, nullptr, site);
    }

    // Diagnostics only: gives stripe i the ring rings[i] (nullptr: none) and
    // forgets every block's call site, with every stripe locked, then calls
    // also() still locked (a front holding blocks must hold its locks too).
    template <class Also>
    void set_rings(ring_type* const* rings, Also&& also) noexcept {
        all_locked locks([&](std::size_t i) -> mutex_type& { return stripes_[i].mutex; });
        for (std::size_t i = 0; i < Locks::stripes; ++i) stripes_[i].history = rings[i];
        for (auto& st : stripes_)
            for (auto& b : st.in_use) b.diag.drop_site();
        for (auto& bucket : buckets_)
            for (auto* list : {&bucket.free, &bucket.pending})
                for (auto& b : *list) b.diag.drop_site();
        also();
    }

    // Diagnostics only, within inspect(): every stripe's ring into `out`.
    template <class Events>
    void collect_history(Events& out) const {
        for (const auto& st : stripes_)
            if (st.history) out.add(*st.history);
    }

    void on_oom_retry(std::size_t index) noexcept {
        auto& s = stripes_[stripe_of(index)];
        lock_type lock(s.mutex);
        s.counters.on_oom_retry();
    }
    // Counts a failed allocation; returns the bytes held from the driver.
    std::size_t on_failure(std::size_t index) noexcept {
        auto& s = stripes_[stripe_of(index)];
        // held_ is a plain integer under a one-stripe lock: read it there too.
        lock_type lock(s.mutex);
        s.counters.on_failure();
        return held_.load();
    }

    // A consistent snapshot: every stripe is locked (in order) while read.
    // Pending buffers whose events have completed move to the free list first,
    // so that after queue.finish() nothing shows as pending (one event query
    // per pending buffer; no driver wait, no free).
    PoolStats snapshot() const {
        return inspect([](PoolStats s) { return s; });
    }

    // Returns f(stats) called with every stripe locked (in order), so that f
    // may walk every block with for_each_block() and find what stats counts.
    template <class F>
    decltype(auto) inspect(F&& f) const {
        all_locked locks([&](std::size_t i) -> mutex_type& { return stripes_[i].mutex; });
        if constexpr (traits::has_events) {
            for (std::size_t i = 0; i < buckets_.size(); ++i)
                if (!buckets_[i].pending.empty()) reap_pending(buckets_[i], stripes_[stripe_of(i)].counters);
        }
        return std::forward<F>(f)(stats_locked());
    }

    // Only within inspect(): f(block, state, stripe's hand-outs so far) for
    // every block of the pool (a front's blocks are on the in-use lists).
    template <class F>
    void for_each_block(F&& f) const {
        for (const auto& s : stripes_)
            for (const auto& b : s.in_use) f(b, BufferState::in_use, s.counters.hits + s.counters.misses);
        for (std::size_t i = 0; i < buckets_.size(); ++i) {
            const auto& c = stripes_[stripe_of(i)].counters;
            for (const auto& b : buckets_[i].free) f(b, BufferState::cached, c.hits + c.misses);
            for (const auto& b : buckets_[i].pending) f(b, BufferState::pending, c.hits + c.misses);
        }
    }

private:
    PoolStats stats_locked() const {
        PoolStats out;
        for (const auto& st : stripes_) {
            const auto& s = st.counters;
            out.hits += s.hits + s.front_hits;
            out.misses += s.misses;
            out.evictions += s.evictions;
            out.driver_frees += s.driver_frees;
            out.oom_retries += s.oom_retries;
            out.failed_allocations += s.failed;
            out.bytes_cached += s.bytes_cached;
            out.bytes_pending += s.bytes_pending;
            out.bytes_in_use += s.bytes_in_use;
            out.bytes_requested += s.bytes_requested;
            out.peak_bytes_in_use += s.peak_in_use;
        }
        out.bytes_allocated = held_.load();
        out.peak_bytes_allocated = peak_held_.load();
        for (std::size_t i = 0; i < buckets_.size(); ++i) {
            const auto& b = buckets_[i].counts;
            if (b.hits + b.misses + b.cached + b.in_use + b.pending == 0) continue;
            out.buckets.push_back(
                {i == exact_bucket ? 0 : size_of(i), b.hits, b.misses, b.evictions, b.cached, b.in_use, b.pending});
        }
        return out;
    }

    using list_type = detail::block_list<block_type>;
    using mutex_type = typename Locks::mutex_type;
    using lock_type = detail::guard<mutex_type>;
    using all_locked = detail::guard_all<mutex_type, Locks::stripes>;

    // A history event of block b in stripe si's ring (its lock held).
    void note(std::size_t si, HistoryAction action, block_type& b, std::size_t nbytes, const site_type* site) noexcept {
        if (ring_type* ring = stripes_[si].history)
            ring->note_release(action, b, nbytes, b.bucket == exact_bucket, site);
    }

    // 16-byte aligned, so counts' hot pair is (see bucket_counts).
    struct alignas(16) bucket_state {
        list_type free;  // LIFO: the most recently used buffer is warmest
        list_type pending;  // released with events still running
        detail::bucket_counts counts;
    };

    // One per lock stripe, on its own cache line so stripes do not share lines.
    struct alignas(64) stripe_state {
        mutable typename Locks::mutex_type mutex;
        list_type in_use;
        mutable detail::stripe_counters counters;  // mutable: snapshot() reaps (see buckets_)
        ring_type* history = nullptr;  // this stripe's history ring (nullptr: off; owned by the diagnostics)
    };

    static constexpr bool shared_counters = Locks::stripes > 1;
    using counter = detail::counter<shared_counters>;
    // An unlimited pool needs no running total of idle bytes: it would be one
    // more shared cache line on the striped hot path.
    using idle_counter =
        std::conditional_t<requires { requires Limits::admits_everything; }, detail::null_counter, counter>;

    static constexpr std::size_t stripe_of(std::size_t bucket) noexcept { return bucket % Locks::stripes; }
    static constexpr bool returns_on_release(std::size_t bucket) noexcept {
        if constexpr (exact_large) return bucket == exact_bucket;
        else return false;
    }

    // May one more idle buffer of `bytes` stay in this bucket? On yes its bytes
    // join the idle total. The one admission against the caps. Stripe locked.
    bool admit(std::size_t index, std::size_t bytes) noexcept {
        const auto& bucket = buckets_[index];
        const std::size_t in_bucket = bucket.counts.cached + bucket.counts.pending + reserved_[index];
        return idle_total_.try_reserve(
            bytes, [&](std::size_t idle_before) { return limits_.admit(bytes, idle_before, in_bucket); });
    }

    // Moves pending buffers whose events have completed to the free list.
    // The bucket's stripe locked. snapshot() reaps too.
    static void reap_pending(bucket_state& bucket, detail::stripe_counters& counters) noexcept {
        for (auto it = bucket.pending.begin(); it != bucket.pending.end();) {
            auto& b = *it;
            bool done = true;
            for (const event_type& e : b.events) done = done && traits::event_complete(e);
            if (!done) {
                ++it;
                continue;
            }
            b.events.clear();
            it = bucket.pending.erase(it);
            bucket.free.push_front(b);
            counters.on_reaped(bucket.counts, b.bucket_bytes);
        }
    }

    static void dispose_all(list_type& doomed) noexcept {
        doomed.clear_and_dispose([](block_type* b) { dispose(b); });
    }

    [[no_unique_address]] Limits limits_;
    std::array<stripe_state, Locks::stripes> stripes_;
    // mutable: snapshot() (a const stats()) moves completed pending buffers to
    // the free list, under the same stripe locks as every other change.
    mutable std::array<bucket_state, Buckets::bucket_count + 1> buckets_;
    // Per bucket, the slots fronts hold against the caps (guarded by the
    // bucket's stripe). Kept out of bucket_state so a bucket's hit-path fields
    // keep their size and cache-line offsets whether or not a front exists.
    std::array<std::size_t, Buckets::bucket_count + 1> reserved_{};
    idle_counter idle_total_;  // cached + pending + reserved bytes, against the byte cap
    counter held_;  // bytes held from the driver
    counter peak_held_;
};

// One bucket of the shared lists with its stripe locked, for as long as this
// lives: everything a front may do there. A front keeps the buffers it holds
// in use in the shared counters (stats() moves them across) and holds one
// reserved slot per idle buffer it may keep.
template <class B, BucketPolicy Buckets, LimitPolicy Limits, LockPolicy Locks, class Diag>
class shared_lists<B, Buckets, Limits, Locks, Diag>::locked_bucket {
public:
    locked_bucket(const locked_bucket&) = delete;
    locked_bucket& operator=(const locked_bucket&) = delete;

    // Lends up to n free buffers (pending ones reaped first) to the front, in
    // use; each keeps its place in the caps as a new reserved slot. Returns how many.
    std::size_t lend(block_type** out, std::size_t n) noexcept {
        if constexpr (traits::has_events) {
            if (!bucket_.pending.empty()) lists_.reap_pending(bucket_, stripe_.counters);
        }
        std::size_t got = 0;
        for (; got < n && !bucket_.free.empty(); ++got) {
            block_type& b = bucket_.free.front();
            bucket_.free.pop_front();
            stripe_.counters.on_lend(bucket_.counts, b.bucket_bytes);
            stripe_.in_use.push_back(b);
            out[got] = &b;
        }
        reserved_ += got;
        return got;
    }

    // Takes n lent buffers back at the cold end of the free list (warmer
    // buffers stay in front); their reserved slots become cached buffers.
    void put_cold(block_type* const* blocks, std::size_t n) noexcept {
        for (std::size_t i = 0; i < n; ++i) {
            block_type& b = *blocks[i];
            stripe_.in_use.erase(stripe_.in_use.iterator_to(b));
            stripe_.counters.on_release(bucket_.counts, b.bucket_bytes, 0);
            bucket_.free.push_back(b);
            stripe_.counters.on_cached(bucket_.counts, b.bucket_bytes);
        }
        reserved_ -= n;
    }

    // One more reserved slot, if the caps admit an idle buffer more.
    bool reserve() noexcept {
        if (!lists_.admit(index_, bytes_)) return false;
        ++reserved_;
        return true;
    }

    // Gives back n empty reserved slots.
    void unreserve(std::size_t n) noexcept {
        if (n == 0) return;
        lists_.idle_total_.sub(n * bytes_);
        reserved_ -= n;
    }

    // A buffer released to the front that the caps refuse: out of the lists
    // and counted; dispose() it once unlocked.
    void evict(block_type& b, std::size_t nbytes, const site_type* site = nullptr) noexcept {
        if constexpr (Diag::enabled) {
            if (stripe_.history) [[unlikely]]
                lists_.note(stripe_of(index_), HistoryAction::evict, b, nbytes, site);
        }
        stripe_.in_use.erase(stripe_.in_use.iterator_to(b));
        stripe_.counters.on_release(bucket_.counts, b.bucket_bytes, nbytes);
        stripe_.counters.on_evict(bucket_.counts);
        lists_.held_.sub(b.bucket_bytes);
    }

    // Hits the front served itself, folded into the shared counters.
    void add_hits(std::uint64_t n) noexcept { stripe_.counters.on_front_hits(bucket_.counts, n); }

private:
    friend shared_lists;
    locked_bucket(shared_lists& lists, std::size_t index) noexcept
        : lists_(lists), bucket_(lists.buckets_[index]), stripe_(lists.stripes_[stripe_of(index)]),
          reserved_(lists.reserved_[index]), index_(index), bytes_(size_of(index)), guard_(stripe_.mutex) {}

    shared_lists& lists_;
    bucket_state& bucket_;
    stripe_state& stripe_;
    std::size_t& reserved_;
    const std::size_t index_;
    const std::size_t bytes_;
    lock_type guard_;
};

}  // namespace clpool
