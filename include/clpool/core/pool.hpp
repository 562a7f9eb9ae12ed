// Pool: the policy-based caching allocator over a Backend.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/front.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/core/history.hpp>
#include <clpool/core/detail/history_ring.hpp>
#include <clpool/core/detail/oom_report.hpp>
#include <clpool/core/shared_lists.hpp>
#include <clpool/core/snapshot.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/core/detail/pool_teardown.hpp>
#include <clpool/core/detail/refuse_work.hpp>
#include <clpool/core/policy_concepts.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace clpool {

// A caching allocator for one backend. Buffers are grouped in buckets (the
// BucketPolicy), asked of the backend with the FlagPolicy's memory kind,
// kept while the LimitPolicy admits them, under the LockPolicy's locks, in
// shared lists (shared_lists.hpp) behind the LockPolicy's front, if it has one
// (front.hpp: ThreadCached's per-thread magazines).
//
// Thread safety: every member function is safe to call concurrently when the
// LockPolicy locks (SingleMutex, Striped); with NoLock one thread at a time.
// A Pool neither moves nor copies (handles point to it). Destroying a pool
// frees its cache; handles still out keep their buffers and free them on
// release. Handles may be released from other threads while the pool is being
// destroyed: each release either reaches the pool before the destructor has
// passed its buffer (the destructor waits for it) or frees its buffer itself.
// Every other call must end before the destructor starts.
template <BucketPolicy Buckets, class Flags, LimitPolicy Limits, LockPolicy Locks, CheckedBackend B>
    requires FlagPolicyFor<Flags, B>
class Pool {
    using traits = backend_traits<B>;  // the only caller of B's optional members
    using lists_type = shared_lists<B, Buckets, Limits, Locks>;
    using front_type = front_t<Locks, lists_type>;
    static_assert(PoolFront<front_type, lists_type>, "a lock policy's front<Lists> must be a PoolFront (front.hpp)");

public:
    using backend_type = B;
    using memory_type = typename B::memory_type;
    using event_type = typename traits::event_type;
    using handle = Handle<Pool>;
    using bucket_policy = Buckets;
    using flag_policy = Flags;
    using limit_policy = Limits;
    using lock_policy = Locks;

    // The bucket that holds sizes no bucket can round to (above the device
    // limit once rounded): exact-size buffers, matched by size. Over a
    // sub-allocating backend also a policy's large sizes (ExactLargeSizes).
    static constexpr std::size_t exact_bucket = lists_type::exact_bucket;

    // Throws config_error if CLPOOL_HISTORY or CLPOOL_HISTORY_STACKS is
    // invalid; records a history from the start if CLPOOL_HISTORY is set.
    explicit Pool(B backend, Limits limits = Limits{}, Flags flags = Flags{})
        : backend_(std::move(backend)), flags_(std::move(flags)), kind_(flags_.kind(backend_)),
          max_alloc_(backend_.max_alloc_size()), lists_(std::move(limits)) {
        detail::pool_teardown::prepare();
        if (const auto h = detail::history_default(); h.on())
            record_history(h.capacity, h.stacks ? CallSites::on : CallSites::off);
    }

    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    ~Pool() {
        // In a fork child the parent's pool is dropped without a driver call:
        // its buffers and nodes leak, the parent keeps using its own copies.
        // So is a pool destroyed after clpool's exit handler (a static): the
        // driver may be gone by then.
        if (!detail::may_free(generation_)) {
            front_.abandon();
            traits::abandon(backend_);
            return;
        }
        front_.detach(lists_);  // the front first: it holds idle buffers
        lists_.close();         // handles still out become orphans: they free their buffer on release
    }

    // Returns a handle to a buffer of at least nbytes. A hit takes a cached
    // buffer of the same bucket without calling the driver; a miss creates
    // and commits one. allocate(0) returns a buffer of the smallest bucket
    // with nbytes() == 0, so empty tensors still have a valid buffer.
    // Throws size_error (nbytes above the device limit, or rounding
    // overflows), out_of_memory (after giving the cache back and retrying
    // once), driver_error (other driver failures), usage_error (after
    // clpool::shutdown(), or in a fork child on a pool made before the fork),
    // std::bad_alloc (no host memory for the buffer's bookkeeping node, which
    // a miss makes before it calls the driver; out_of_memory is a bad_alloc
    // too). Every failure of a miss counts in stats().failed_allocations.
    // Cost: a hit is one lock and a list pop; a miss is a driver allocation.
    handle allocate(std::size_t nbytes) {
        // One branch for both rare cases: a pool that refuses work, a history with call sites.
        const bool refused = detail::process_word.load(std::memory_order_relaxed) != detail::alive_word(generation_);
        const bool stacks = history_mode_.load(std::memory_order_relaxed) == history_stacks;
        if (refused | stacks) [[unlikely]]
            return allocate_rare(nbytes);
        return allocate_from(nbytes, nullptr);
    }

