// Diagnostics: what a pool records and reports beyond its counters (history, call sites, snapshots, out-of-memory reports), attached through the core's one hook.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/diagnostics_hook.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/steady_clock.hpp>
#include <clpool/diagnostics/detail/call_sites.hpp>
#include <clpool/diagnostics/detail/history_clock.hpp>
#include <clpool/diagnostics/detail/history_ring.hpp>
#include <clpool/diagnostics/detail/oom_report.hpp>
#include <clpool/diagnostics/history.hpp>
#include <clpool/diagnostics/snapshot.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace clpool {

namespace detail {
// A number per block made in this process, in its high 32 bits: the start of
// its history_events. One relaxed add per driver allocation.
inline std::uint64_t next_block_life() noexcept {
    static constinit std::atomic<std::uint64_t> lives{0};
    return lives.fetch_add(1, std::memory_order_relaxed) << 32;
}
}  // namespace detail

// A pool's diagnostics (Pool's last template argument; the named pools use
// it): Pool::record_history, Pool::snapshot and the forensics lines of
// out_of_memory (with the CLPOOL_OOM_SNAPSHOT dump), and CLPOOL_HISTORY /
// CLPOOL_HISTORY_STACKS read at every such pool's construction. What each
// costs is in docs/OBSERVABILITY.md; the hook's contract in
// core/diagnostics_hook.hpp and docs/DESIGN.md.
struct Diagnostics {
    static constexpr bool enabled = true;
    using site = detail::call_site;
    using ring = detail::history_ring;
    using config = detail::history_config;
    using events = detail::history_events;

    // Per buffer: its history events so far, above a number of its own in
    // the high 32 bits (history_ring.hpp orders a buffer's events by it): a
    // buffer made later at a freed one's address, so with its id, orders
    // after it. Written by whoever records an event of it, under that event's
    // lock; a buffer's events never race (its holder alone releases it). And
    // where its current (or last) holder allocated it, only while a history
    // records call sites; made on its first such hand-out.
    struct block_data {
        std::uint64_t history_events = detail::next_block_life();
        site* where = nullptr;

        block_data() = default;
        block_data(const block_data&) = delete;
        block_data& operator=(const block_data&) = delete;
        ~block_data() { delete where; }

        // A recorded hand-out's call site. Under the lock of whoever hands it out.
        void keep_site(const site& s) noexcept {
            if (!where) where = new (std::nothrow) site;
            if (where) *where = s;
        }
        void drop_site() noexcept {
            delete where;
            where = nullptr;
        }
    };

    // Per pool: whether the history records call sites (read, relaxed, by
    // every allocate and release; stored under every lock by record_history),
    // and the shared lists' rings, one per lock stripe, with their settings
    // (replaced under every stripe lock, read under any).
    struct pool_state {
        static constexpr std::uint8_t off = 0, on = 1, stacks = 2;
        std::atomic<std::uint8_t> mode{off};
        config cfg;
        std::vector<std::unique_ptr<ring>> rings;

        bool wants_site() const noexcept { return mode.load(std::memory_order_relaxed) == stacks; }
    };

    // The calling thread's stack, from the caller of the function that calls
    // this outwards, less `skip` more frames. Inline: it adds no frame.
    [[gnu::always_inline]] static void capture(site& s, unsigned skip) noexcept { detail::capture_call_site(s, skip); }

    // A new pool: CLPOOL_HISTORY, CLPOOL_HISTORY_STACKS.
    template <class Pool>
    static void start(Pool& pool) {
        if (const auto h = detail::history_default(); h.on())
            pool.record_history(h.capacity, h.stacks ? CallSites::on : CallSites::off);
    }

    // Pool::record_history(events, sites): records the pool's last `events` allocate (hit or miss), release (free
    // or pending), evict, trim and out-of-memory events, which snapshot()
    // carries (PoolSnapshot::history), and with CallSites::on where each was
    // called from (and, per buffer, where its holder allocated it).
    // record_history(0) stops recording. Each call starts afresh: events
    // recorded so far are dropped. CLPOOL_HISTORY and CLPOOL_HISTORY_STACKS
    // set this for every pool at its construction.
    // Cost (docs/OBSERVABILITY.md): off, one predictable branch per allocate
    // and release; on, a slot write per event under the lock the event's path
    // takes anyway (no lock of its own), time-stamped to the millisecond by a
    // thread that the first history of the process starts (history_clock.hpp);
    // call sites add a stack walk per event. Memory: up to `events` slots of 48 bytes (plus
    // 104 with call sites) per lock stripe and per thread with a ThreadCached
    // magazine, each made on its first event.
    // Throws config_error if events > 16777216; bad_alloc (the history is then as it was).
    // Only with diagnostics (Diag::enabled).
    // New rings for every stripe (and the front's, which makes its own) are
    // swapped in with every lock held; the old ones are freed after.
    template <class Pool>
    static void record_history(Pool& pool, std::size_t events, CallSites sites) {
        if (events > detail::max_history_events)
            throw config_error("clpool: record_history(" + std::to_string(events) + "): at most " +
                               std::to_string(detail::max_history_events) + " events (0 turns the history off)");
        const config cfg{events, events != 0 && sites == CallSites::on};
        if (cfg.on()) detail::history_clock::start();  // fails only without threads: then a clock read per event
        const std::uint8_t mode = !cfg.on() ? pool_state::off : cfg.stacks ? pool_state::stacks : pool_state::on;
        constexpr std::size_t stripes = Pool::lock_policy::stripes;
        std::vector<std::unique_ptr<ring>> fresh;
        std::vector<ring*> at(stripes, nullptr);
        if (cfg.on()) {
            for (std::size_t i = 0; i < stripes; ++i) {
                fresh.push_back(std::make_unique<ring>(cfg));
                at[i] = fresh.back().get();
            }
        }
        auto apply = [&] {
            pool.lists_.set_rings(at.data(), [&] {
                pool.diag_.rings.swap(fresh);
                pool.diag_.cfg = cfg;
                pool.diag_.mode.store(mode, std::memory_order_relaxed);
            });
        };
        if constexpr (Pool::fronts::has_history) pool.front_.set_history(pool.lists_, cfg, apply);
        else apply();
    }  // `fresh` now holds the old rings: freed here, after every lock

