// history_ring: a ring of a pool's recent events, written under a lock the event's path already holds; their merge, and CLPOOL_HISTORY.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/diagnostics/detail/call_sites.hpp>
#include <clpool/diagnostics/detail/history_clock.hpp>
#include <clpool/diagnostics/history.hpp>
#include <clpool/platform/environment.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <queue>
#include <utility>
#include <vector>

namespace clpool::detail {

// What a history records: how many events per ring, and whether call sites.
struct history_config {
    std::size_t capacity = 0;  // 0: off
    bool stacks = false;
    bool on() const noexcept { return capacity != 0; }
};

inline constexpr std::size_t max_history_events = std::size_t{1} << 24;

// One event as read back from a ring (packed_slot is how it is stored): the tag's pointer, not a copy.
struct history_slot {
    std::uint64_t t_ns;  // history_clock::now()
    std::uint64_t order;  // thread_order::next()
    std::uintptr_t id;
    std::size_t requested;
    std::size_t held;
    const char* tag;
    HistoryAction action;
    bool hit;
    bool exact;  // of the exact-size bucket (bucket_size 0)
    std::uint64_t of_buffer;  // the buffer's life and event count (block_data::history_events); 0 for trim and oom
};

// The newest `capacity` events of one writer, which records under a lock it
// already holds (a lock stripe, or a ThreadCached magazine): so recording
// takes no lock and no atomic operation of its own. A snapshot, which holds
// every such lock, merges the rings by time (history_events).
// Its storage is made on the first event, so stripes that see none cost
// nothing; if it cannot be made the event is counted and not kept.
//
// The common event goes to a small stage that stays in the L1 cache, and a
// full stage goes to the ring in one copy. Why: the ring is larger than the
// caches, and a store to a line that is not in L1 holds up the stores after
// it, the lock's among them; one copy of whole lines does not.
class history_ring {
public:
    explicit history_ring(history_config cfg) noexcept : capacity_(cfg.capacity), stacks_(cfg.stacks) {}
    history_ring(const history_ring&) = delete;
    history_ring& operator=(const history_ring&) = delete;

    // A buffer's hand-out (hit: from the cache), and its call site on the
    // buffer while call sites are recorded. Inline, so that the event's flags
    // fold to a constant where the caller's are; the event itself is out of
    // line (note_alloc_packed), with its arguments in registers: the paths
    // that call it pay a branch when the history is off, and a call when it
    // is on. Returns &b, which the caller uses from here on: its block
    // pointer comes back in a register, not through a spill on the hit
    // path's chain of loads.
    template <class Block>
    [[gnu::always_inline, gnu::returns_nonnull]] Block* note_alloc(Block& b, std::size_t nbytes, bool hit, bool exact,
                                                                   const call_site* site) noexcept {
        return note_alloc_packed(b, nbytes, packed_slot::flags(HistoryAction::alloc, hit, exact, false), site);
    }
    // A buffer's release (free, pending) or eviction, with its holder's tag; returns &b.
    template <class Block>
    [[gnu::always_inline, gnu::returns_nonnull]] Block* note_release(HistoryAction action, Block& b, std::size_t nbytes,
                                                                     bool exact, const call_site* site) noexcept {
        return note_release_packed(b, nbytes, packed_slot::flags(action, false, exact, false), site);
    }

    // One event, in full (trim, oom and the rare cases of the above).
    void record(HistoryAction action, bool hit, std::uintptr_t id, std::uint64_t of_buffer, std::size_t requested,
                std::size_t held, bool exact, const char* tag, const call_site* site) noexcept {
        put({history_clock::now(), thread_order::next(), id, requested, held, tag, action, hit, exact, of_buffer},
            site);
    }

    // Events in the order recorded, oldest first: f(slot, site or nullptr).
    // The newest `capacity` of them: the ring's, then the stage's.
    template <class F>
    void for_each(F&& f) const {
        const std::uint64_t in_ring = laps_ * capacity_ + next_;
        const std::size_t room = capacity_ - staged_;
        const std::size_t kept = in_ring < room ? static_cast<std::size_t>(in_ring) : room;
        std::size_t i = (next_ + capacity_ - kept) % (capacity_ ? capacity_ : 1);
        for (std::size_t n = 0; n < kept; ++n) {
            f(unpack(slots_[i], tags_ ? tags_[i] : nullptr, bigs_ ? &bigs_[i] : nullptr),
              sites_ ? &sites_[i] : nullptr);
            if (++i == capacity_) i = 0;
        }
        for (std::size_t k = 0; k < staged_; ++k) f(unpack(stage_[k], nullptr, nullptr), nullptr);
    }