    // As allocate, but never throws: an empty handle on any failure.
    handle try_allocate(std::size_t nbytes) noexcept {
        try {
            return allocate(nbytes);
        } catch (...) {
            return handle();
        }
    }

    // Hands `h` back if this pool made it. Returns false, and leaves `h`
    // untouched, if it came from another pool (misuse, detected not obeyed).
    bool release(handle& h) noexcept {
        if (!h) return true;
        if (owner_of(h.block_) != this) return false;
        h.release();
        return true;
    }

    // Gives every cached and pending buffer back to the driver. Buffers in
    // use are untouched. Returns the number of bytes given back.
    // A sub-allocating backend (SubAllocated) then also gives its whole empty
    // segments back; the bytes returned are still the pool's own.
    std::size_t trim() noexcept {
        if (!detail::may_free(generation_)) return 0;  // a fork parent's pool, or exit under way: never free
        if (history_mode_.load(std::memory_order_relaxed) == history_stacks) return trim_with_call_site();
        return trim_from(nullptr);
    }
    // Same as trim(); the name the reference library used.
    std::size_t clear() noexcept { return trim(); }

    // Records the pool's last `events` allocate (hit or miss), release (free
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
    // Throws config_error if events > 16777216; bad_alloc (the history is then as it was);
    // usage_error on a pool made before fork() in the parent (as allocate()).
    void record_history(std::size_t events, CallSites sites = CallSites::off) {
        // A parent's pool in a fork child: its locks may be held by a thread not here.
        if (!detail::same_process(generation_)) detail::refuse_work(generation_, backend_.name());
        if (events > detail::max_history_events)
            throw config_error("clpool: record_history(" + std::to_string(events) + "): at most " +
                               std::to_string(detail::max_history_events) + " events (0 turns the history off)");
        const detail::history_config cfg{events, events != 0 && sites == CallSites::on};
        if (cfg.on()) detail::history_clock::start();  // fails only without threads: then a clock read per event
        const std::uint8_t mode = !cfg.on() ? history_off : cfg.stacks ? history_stacks : history_on;
        auto apply = [&] { lists_.set_history(cfg, history_mode_, mode); };
        if constexpr (requires { front_.set_history(lists_, cfg, apply); }) front_.set_history(lists_, cfg, apply);
        else apply();
    }

    // A consistent snapshot: every stripe is locked (in order) while read;
    // with ThreadCached, every magazine first (their buffers count as cached).
    // In a fork child, a pool made before the fork reports an empty pool: a
    // parent thread may have held its locks at the fork, and it holds nothing
    // the child may use (its trim() gives back 0 too).
    PoolStats stats() const {
        if (!detail::same_process(generation_)) return {};
        PoolStats s = front_.stats(lists_);
        traits::add_stats(backend_, s);
        return s;
    }

    // Every buffer the pool holds (in use, cached, pending) with its bucket,
    // sizes, age and tag, and stats() read under the same locks: the buffers
    // add up to its totals. Costs what stats() does plus a walk of every
    // buffer; for diagnostics, not the hot path. In a fork child, a pool made
    // before the fork gives a snapshot with no buffers (as stats()).
    PoolSnapshot snapshot() const { return snapshot_of(true); }

    // The bucket size a request of nbytes is served from (what allocate would
    // hold). Throws size_error as allocate does.
    std::size_t bucket_size_for(std::size_t nbytes) const { return classify(nbytes).second; }

    const B& backend() const noexcept { return backend_; }
    B& backend() noexcept { return backend_; }
    const Limits& limits() const noexcept { return lists_.limits(); }
    MemoryKind kind() const noexcept { return kind_; }
    std::size_t max_alloc_size() const noexcept { return max_alloc_; }

private:
    friend handle;
    using block_type = typename lists_type::block_type;

