// Pool: the policy-based caching allocator over a Backend.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/diagnostics_hook.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/front.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/core/shared_lists.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/core/detail/bucket_map.hpp>
#include <clpool/core/detail/pool_miss.hpp>
#include <clpool/core/detail/pool_teardown.hpp>
#include <clpool/core/detail/refuse_work.hpp>
#include <clpool/core/policy_concepts.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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
//
// Diag: its diagnostics (diagnostics_hook.hpp). NoDiagnostics compiles them
// away; clpool::Diagnostics, the named pools', adds history and snapshots.
template <BucketPolicy Buckets, class Flags, LimitPolicy Limits, LockPolicy Locks, CheckedBackend B,
          PoolDiagnostics Diag = NoDiagnostics>
    requires FlagPolicyFor<Flags, B>
class Pool {
    using traits = backend_traits<B>;  // the only caller of B's optional members
    using lists_type = shared_lists<B, Buckets, Limits, Locks, Diag>;
    using front_type = front_t<Locks, lists_type>;
    using fronts = front_traits<front_type, lists_type>;  // the only caller of the front's optional members
    static_assert(detail::diagnose_front<front_type, lists_type>(),
                  "a lock policy's front<Lists> must be a PoolFront (front.hpp)");
    using site_type = typename Diag::site;

public:
    using backend_type = B;
    using memory_type = typename B::memory_type;
    using event_type = typename traits::event_type;
    using handle = Handle<Pool>;
    using bucket_policy = Buckets;
    using flag_policy = Flags;
    using limit_policy = Limits;
    using lock_policy = Locks;
    using diagnostics = Diag;

    // The bucket that holds sizes no bucket can round to (above the device
    // limit once rounded): exact-size buffers, matched by size. Over a
    // sub-allocating backend also a policy's large sizes (ExactLargeSizes).
    static constexpr std::size_t exact_bucket = lists_type::exact_bucket;