    // Pool::snapshot(): every buffer the pool holds (in use, cached, pending)
    // with its bucket, sizes, age and tag, and stats() read under the same
    // locks: the buffers add up to its totals. Costs what stats() does plus a
    // walk of every buffer; for diagnostics, not the hot path. In a fork
    // child, a pool made before the fork gives a snapshot with no buffers (as stats()).
    template <class Pool>
    static PoolSnapshot snapshot(const Pool& pool) {
        return snapshot_of(pool, true);
    }

    // The forensics lines of out_of_memory::what() (and the CLPOOL_OOM_SNAPSHOT
    // dump); none if even they cannot be made (out of host memory too).
    template <class Pool>
    static std::string oom_details(const Pool& pool, std::size_t nbytes, std::size_t bytes, std::size_t given_back,
                                   int code) noexcept {
        try {
            OutOfMemoryRecord oom{pool.backend_.name(), nbytes, bytes, given_back, code};
            // The lines show no history: only the dump, if asked for, carries it.
            const char* dump = std::getenv("CLPOOL_OOM_SNAPSHOT");
            return detail::oom_report(snapshot_of(pool, dump && *dump), oom);
        } catch (...) {
            return {};
        }
    }

private:
    // Every buffer under the locks of stats(), with the history if asked for
    // and on; then, every lock let go, the call sites named and the history merged.
    template <class Pool>
    static PoolSnapshot snapshot_of(const Pool& pool, bool with_history) {
        using traits = backend_traits<typename Pool::backend_type>;
        using block_type = typename Pool::block_type;
        PoolSnapshot out;
        out.pool = pool.backend_.name();
        if (!detail::same_process(pool.generation_)) {  // a parent's pool: its locks may be held by a thread not here
            out.taken_ns = detail::steady_ns();
            return out;
        }
        std::vector<detail::buffer_place> places;  // a sub-allocating pool's: blocks to buffers
        std::optional<events> history;
        std::vector<std::pair<std::size_t, site>> sites;  // buffer index, its holder's call site
        auto walk = [&](PoolStats s, const auto& held_by_front) {
            if (with_history && pool.diag_.cfg.on()) {
                history.emplace(pool.diag_.cfg.capacity);
                pool.lists_.collect_history(*history);
                if constexpr (Pool::fronts::has_history) pool.front_.collect_history(*history);
            }
            pool.lists_.for_each_block([&](const block_type& b, BufferState state, std::uint64_t seq) {
                if (state == BufferState::in_use && held_by_front(&b)) state = BufferState::cached;
                BufferInfo info;
                info.state = state;
                info.bucket_size = b.bucket == Pool::exact_bucket ? 0 : b.bucket_bytes;
                info.bytes_requested = state == BufferState::in_use ? b.requested : 0;
                info.bytes_held = b.bucket_bytes;
                info.made_ns = b.made_ns;
                info.handout_seq = b.handout_seq;
                info.handouts_since = seq - b.handout_seq;
                info.uses = b.uses;
                if (const char* tag = b.current_tag()) info.tag = tag;
                info.id = reinterpret_cast<std::uintptr_t>(&b);
                if constexpr (traits::sub_allocates)
                    places.push_back({traits::place_of(pool.backend_, b.memory), info.id, info.state});
                if (b.diag.where) sites.emplace_back(out.buffers.size(), *b.diag.where);
                out.buffers.push_back(std::move(info));
            });
            // Under the pool's locks too (they come before the arena's), so
            // the blocks and buffers agree but for one being made or freed.
            traits::add_segments(pool.backend_, out.segments);
            detail::join_segments(out.segments, places);
            traits::add_stats(pool.backend_, s);  // the segment counters, as stats() has them
            // The arena is carved without the pool's locks (a miss on another
            // thread), so it may have changed between the two reads above:
            // the segment totals are the list's own, so the two agree.
            if constexpr (traits::sub_allocates) detail::segment_totals(out.segments, s);
            return s;
        };
        out.stats = pool.inspect(walk);
        // Every lock let go: now the slow part, naming call sites and converting ticks.
        out.taken_ns = detail::steady_ns();
        detail::call_site_names names;
        for (const auto& [i, where] : sites) out.buffers[i].frames = names.frames(where);
        if (history) out.history = history->finish(names);
        std::stable_partition(out.buffers.begin(), out.buffers.end(),
                              [](const BufferInfo& b) { return b.state == BufferState::in_use; });
        return out;
    }
};

static_assert(PoolDiagnostics<Diagnostics>);

}  // namespace clpool