    std::pair<std::size_t, std::size_t> classify(std::size_t nbytes) const {
        const std::size_t n = nbytes == 0 ? 1 : nbytes;
        if (n > max_alloc_) throw size_error(nbytes, max_alloc_, "above the device's maximum allocation size");
        if constexpr (lists_type::exact_large) {
            if (n > Buckets::exact_above) return {exact_bucket, exact_size(n)};
        }
        const std::size_t index = Buckets::index_from_size(n);
        if (index >= Buckets::bucket_count)
            throw size_error(nbytes, Buckets::size_from_index(Buckets::bucket_count - 1),
                             "rounding up to a bucket overflows");
        const std::size_t bytes = Buckets::size_from_index(index);
        if (bytes > max_alloc_) return {exact_bucket, n};  // never round past the device limit
        return {index, bytes};
    }

    // n (at most max_alloc_) rounded up to the policy's exact_round, unless
    // that passes the device limit.
    std::size_t exact_size(std::size_t n) const noexcept {
        constexpr std::size_t r = Buckets::exact_round;
        const std::size_t up = n + (r - 1);
        if (up < n) return n;  // wraps
        const std::size_t rounded = up & ~(r - 1);
        return rounded <= max_alloc_ ? rounded : n;
    }

    // The paths, with the call site of allocate, release or trim (nullptr
    // unless the history records call sites). Each event is recorded, while a
    // history is on, under the lock its path takes (shared_lists, the front).
    handle allocate_from(std::size_t nbytes, const detail::call_site* where) {
        const auto [index, bytes] = classify(nbytes);
        block_type* b = front_.take(lists_, index, nbytes, where);  // the front's own cache, if any
        if (!b) b = lists_.take(index, bytes, nbytes, where);       // a hit in the shared lists
        if (!b) b = create(index, bytes, nbytes, where);            // a miss
        return handle(b, nbytes);
    }

    void put_back_from(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count,
                       const detail::call_site* where) noexcept {
        const bool pending = hold_events(*b, events, count);
        if (!pending && front_.put(lists_, b, nbytes, where)) return;  // pending buffers always take the shared lists
        if constexpr (lists_type::capped && requires { front_.reclaim(lists_); }) {
            // Refused: the front's empty reserved slots go back first (as its
            // own releases do), then the caps are asked again.
            if (lists_.template put_back<true>(b, nbytes, pending, where)) return;
            front_.reclaim(lists_);
        }
        lists_.put_back(b, nbytes, pending, where);
    }

    std::size_t trim_from(const detail::call_site* where) noexcept {
        front_.flush(lists_);  // the front's buffers join the shared lists
        const std::size_t freed = lists_.trim(where);
        lists_.note_trim(freed, where);
        traits::release_empty(backend_);
        return freed;
    }

    // allocate()'s rare cases. The call site is taken first, outside every
    // lock, from the caller of these (hence out of line: the capture skips
    // this frame).
    [[gnu::noinline]] handle allocate_rare(std::size_t nbytes) {
        if (detail::process_word.load(std::memory_order_relaxed) != detail::alive_word(generation_))
            detail::refuse_work(generation_, backend_.name());
        detail::call_site site;
        detail::capture_call_site(site, 1);
        return allocate_from(nbytes, &site);
    }
    [[gnu::noinline]] void put_back_with_call_site(block_type* b, std::size_t nbytes, const event_type* events,
                                                   std::size_t count) noexcept {
        detail::call_site site;
        detail::capture_call_site(site, 1);
        put_back_from(b, nbytes, events, count, &site);
    }
    [[gnu::noinline]] std::size_t trim_with_call_site() noexcept {
        detail::call_site site;
        detail::capture_call_site(site, 1);
        return trim_from(&site);
    }

    // The cache back to the backend before a sub-allocating one grows (each
    // buffer an evict event): a trim() but for its trim event and the arena's
    // empty segments, which it keeps.
    std::size_t give_cache_back() noexcept {
        front_.flush(lists_);  // the front's buffers join the shared lists
        return lists_.trim();
    }

    // A buffer from the backend. A sub-allocating one carves from its
    // segments; only when nothing fits there, even after the cache went back
    // to it (where it coalesces), may it grow by a driver allocation. The
    // bytes of cache given back are added to `given_back` (the out-of-memory
    // report's "given back before the retry").
    Allocation<memory_type> obtain(std::size_t bytes, std::size_t& given_back) noexcept {
        if constexpr (traits::sub_allocates) {
            auto held = backend_.allocate_held(bytes, kind_);
            if (held.status == AllocStatus::ok) return held;
            given_back += give_cache_back();
            held = backend_.allocate_held(bytes, kind_);
            if (held.status == AllocStatus::ok) return held;
        } else {
            (void)given_back;
        }
        return backend_.allocate(bytes, kind_);
    }