    std::uint64_t recorded() const noexcept { return stored() + lost_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool stacks() const noexcept { return stacks_; }
    // Whether the ring's order is the order its events happened in (a ring
    // written under one lock), or only each thread's (merge()'s rings).
    bool in_one_order() const noexcept { return one_order_; }

    // The newest `capacity` events of several rings, merged (merge_order), as
    // one ring (what a ThreadCached pool keeps of its exited threads' magazines).
    static std::unique_ptr<history_ring> merge(const std::vector<const history_ring*>& rings, history_config cfg) {
        std::vector<std::pair<history_slot, const call_site*>> all;
        std::vector<std::size_t> ends;
        std::vector<bool> one_order;
        std::uint64_t recorded = 0;
        for (const auto* r : rings) {
            recorded += r->recorded();
            r->for_each([&](const history_slot& s, const call_site* c) { all.emplace_back(s, c); });
            ends.push_back(all.size());
            one_order.push_back(r->in_one_order());
        }
        const auto order =
            merge_order(ends, one_order, [&](std::size_t i) -> const history_slot& { return all[i].first; });
        auto out = std::make_unique<history_ring>(cfg);
        out->one_order_ = false;  // its rings' threads ran side by side: only each thread's order is known
        const std::size_t first = order.size() > cfg.capacity ? order.size() - cfg.capacity : 0;
        for (std::size_t i = first; i < order.size(); ++i) out->put(all[order[i]].first, all[order[i]].second);
        out->lost_ = recorded - out->stored();  // what the merged ring counts but does not hold
        return out;
    }

    // The order of several rings' events as one history, given each ring's
    // events as a run [ends[r-1], ends[r]) in the order recorded (in the order
    // they happened if one_order[r], else in each thread's order). By time;
    // among events of the same time (the clock ticks once per
    // history_clock::period), an order that keeps each ring's order, each
    // thread's (thread_order) and each buffer's (its event count): a buffer
    // handed out on one thread and released on another within one tick comes
    // out handed out first.
    template <class Slot>
    static std::vector<std::size_t> merge_order(const std::vector<std::size_t>& ends,
                                                const std::vector<bool>& one_order, Slot&& slot) {
        const std::size_t k = ends.size();
        std::vector<std::size_t> head(k), out, tick, ring_starts;
        for (std::size_t r = 0; r < k; ++r) head[r] = r == 0 ? 0 : ends[r - 1];
        out.reserve(k ? ends.back() : 0);
        while (true) {
            std::uint64_t t = UINT64_MAX;
            for (std::size_t r = 0; r < k; ++r)
                if (head[r] < ends[r]) t = std::min(t, slot(head[r]).t_ns);
            if (t == UINT64_MAX) break;
            tick.clear();
            ring_starts.clear();
            for (std::size_t r = 0; r < k; ++r) {
                ring_starts.push_back(tick.size());
                for (; head[r] < ends[r] && slot(head[r]).t_ns == t; ++head[r]) tick.push_back(head[r]);
            }
            ring_starts.push_back(tick.size());
            order_tick(tick, ring_starts, one_order, slot, out);
        }
        return out;
    }

private:
    // Orders one tick's events (indices in `tick`, ring by ring: ring r's are
    // [starts[r], starts[r+1])) into `out`: a topological order (Kahn's) of
    // three chains, each a true order of what happened: a ring's (where it
    // is in one order; else only between one thread's events), a thread's,
    // and a buffer's (its id, then its life and event count: a buffer made at
    // a freed one's address orders after it). Ties go to the earlier ring.
    // Should the chains disagree (a thread number reused after 2^24 threads,
    // a buffer with 2^32 events), the rest of the tick follows in ring order.
    template <class Slot>
    static void order_tick(const std::vector<std::size_t>& tick, const std::vector<std::size_t>& starts,
                           const std::vector<bool>& one_order, Slot& slot, std::vector<std::size_t>& out) {
        const std::size_t n = tick.size();
        constexpr std::size_t none = SIZE_MAX;
        std::vector<std::array<std::size_t, 3>> next(n, {none, none, none});
        std::vector<std::size_t> waits(n, 0);
        auto link = [&](std::size_t a, std::size_t b, std::size_t chain) {
            for (std::size_t c = 0; c < chain; ++c)
                if (next[a][c] == b) return;  // the same edge by another chain
            next[a][chain] = b;
            ++waits[b];
        };
        auto thread_of = [&](std::size_t j) { return thread_order::thread_of(slot(tick[j]).order); };
        for (std::size_t r = 0; r + 1 < starts.size(); ++r)
            for (std::size_t j = starts[r]; j + 1 < starts[r + 1]; ++j)
                if (one_order[r] || thread_of(j) == thread_of(j + 1)) link(j, j + 1, 0);
        std::vector<std::size_t> by(n);
        for (std::size_t j = 0; j < n; ++j) by[j] = j;
        std::sort(by.begin(), by.end(),
                  [&](std::size_t a, std::size_t b) { return slot(tick[a]).order < slot(tick[b]).order; });
        for (std::size_t x = 0; x + 1 < n; ++x)
            if (thread_of(by[x]) == thread_of(by[x + 1])) link(by[x], by[x + 1], 1);
        // By id, then by life and event count as serial numbers (RFC 1982):
        // the lives wrap after 2^32 blocks (next_block_life), and a tick's
        // events at one address are far fewer than 2^31 lives apart.
        std::sort(by.begin(), by.end(), [&](std::size_t a, std::size_t b) {
            const history_slot &x = slot(tick[a]), &y = slot(tick[b]);
            if (x.id != y.id) return x.id < y.id;
            return static_cast<std::int64_t>(x.of_buffer - y.of_buffer) < 0;
        });
        for (std::size_t x = 0; x + 1 < n; ++x) {
            const std::uintptr_t id = slot(tick[by[x]]).id;
            if (id != 0 && id == slot(tick[by[x + 1]]).id) link(by[x], by[x + 1], 2);
        }
        // Ready events by position: the earliest ring first.
        std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
        for (std::size_t j = 0; j < n; ++j)
            if (waits[j] == 0) ready.push(j);
        std::vector<bool> done(n, false);
        std::size_t rest = 0;  // where the fallback looks next
        for (std::size_t emitted = 0; emitted < n; ++emitted) {
            std::size_t pick;
            if (!ready.empty()) {
                pick = ready.top();
                ready.pop();
            } else {
                while (done[rest]) ++rest;
                pick = rest;
            }
            done[pick] = true;
            out.push_back(tick[pick]);
            for (std::size_t b : next[pick])
                if (b != none && !done[b] && --waits[b] == 0) ready.push(b);
        }
    }

    // The events out of line: the common one (try_record) and, in a sibling
    // call, the rest. `flags`: the event's (packed_slot::flags). A request of
    // 2^48 bytes or more (a host or simulated backend takes up to about 2^63)
    // does not fit the staged slot's word: it goes to the ring in full.
    // No test of stacks_ here: a ring with call sites has no stage, so
    // try_record sends every event to note_rare.
    template <class Block>
    [[gnu::noinline, gnu::returns_nonnull]] Block* note_alloc_packed(Block& b, std::size_t nbytes, std::uint64_t flags,
                                                                     const call_site* site) noexcept {
        if (nbytes > packed_slot::size_mask || !try_record(b, nbytes | flags)) [[unlikely]]
            return note_rare(b, nbytes, flags, nullptr, site);
        return &b;
    }
    template <class Block>
    [[gnu::noinline, gnu::returns_nonnull]] Block* note_release_packed(Block& b, std::size_t nbytes,
                                                                       std::uint64_t flags,
                                                                       const call_site* site) noexcept {
        const char* tag = b.current_tag();
        if (tag || nbytes > packed_slot::size_mask || !try_record(b, nbytes | flags)) [[unlikely]]
            return note_rare(b, nbytes, flags, tag, site);
        return &b;
    }

    // The common event: three stores into the stage (store_slot), its count,
    // the thread's order stamp and the buffer's event count. False, having
    // stored nothing, where the event is not common: the ring's first event,
    // a full stage, a ring with call sites (no stage), the ticker or the
    // thread's stamp not started yet.
    template <class Block>
    [[gnu::always_inline]] bool try_record(Block& b, std::uint64_t packed) noexcept {
        const std::uint64_t t = history_clock::ticked();
        const std::uint64_t order = thread_order::current();
        const std::size_t k = staged_;
        if (t == 0 || order == 0 || k >= stage_limit_) [[unlikely]]
            return false;
        std::uint64_t events = b.diag.history_events;
        std::size_t held = b.bucket_bytes;
        in_register(events);
        in_register(held);
        store_slot(stage_[k], t, order, reinterpret_cast<std::uintptr_t>(&b), packed, held, events);
        b.diag.history_events = events + 1;
        thread_order::advance(order);
        staged_ = k + 1;
        // Fetches the ring's line that this slot goes to at the flush, so the
        // flush writes to cached lines: 3 KiB written to lines not in the
        // cache held up every store after it, the pool's own among them. Past
        // the ring's end (a flush that wraps) it fetches a line it will not
        // write: a prefetch never faults, and a bound test costs every event.
        __builtin_prefetch(reinterpret_cast<const void*>(flush_to_ + k * sizeof(packed_slot)), 1, 3);
        return true;
    }

    // Keeps v in a register from here on. Why: left alone, the compiler reads
    // history_events for store_slot with a 16-byte load of the fields around
    // it, and a 16-byte load cannot take its value from the 8-byte store that
    // the buffer's previous event made there: every release after its
    // hand-out (a few dozen instructions on) waited for that store to reach
    // the cache (docs/BENCHMARKS.md, "The store that a load could not forward").
    template <class T>
    [[gnu::always_inline]] static void in_register(T& v) noexcept {
        asm("" : "+r"(v));
    }

    // An event in full, into the ring (a call site, a tag, a full stage, ...).
    template <class Block>
    [[gnu::noinline]] Block* note_rare(Block& b, std::size_t nbytes, std::uint64_t flags, const char* tag,
                                       const call_site* site) noexcept {
        const auto action = packed_slot::action_of(flags);
        record(action, packed_slot::hit_of(flags), reinterpret_cast<std::uintptr_t>(&b), b.diag.history_events++,
               nbytes, b.bucket_bytes, packed_slot::exact_of(flags), tag, site);
        if (action == HistoryAction::alloc && site && stacks_) b.diag.keep_site(*site);
        return &b;
    }

    // An event into the next slot of the ring, after the stage's (record(), merge()).
    void put(const history_slot& e, const call_site* site) noexcept {
        if (!slots_ && !make_storage()) {
            ++lost_;
            return;
        }
        flush_stage();
        const bool big = e.requested > packed_slot::size_mask && keep_big(e.requested);
        slots_[next_] = {e.t_ns, e.order,
                         e.id,   packed_slot::pack(e.requested, e.action, e.hit, e.exact, e.tag != nullptr, big),
                         e.held, e.of_buffer};
        if (e.tag) keep_tag(e.tag);
        if (sites_) keep_site(site);
        advance(1);
    }

    // The ring's position, n slots on (n at most to the end of the ring).
    void advance(std::size_t n) noexcept {
        next_ += n;
        if (next_ == capacity_) {
            next_ = 0;
            ++laps_;
        }
        flush_to_ = reinterpret_cast<std::uintptr_t>(slots_.get() + next_);
    }

    // The stage's events into the ring, in order, in at most two copies.
    void flush_stage() noexcept {
        std::size_t done = 0;
        while (done < staged_) {
            const std::size_t n = std::min(staged_ - done, capacity_ - next_);
            std::memcpy(&slots_[next_], &stage_[done],
                        n * sizeof(packed_slot));  // untagged, small: tags_, bigs_ not read
            done += n;
            advance(n);
        }
        staged_ = 0;
    }

    // An event as stored: 48 bytes (store_slot writes them). The bytes
    // requested and the flags share a word: below 2^48 (no device allocates
    // more) in it, larger ones (a host or simulated backend's) apart, as the
    // tag is, since few events have one. Should there be no room for that,
    // the size reads 2^48 - 1.
    struct packed_slot {
        static constexpr unsigned size_bits = 48;
        static constexpr std::uint64_t size_mask = (std::uint64_t{1} << size_bits) - 1;
        static constexpr unsigned hit_bit = size_bits + 4, exact_bit = size_bits + 5, tag_bit = size_bits + 6,
                                  big_bit = size_bits + 7;

        std::uint64_t t_ns;
        std::uint64_t order;
        std::uintptr_t id;
        std::uint64_t requested_and_flags;  // requested | action << 48 | hit, exact, tagged, big (requested in bigs_)
        std::size_t held;
        std::uint64_t of_buffer;

        static std::uint64_t pack(std::size_t requested, HistoryAction action, bool hit, bool exact, bool tagged,
                                  bool big) noexcept {
            return (big ? 0 : std::min<std::uint64_t>(requested, size_mask)) | flags(action, hit, exact, tagged) |
                   std::uint64_t{big} << big_bit;
        }
        static std::uint64_t flags(HistoryAction action, bool hit, bool exact, bool tagged) noexcept {
            return std::uint64_t{static_cast<std::uint8_t>(action)} << size_bits | std::uint64_t{hit} << hit_bit |
                   std::uint64_t{exact} << exact_bit | std::uint64_t{tagged} << tag_bit;
        }
        static std::size_t requested_of(std::uint64_t w) noexcept { return static_cast<std::size_t>(w & size_mask); }
        static HistoryAction action_of(std::uint64_t w) noexcept {
            return static_cast<HistoryAction>((w >> size_bits) & 0xf);
        }
        static bool hit_of(std::uint64_t w) noexcept { return (w >> hit_bit) & 1; }
        static bool exact_of(std::uint64_t w) noexcept { return (w >> exact_bit) & 1; }
        static bool big_of(std::uint64_t w) noexcept { return (w >> big_bit) & 1; }
    };

    // A slot's six words in three 16-byte stores where the target has them,
    // not six: fewer stores queued ahead of the lock's.
    [[gnu::always_inline]] static void store_slot(packed_slot& s, std::uint64_t t, std::uint64_t order,
                                                  std::uintptr_t id, std::uint64_t packed, std::size_t held,
                                                  std::uint64_t of_buffer) noexcept {
#if defined(__SSE2__)
        auto* p = reinterpret_cast<__m128i*>(&s);
        _mm_storeu_si128(p, _mm_set_epi64x(static_cast<long long>(order), static_cast<long long>(t)));
        _mm_storeu_si128(p + 1, _mm_set_epi64x(static_cast<long long>(packed), static_cast<long long>(id)));
        _mm_storeu_si128(p + 2, _mm_set_epi64x(static_cast<long long>(of_buffer), static_cast<long long>(held)));
#else
        s = {t, order, id, packed, held, of_buffer};
#endif
    }

    // An event as read back; `tag` and `big` are its slot's in tags_ and bigs_ (nullptr if none are kept).
    static history_slot unpack(const packed_slot& p, const char* tag, const std::size_t* big) noexcept {
        history_slot s;
        s.t_ns = p.t_ns;
        s.order = p.order;
        s.id = p.id;
        s.requested =
            packed_slot::big_of(p.requested_and_flags) && big ? *big : packed_slot::requested_of(p.requested_and_flags);
        s.held = p.held;
        s.action = packed_slot::action_of(p.requested_and_flags);
        s.hit = packed_slot::hit_of(p.requested_and_flags);
        s.exact = packed_slot::exact_of(p.requested_and_flags);
        s.tag = (p.requested_and_flags >> packed_slot::tag_bit) & 1 ? tag : nullptr;
        s.of_buffer = p.of_buffer;
        return s;
    }

    std::uint64_t stored() const noexcept { return laps_ * capacity_ + next_ + staged_; }

    // The tag of the event going into slot next_; lost if no room can be made for tags.
    [[gnu::noinline]] void keep_tag(const char* tag) noexcept {
        if (!tags_)
            tags_.reset(new (std::nothrow) const char*[capacity_]());  // null: an earlier slot whose tag was lost
        if (tags_) tags_[next_] = tag;
    }

    // The size of the event going into slot next_, 2^48 bytes or more; false
    // if no room can be made for such sizes (the slot then keeps 2^48 - 1).
    [[gnu::noinline]] bool keep_big(std::size_t requested) noexcept {
        if (!bigs_) bigs_.reset(new (std::nothrow) std::size_t[capacity_]());
        if (bigs_) bigs_[next_] = requested;
        return bigs_ != nullptr;
    }

    void keep_site(const call_site* site) noexcept {
        if (site) sites_[next_] = *site;
        else sites_[next_].count = 0;
    }

    [[gnu::cold, gnu::noinline]] bool make_storage() noexcept {
        slots_.reset(new (std::nothrow) packed_slot[capacity_]);
        if (slots_ && stacks_) sites_.reset(new (std::nothrow) call_site[capacity_]);  // none: no call sites
        if (slots_ && !stacks_) stage_limit_ = std::min(stage_slots, capacity_);  // call sites go to the ring
        flush_to_ = reinterpret_cast<std::uintptr_t>(slots_.get());
        return slots_ != nullptr;
    }

    // 64 events (3 KiB): a copy of whole lines per 64 events, and a stage that stays in L1.
    static constexpr std::size_t stage_slots = 64;

    std::unique_ptr<packed_slot[]> slots_;
    std::unique_ptr<call_site[]> sites_;
    std::unique_ptr<const char*[]> tags_;  // made on the first tagged event
    std::unique_ptr<std::size_t[]> bigs_;  // made on the first request of 2^48 bytes or more
    std::size_t capacity_;
    std::size_t next_ = 0;  // the slot the next event from the stage fills
    std::uintptr_t flush_to_ = 0;  // &slots_[next_], kept for the common event's prefetch
    std::size_t staged_ = 0;  // events in stage_, newer than the ring's
    std::size_t stage_limit_ = 0;  // how many stage_ takes: 0 until the ring is made, or with call sites
    std::uint64_t laps_ = 0;  // times next_ went round: laps_ * capacity_ + next_ events written
    std::uint64_t lost_ = 0;  // events counted but not written (no storage)
    bool stacks_;
    bool one_order_ = true;
    alignas(64) packed_slot stage_[stage_slots];
};

// A snapshot's gathering of rings (under their locks), made into a History
// after the locks are let go: there the rings are merged (merge_order) and
// the call sites named.
class history_events {
public:
    explicit history_events(std::size_t capacity) : capacity_(capacity) {}