    // With diagnostics: throws config_error if CLPOOL_HISTORY or
    // CLPOOL_HISTORY_STACKS is invalid; records a history from the start if
    // CLPOOL_HISTORY is set.
    explicit Pool(B backend, Limits limits = Limits{}, Flags flags = Flags{})
        : backend_(std::move(backend)), flags_(std::move(flags)), kind_(flags_.kind(backend_)),
          max_alloc_(backend_.max_alloc_size()), lists_(std::move(limits)) {
        detail::pool_teardown::prepare();
        if constexpr (Diag::enabled) Diag::start(*this);
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
        // One branch for both rare cases: a pool that refuses work, diagnostics that want the call site.
        const bool refused = detail::process_word.load(std::memory_order_relaxed) != detail::alive_word(generation_);
        if (refused | diag_.wants_site()) [[unlikely]]
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
    // use are untouched. Returns the number of bytes given back. Where freeing
    // waits for a buffer's events (SVM, USM, mapped pinned memory), a pending
    // buffer whose events still run is kept: trim() does not block on them.
    // A sub-allocating backend (SubAllocated) then also gives its whole empty
    // segments back; the bytes returned are still the pool's own.
    std::size_t trim() noexcept {
        if (!detail::may_free(generation_)) return 0;  // a fork parent's pool, or exit under way: never free
        if (diag_.wants_site()) [[unlikely]]
            return trim_rare();
        return trim_from(nullptr);
    }
    // Same as trim(): the name std containers and PyTorch's allocator use for emptying a cache.
    std::size_t clear() noexcept { return trim(); }

    // Records the pool's recent events, which snapshot() carries; with
    // CallSites::on where each was called from. Only with diagnostics:
    // Diag::record_history says what it records, costs and throws, and also
    // usage_error on a pool made before fork() in the parent (as allocate()).
    void record_history(std::size_t events, CallSites sites = CallSites::off)
        requires(Diag::enabled)
    {
        // A parent's pool in a fork child: its locks may be held by a thread not here.
        if (!detail::same_process(generation_)) detail::refuse_work(generation_, backend_.name());
        Diag::record_history(*this, events, sites);
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

    // Every buffer the pool holds, and stats() read under the same locks (a
    // PoolSnapshot). Only with diagnostics: Diag::snapshot says what it holds and costs.
    auto snapshot() const
        requires(Diag::enabled)
    {
        return Diag::snapshot(*this);
    }

    // The bucket size a request of nbytes is served from (what allocate would
    // hold). Throws size_error as allocate does.
    std::size_t bucket_size_for(std::size_t nbytes) const { return classify(nbytes).bytes; }

    const B& backend() const noexcept { return backend_; }
    B& backend() noexcept { return backend_; }
    const Limits& limits() const noexcept { return lists_.limits(); }
    MemoryKind kind() const noexcept { return kind_; }
    std::size_t max_alloc_size() const noexcept { return max_alloc_; }

private:
    friend handle;
    friend Diag;  // its record_history, snapshot and out-of-memory report read the lists and the front
    friend detail::pool_miss;
    using block_type = typename lists_type::block_type;

    detail::bucket_choice classify(std::size_t nbytes) const {
        return detail::bucket_map<Buckets, lists_type::exact_large>::classify(nbytes, max_alloc_);
    }

    // The paths: each a ladder (front, shared lists, driver). `where` is the call site, nullptr unless
    // the diagnostics want it; an event is recorded under the lock its path takes anyway.
    [[gnu::always_inline]] handle allocate_from(std::size_t nbytes, const site_type* where) {
        const auto [index, bytes] = classify(nbytes);
        block_type* b = front_.take(lists_, index, nbytes, where);  // the front's own cache, if any
        if (!b) b = lists_.take(index, bytes, nbytes, where);       // a hit in the shared lists
        if (!b) b = create(index, bytes, nbytes, where);            // a miss
        return handle(b, nbytes);
    }

    [[gnu::always_inline]] void put_back_from(block_type* b, std::size_t nbytes, const event_type* events,
                                              std::size_t count, const site_type* where) noexcept {
        const bool pending = lists_type::hold_events(*b, events, count);
        if (!pending && front_.put(lists_, b, nbytes, where)) return;  // pending buffers always take the shared lists
        if constexpr (lists_type::capped && fronts::has_reclaim) {
            // Refused: the front's empty reserved slots go back first (as its
            // own releases do), then the caps are asked again.
            if (lists_.template put_back<true>(b, nbytes, pending, where)) return;
            front_.reclaim(lists_);
        }
        lists_.put_back(b, nbytes, pending, where);
    }

    std::size_t trim_from(const site_type* where) noexcept {
        // Where freeing waits for a buffer's events (SVM, USM, mapped pinned), a pending
        // buffer whose events still run stays: trim() never blocks on the application's commands.
        const std::size_t freed = give_cache_back<!traits::free_waits_for_events>(where);
        if constexpr (Diag::enabled) lists_.note_trim(freed, where);
        traits::release_empty(backend_);
        return freed;
    }

    // The rare paths: a pool that refuses work, diagnostics that want the call site, taken first,
    // outside every lock, from these functions' caller (out of line: here() skips their frame).
    [[gnu::noinline]] handle allocate_rare(std::size_t nbytes) {
        if (detail::process_word.load(std::memory_order_relaxed) != detail::alive_word(generation_))
            detail::refuse_work(generation_, backend_.name());
        const site_type site = here();
        return allocate_from(nbytes, &site);
    }
    [[gnu::noinline]] void put_back_rare(block_type* b, std::size_t n, const event_type* e, std::size_t c) noexcept {
        const site_type site = here();
        put_back_from(b, n, e, c, &site);
    }
    [[gnu::noinline]] std::size_t trim_rare() noexcept {
        const site_type site = here();
        return trim_from(&site);
    }
    [[gnu::always_inline]] static site_type here() noexcept {
        site_type site;
        if constexpr (Diag::enabled) Diag::capture(site, 1);
        return site;
    }

    // The cache back to the backend (each buffer an evict event at `where`):
    // trim()'s work but for its trim event and the arena's empty segments,
    // which a sub-allocating backend keeps when it only needs room to grow.
    // With_pending false (a miss making room): buffers whose events still
    // run stay pending, since freeing them would wait for those events.
    template <bool with_pending = true>
    std::size_t give_cache_back(const site_type* where = nullptr) noexcept {
        front_.flush(lists_);  // the front's buffers join the shared lists
        return lists_.template trim<with_pending>(where);
    }

    // The miss: a new buffer from the backend (detail::pool_miss). Out of
    // line: it calls the driver anyway, and allocate() stays a hit's size.
    [[gnu::noinline]] block_type* create(std::size_t index, std::size_t bytes, std::size_t nbytes,
                                         const site_type* where) {
        return detail::pool_miss::create(*this, index, bytes, nbytes, where);
    }

    // f(stats, held) with every lock of stats() held (the diagnostics' snapshot walks the blocks in it).
    template <class F>
    decltype(auto) inspect(F&& f) const {
        return fronts::inspect(front_, lists_, std::forward<F>(f));
    }

    static Pool* owner_of(const block_type* b) noexcept {
        return reinterpret_cast<Pool*>(b->owner.load(std::memory_order_acquire) & ~block_type::releasing);
    }

    // Takes a block back from a handle; pool_teardown.hpp has the handshake
    // with ~Pool (claim). Never throws: if the events cannot be copied (out of
    // host memory), waits for them instead.
    static void recycle(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count) noexcept {
        if (!detail::may_free(b->generation)) return;  // made before fork(), or exit under way: leak it, no driver call
        auto* pool = reinterpret_cast<Pool*>(detail::pool_teardown::claim(*b));
        if (!pool) [[unlikely]]
            return detail::pool_teardown::free_orphan<traits>(b, events, count);  // it outlived its pool
        if (pool->diag_.wants_site()) [[unlikely]]
            return pool->put_back_rare(b, nbytes, events, count);
        pool->put_back_from(b, nbytes, events, count, nullptr);
    }

    B backend_;
    [[no_unique_address]] Flags flags_;
    const MemoryKind kind_;
    const std::size_t max_alloc_;
    const std::uint32_t generation_ = detail::birth_generation();  // also installs the fork handler
    // The diagnostics' own (wants_site(): read by every allocate and release). Empty for NoDiagnostics.
    [[no_unique_address]] typename Diag::pool_state diag_;
    lists_type lists_;
    [[no_unique_address]] front_type front_;
};

}  // namespace clpool