    // Out of line: the miss calls the driver anyway, and allocate() stays a hit's size.
    [[gnu::noinline]] block_type* create(std::size_t index, std::size_t bytes, std::size_t nbytes,
                                         const detail::call_site* where = nullptr) {
        // The node first: if the host is out of memory, no driver call is
        // made, and the miss is a failed allocation (misses == kept driver
        // allocations + failed allocations).
        std::unique_ptr<block_type> node;
        try {
            node = std::make_unique<block_type>();
        } catch (...) {
            lists_.on_failure(index);
            throw;
        }
        std::size_t given_back = 0;  // a sub-allocating pool's obtain() gives the cache back first
        auto result = obtain(bytes, given_back);
        if (result.status == AllocStatus::out_of_memory) {
            // The cache may be what is crowding the device: give it back, try once more.
            given_back += trim_from(where);
            lists_.on_oom_retry(index);
            result = obtain(bytes, given_back);
        }
        if (result.status != AllocStatus::ok) {
            const std::size_t held = lists_.on_failure(index);
            if (result.status == AllocStatus::out_of_memory) lists_.note_oom(index, nbytes, where);
            if (result.status == AllocStatus::out_of_memory)
                throw out_of_memory(nbytes, held, result.native_code, backend_.name(),
                                    oom_details(nbytes, bytes, given_back, result.native_code));
            throw driver_error(std::string(backend_.name()) + " allocation of " + std::to_string(bytes) + " bytes",
                               result.native_code);
        }
        block_type* b = node.release();
        b->memory = std::move(result.memory);
        b->bucket_bytes = bytes;
        b->bucket = static_cast<std::uint32_t>(index);
        b->owner.store(reinterpret_cast<std::uintptr_t>(this), std::memory_order_relaxed);  // adopt() publishes it
        b->generation = generation_;
        b->made_ns = detail::steady_ns();
        lists_.adopt(*b, nbytes, where);
        return b;
    }

    // snapshot(), with the history or (an out-of-memory report that writes no dump) without.
    PoolSnapshot snapshot_of(bool with_history) const {
        PoolSnapshot out;
        out.pool = backend_.name();
        if (!detail::same_process(generation_)) {  // a parent's pool: its locks may be held by a thread not here
            out.taken_ns = detail::steady_ns();
            return out;
        }
        std::vector<detail::buffer_place> places;  // a sub-allocating pool's: blocks to buffers
        std::optional<detail::history_events> events;
        std::vector<std::pair<std::size_t, detail::call_site>> sites;  // buffer index, its holder's call site
        auto walk = [&](PoolStats s, const auto& held_by_front) {
            if (const detail::history_config* h = with_history ? lists_.history_config() : nullptr) {
                events.emplace(h->capacity);
                lists_.collect_history(*events);
                if constexpr (requires { front_.collect_history(*events); }) front_.collect_history(*events);
            }
            lists_.for_each_block([&](const block_type& b, BufferState state, std::uint64_t seq) {
                if (state == BufferState::in_use && held_by_front(&b)) state = BufferState::cached;
                BufferInfo info;
                info.state = state;
                info.bucket_size = b.bucket == exact_bucket ? 0 : b.bucket_bytes;
                info.bytes_requested = state == BufferState::in_use ? b.requested : 0;
                info.bytes_held = b.bucket_bytes;
                info.made_ns = b.made_ns;
                info.handout_seq = b.handout_seq;
                info.handouts_since = seq - b.handout_seq;
                info.uses = b.uses;
                if (const char* tag = b.current_tag()) info.tag = tag;
                info.id = reinterpret_cast<std::uintptr_t>(&b);
                if constexpr (traits::sub_allocates)
                    places.push_back({traits::place_of(backend_, b.memory), info.id, info.state});
                if (b.site) sites.emplace_back(out.buffers.size(), *b.site);
                out.buffers.push_back(std::move(info));
            });
            // Under the pool's locks too (they come before the arena's), so
            // the blocks and buffers agree but for one being made or freed.
            traits::add_segments(backend_, out.segments);
            detail::join_segments(out.segments, places);
            traits::add_stats(backend_, s);  // the segment counters, as stats() has them
            // The arena is carved without the pool's locks (a miss on another
            // thread), so it may have changed between the two reads above:
            // the segment totals are the list's own, so the two agree.
            if constexpr (traits::sub_allocates) detail::segment_totals(out.segments, s);
            return s;
        };
        if constexpr (requires { front_.inspect(lists_, walk); }) out.stats = front_.inspect(lists_, walk);
        else
            out.stats =
                lists_.inspect([&](PoolStats s) { return walk(std::move(s), [](const auto*) { return false; }); });
        // Every lock let go: now the slow part, naming call sites and converting ticks.
        out.taken_ns = detail::steady_ns();
        detail::call_site_names names;
        for (const auto& [i, site] : sites) out.buffers[i].frames = names.frames(site);
        if (events) out.history = events->finish(names);
        std::stable_partition(out.buffers.begin(), out.buffers.end(),
                              [](const BufferInfo& b) { return b.state == BufferState::in_use; });
        return out;
    }