    void add(const history_ring& r) {
        recorded_ += r.recorded();
        r.for_each([&](const history_slot& s, const call_site* c) { raw_.push_back({s, c ? *c : call_site{}}); });
        ends_.push_back(raw_.size());
        one_order_.push_back(r.in_one_order());
    }

    History finish(call_site_names& names) {
        const auto order = history_ring::merge_order(
            ends_, one_order_, [&](std::size_t i) -> const history_slot& { return raw_[i].slot; });
        const std::size_t first = order.size() > capacity_ ? order.size() - capacity_ : 0;
        History h;
        h.capacity = capacity_;
        h.recorded = recorded_;
        h.events.reserve(order.size() - first);
        for (std::size_t i = first; i < order.size(); ++i) {
            const entry& x = raw_[order[i]];
            const history_slot& s = x.slot;
            HistoryEvent e;
            e.t_ns = s.t_ns;
            e.action = s.action;
            e.hit = s.hit;
            e.id = s.id;
            e.bytes_requested = s.requested;
            e.bytes_held = s.held;
            e.bucket_size = s.exact || s.id == 0 ? 0 : s.held;
            if (s.tag) e.tag = s.tag;
            if (x.site.count) e.frames = names.frames(x.site);
            h.events.push_back(std::move(e));
        }
        h.dropped = h.recorded - h.events.size();
        return h;
    }

private:
    struct entry {
        history_slot slot;
        call_site site;
    };
    std::size_t capacity_;
    std::uint64_t recorded_ = 0;
    std::vector<entry> raw_;
    std::vector<std::size_t> ends_;  // each ring's events end here in raw_
    std::vector<bool> one_order_;  // each ring's in_one_order()
};

// CLPOOL_HISTORY: a whole number of events, 0 (off) to max_history_events.
inline std::size_t parse_history_events(std::string_view name, std::string_view text) {
    return static_cast<std::size_t>(
        env_count<config_error>(name, text, max_history_events, "events", "e.g. 100000; 0 turns the history off"));
}

// CLPOOL_HISTORY_STACKS: 0/1 (also false/true, off/on, no/yes).
inline bool parse_history_stacks(std::string_view name, std::string_view text) {
    return env_bool<config_error>(name, text);
}

// What every pool records from its construction: CLPOOL_HISTORY and
// CLPOOL_HISTORY_STACKS, read once per process. Throws config_error (from
// every pool's constructor) if either is invalid. Read here, not through
// runtime/config.hpp, which is a layer above diagnostics; both parse with
// platform/environment.hpp.
inline history_config history_default() {
    struct setting {
        std::optional<history_config> value;
        std::string error;
    };
    static const setting s = []() -> setting {
        try {
            history_config c;
            if (const char* v = std::getenv("CLPOOL_HISTORY")) c.capacity = parse_history_events("CLPOOL_HISTORY", v);
            if (const char* v = std::getenv("CLPOOL_HISTORY_STACKS"))
                c.stacks = parse_history_stacks("CLPOOL_HISTORY_STACKS", v);
            return {c, {}};
        } catch (const config_error& e) {
            return {std::nullopt, e.what()};
        }
    }();
    if (!s.value) throw config_error(s.error);
    return *s.value;
}

}  // namespace clpool::detail