    // The forensics lines of out_of_memory::what() (and the CLPOOL_OOM_SNAPSHOT
    // dump); none if even they cannot be made (out of host memory too). Out of
    // line and cold: allocate(), with create() inlined, stays as small as before.
    [[gnu::cold, gnu::noinline]] std::string oom_details(std::size_t nbytes, std::size_t bytes, std::size_t given_back,
                                                         int code) const noexcept {
        try {
            OutOfMemoryRecord oom{backend_.name(), nbytes, bytes, given_back, code};
            // The lines show no history: only the dump, if asked for, carries it.
            const char* dump = std::getenv("CLPOOL_OOM_SNAPSHOT");
            return detail::oom_report(snapshot_of(dump && *dump), oom);
        } catch (...) {
            return {};
        }
    }

    static Pool* owner_of(const block_type* b) noexcept {
        return reinterpret_cast<Pool*>(b->owner.load(std::memory_order_acquire) & ~block_type::releasing);
    }

    // Takes a block back from a handle. Never throws: if the events cannot be
    // copied (out of host memory), waits for them instead.
    // Racing ~Pool (pool_teardown.hpp): the release marks the block
    // `releasing` before it enters the pool. ~Pool, under the block's stripe
    // lock, orphans each block in use that is not so marked and waits for
    // those that are; the release clears the mark under the lock of whichever
    // list or magazine takes the block (or frees it), and touches the pool no
    // more after that lock.
    static void recycle(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count) noexcept {
        if (!detail::may_free(b->generation)) return;  // made before fork(), or exit under way: leak it, no driver call
        Pool* pool = claim(*b);
        if (!pool) [[unlikely]]
            return free_orphan(b, events, count);
        pool->put_back(b, nbytes, events, count);
    }

    // A handle that outlived its pool frees its buffer itself.
    [[gnu::cold, gnu::noinline]] static void free_orphan(block_type* b, const event_type* events,
                                                         std::size_t count) noexcept {
        if constexpr (traits::free_waits_for_events) traits::wait_for(events, count);
        delete b;
    }

    // Marks b `releasing` and returns its pool, or nullptr if ~Pool orphaned
    // it. A plain store, a compiler barrier and a load of the same cache
    // line, not a read-modify-write: ~Pool pays for the rest (pool_teardown.hpp).
    static Pool* claim(block_type& b) noexcept {
        const std::uintptr_t word = b.owner.load(std::memory_order_acquire);
        if (word == 0) return nullptr;
        b.owner.store(word | block_type::releasing, std::memory_order_relaxed);
        detail::asymmetric_fence::light();
        if (b.pool_going.load(std::memory_order_relaxed)) [[unlikely]] {
            if (!detail::pool_teardown::kept(b)) return nullptr;
        }
        return reinterpret_cast<Pool*>(word);
    }

    void put_back(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count) noexcept {
        if (history_mode_.load(std::memory_order_relaxed) == history_stacks) [[unlikely]]
            return put_back_with_call_site(b, nbytes, events, count);
        put_back_from(b, nbytes, events, count, nullptr);
    }

    // Keeps copies of the events if any still runs; true if so.
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
        }
        return false;
    }

    B backend_;
    [[no_unique_address]] Flags flags_;
    const MemoryKind kind_;
    const std::size_t max_alloc_;
    const std::uint32_t generation_ = detail::birth_generation();  // also installs the fork handler
    // Whether the history records call sites: read, relaxed, by every
    // allocate and release, next to the fields allocate reads anyway; stored
    // under every lock by record_history. (Whether it records at all is each
    // ring's pointer, which the path reads under its lock.)
    static constexpr std::uint8_t history_off = 0, history_on = 1, history_stacks = 2;
    std::atomic<std::uint8_t> history_mode_{history_off};
    lists_type lists_;
    [[no_unique_address]] front_type front_;
};

}  // namespace clpool
