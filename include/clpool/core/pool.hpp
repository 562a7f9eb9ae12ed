// Pool: the policy-based caching allocator over a Backend.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/core/detail/counter.hpp>
#include <clpool/policies/detail/magazines.hpp>
#include <clpool/core/detail/process_state.hpp>
#include <clpool/core/policy_concepts.hpp>

#include <boost/intrusive/list.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace clpool {

namespace detail {

#ifdef NDEBUG
using link_mode = boost::intrusive::link_mode<boost::intrusive::normal_link>;
#else
// Debug builds catch a node destroyed while still on a list.
using link_mode = boost::intrusive::link_mode<boost::intrusive::safe_link>;
#endif

// The host-side node for one driver allocation. Lives on exactly one list at
// a time: its bucket's free list, its bucket's pending list, or its stripe's
// in-use list. Allocated on a miss only, so a hit allocates nothing.
template <class Memory, class Event>
struct block {
    boost::intrusive::list_member_hook<link_mode> hook;
    Memory memory;
    std::size_t bucket_bytes = 0;
    std::size_t requested = 0;    // what the current holder asked for (stats)
    std::uint32_t bucket = 0;     // index into the pool's buckets
    std::uint32_t generation = 0; // fork generation it was made in (process_state.hpp)
    void* owner = nullptr;        // the pool; nullptr once that pool is destroyed
    std::vector<Event> events;    // pending: reuse after these complete (capacity kept across reuses)
};

}  // namespace detail

// A caching allocator for one backend. Buffers are grouped in buckets (the
// BucketPolicy), asked of the backend with the FlagPolicy's memory kind,
// kept while the LimitPolicy admits them, under the LockPolicy's locks.
//
// Thread safety: every member function is safe to call concurrently when the
// LockPolicy locks (SingleMutex, Striped); with NoLock one thread at a time.
// A Pool neither moves nor copies (handles point to it). Destroying a pool
// frees its cache; handles still out keep their buffers and free them on release.
template <BucketPolicy Buckets, class Flags, LimitPolicy Limits, LockPolicy Locks, CheckedBackend B>
    requires FlagPolicyFor<Flags, B>
class Pool {
    using traits = backend_traits<B>;  // the only caller of B's optional members

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
    // limit once rounded): exact-size buffers, matched by size.
    static constexpr std::size_t exact_bucket = Buckets::bucket_count;
    // True for ThreadCached<K, Shared>: per-thread magazines in front of the shared lists.
    static constexpr bool thread_cached = requires { Locks::magazine_size; };

    explicit Pool(B backend, Limits limits = Limits{}, Flags flags = Flags{})
        : backend_(std::move(backend)), limits_(std::move(limits)), flags_(std::move(flags)),
          kind_(flags_.kind(backend_)), max_alloc_(backend_.max_alloc_size()) {}

    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    ~Pool() {
        // In a fork child the parent's pool is dropped without a driver call:
        // its buffers and nodes leak, the parent keeps using its own copies.
        if (!detail::same_process(generation_)) {
            if constexpr (thread_cached) tc_ops::abandon_all(*this);
            traits::abandon(backend_);
            return;
        }
        if constexpr (thread_cached) tc_ops::detach_all(*this);  // magazines first: they hold idle buffers
        // Handles still out become orphans: they free their buffer on release.
        detail_list doomed;
        for (auto& s : stripes_) {
            std::lock_guard lock(s.mutex);
            for (auto& b : s.in_use) b.owner = nullptr;
            s.in_use.clear();
        }
        for (auto& bucket : buckets_) {
            doomed.splice(doomed.end(), bucket.free);
            doomed.splice(doomed.end(), bucket.pending);
        }
        dispose(doomed);
    }

    // Returns a handle to a buffer of at least nbytes. A hit takes a cached
    // buffer of the same bucket without calling the driver; a miss creates
    // and commits one. allocate(0) returns a buffer of the smallest bucket
    // with nbytes() == 0, so empty tensors still have a valid buffer.
    // Throws size_error (nbytes above the device limit, or rounding
    // overflows), out_of_memory (after giving the cache back and retrying
    // once), driver_error (other driver failures), usage_error (after
    // clpool::shutdown(), or in a fork child on a pool made before the fork).
    // Cost: a hit is one lock and a list pop; a miss is a driver allocation.
    handle allocate(std::size_t nbytes) {
        if (detail::process_word.load(std::memory_order_relaxed) != detail::alive_word(generation_)) [[unlikely]]
            detail::refuse_work(generation_, backend_.name());
        const auto [index, bytes] = classify(nbytes);
        if constexpr (thread_cached) {
            if (index != exact_bucket) {
                if (auto* m = tc_ops::mine(*this)) {
                    if (block_type* b = tc_ops::take(*this, *m, index, nbytes)) return handle(b, nbytes);
                    return handle(create(index, bytes, nbytes), nbytes);
                }
            }
        }
        if (block_type* b = take_cached(index, bytes, nbytes)) return handle(b, nbytes);
        return handle(create(index, bytes, nbytes), nbytes);
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
        if (h.block_->owner != this) return false;
        h.release();
        return true;
    }

    // Gives every cached and pending buffer back to the driver. Buffers in
    // use are untouched. Returns the number of bytes given back.
    std::size_t trim() noexcept {
        if (!detail::same_process(generation_)) return 0;  // a fork parent's pool: never touch its buffers
        if constexpr (thread_cached) tc_ops::flush_all(*this);  // magazines' buffers join the shared lists
        detail_list doomed;
        std::size_t freed = 0;
        for (std::size_t si = 0; si < Locks::stripes; ++si) {
            auto& s = stripes_[si];
            std::lock_guard lock(s.mutex);
            for (std::size_t i = si; i < buckets_.size(); i += Locks::stripes) {
                auto& bucket = buckets_[i];
                for (auto* list : {&bucket.free, &bucket.pending}) {
                    for (auto& b : *list) freed += b.bucket_bytes;
                    const bool pending = list == &bucket.pending;
                    auto& count = pending ? bucket.pending_count : bucket.cached_count;
                    s.driver_frees += count;
                    count = 0;
                    doomed.splice(doomed.end(), *list);
                }
            }
            const std::size_t stripe_idle = s.bytes_cached + s.bytes_pending;
            s.bytes_cached = 0;
            s.bytes_pending = 0;
            idle_total_.sub(stripe_idle);
            held_.sub(stripe_idle);
        }
        dispose(doomed);
        return freed;
    }
    // Same as trim(); the name the reference library used.
    std::size_t clear() noexcept { return trim(); }

    // A consistent snapshot: every stripe is locked (in order) while read;
    // with ThreadCached, every magazine first (their buffers count as cached).
    PoolStats stats() const {
        if constexpr (thread_cached) return tc_ops::template stats<PoolStats>(*this);
        else return snapshot();
    }

private:
    PoolStats snapshot() const {
        PoolStats out;
        std::array<std::unique_lock<typename Locks::mutex_type>, Locks::stripes> locks;
        for (std::size_t i = 0; i < Locks::stripes; ++i)
            locks[i] = std::unique_lock(stripes_[i].mutex);
        for (const auto& s : stripes_) {
            out.hits += s.hits;
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
            const auto& b = buckets_[i];
            if (b.hits + b.misses + b.cached_count + b.in_use_count + b.pending_count == 0) continue;
            out.buckets.push_back({i == exact_bucket ? 0 : Buckets::size_from_index(i), b.hits, b.misses,
                                   b.evictions, b.cached_count, b.in_use_count, b.pending_count});
        }
        return out;
    }

public:
    // The bucket size a request of nbytes is served from (what allocate would
    // hold). Throws size_error as allocate does.
    std::size_t bucket_size_for(std::size_t nbytes) const { return classify(nbytes).second; }

    const B& backend() const noexcept { return backend_; }
    B& backend() noexcept { return backend_; }
    const Limits& limits() const noexcept { return limits_; }
    memory_kind kind() const noexcept { return kind_; }
    std::size_t max_alloc_size() const noexcept { return max_alloc_; }

private:
    friend handle;
    friend struct detail::thread_cache_ops<Pool>;
    using tc_ops = detail::thread_cache_ops<Pool>;
    using block_type = detail::block<memory_type, event_type>;
    using detail_list = boost::intrusive::list<
        block_type, boost::intrusive::member_hook<block_type, decltype(block_type::hook), &block_type::hook>,
        boost::intrusive::constant_time_size<false>>;

    struct bucket_state {
        detail_list free;     // LIFO: the most recently used buffer is warmest
        detail_list pending;  // released with events still running
        std::uint64_t hits = 0, misses = 0, evictions = 0;
        std::size_t cached_count = 0, in_use_count = 0, pending_count = 0;
    };

    // One per lock stripe, on its own cache line so stripes do not share lines.
    struct alignas(64) stripe_state {
        mutable typename Locks::mutex_type mutex;
        detail_list in_use;
        std::uint64_t hits = 0, misses = 0, evictions = 0, driver_frees = 0, oom_retries = 0, failed = 0;
        std::size_t bytes_cached = 0, bytes_pending = 0, bytes_in_use = 0, bytes_requested = 0, peak_in_use = 0;
    };

    static constexpr bool shared_counters = Locks::stripes > 1;
    using counter = detail::counter<shared_counters>;
    // An unlimited pool needs no running total of idle bytes: it would be one
    // more shared cache line on the striped hot path.
    using idle_counter = std::conditional_t<requires { requires Limits::admits_everything; }, detail::null_counter, counter>;

    static constexpr std::size_t stripe_of(std::size_t bucket) noexcept { return bucket % Locks::stripes; }

    std::pair<std::size_t, std::size_t> classify(std::size_t nbytes) const {
        const std::size_t n = nbytes == 0 ? 1 : nbytes;
        if (n > max_alloc_) throw size_error(nbytes, max_alloc_, "above the device's maximum allocation size");
        const std::size_t index = Buckets::index_from_size(n);
        if (index >= Buckets::bucket_count)
            throw size_error(nbytes, Buckets::size_from_index(Buckets::bucket_count - 1),
                             "rounding up to a bucket overflows");
        const std::size_t bytes = Buckets::size_from_index(index);
        if (bytes > max_alloc_) return {exact_bucket, n};  // never round past the device limit
        return {index, bytes};
    }

    // Moves pending buffers whose events have completed to the free list.
    void reap_pending(bucket_state& bucket, stripe_state& s) noexcept {
        for (auto it = bucket.pending.begin(); it != bucket.pending.end();) {
            auto& b = *it;
            const bool done = std::all_of(b.events.begin(), b.events.end(),
                                          [](const event_type& e) { return traits::event_complete(e); });
            if (!done) { ++it; continue; }
            b.events.clear();
            it = bucket.pending.erase(it);
            bucket.free.push_front(b);
            --bucket.pending_count;
            ++bucket.cached_count;
            s.bytes_pending -= b.bucket_bytes;
            s.bytes_cached += b.bucket_bytes;
        }
    }

    block_type* take_cached(std::size_t index, std::size_t bytes, std::size_t nbytes) noexcept {
        auto& bucket = buckets_[index];
        auto& s = stripes_[stripe_of(index)];
        std::lock_guard lock(s.mutex);
        if constexpr (traits::has_events) {
            if (!bucket.pending.empty()) reap_pending(bucket, s);
        }
        block_type* b = nullptr;
        if (index != exact_bucket) {
            if (!bucket.free.empty()) {
                b = &bucket.free.front();
                bucket.free.pop_front();
            }
        } else {
            auto it = std::find_if(bucket.free.begin(), bucket.free.end(),
                                   [&](const block_type& x) { return x.bucket_bytes == bytes; });
            if (it != bucket.free.end()) {
                b = &*it;
                bucket.free.erase(it);
            }
        }
        if (!b) {
            ++s.misses;
            ++bucket.misses;
            return nullptr;
        }
        ++s.hits;
        ++bucket.hits;
        --bucket.cached_count;
        ++bucket.in_use_count;
        s.bytes_cached -= b->bucket_bytes;
        idle_total_.sub(b->bucket_bytes);
        mark_in_use(s, *b, nbytes);
        return b;
    }

    void mark_in_use(stripe_state& s, block_type& b, std::size_t nbytes) noexcept {
        b.requested = nbytes;
        s.in_use.push_back(b);
        s.bytes_in_use += b.bucket_bytes;
        s.bytes_requested += nbytes;
        s.peak_in_use = std::max(s.peak_in_use, s.bytes_in_use);
    }

    block_type* create(std::size_t index, std::size_t bytes, std::size_t nbytes) {
        auto& s = stripes_[stripe_of(index)];
        auto result = backend_.allocate(bytes, kind_);
        if (result.status == alloc_status::out_of_memory) {
            // The cache may be what is crowding the device: give it back, try once more.
            trim();
            { std::lock_guard lock(s.mutex); ++s.oom_retries; }
            result = backend_.allocate(bytes, kind_);
        }
        if (result.status != alloc_status::ok) {
            std::size_t held = 0;
            {
                // held_ is a plain integer under a one-stripe lock: read it there too.
                std::lock_guard lock(s.mutex);
                ++s.failed;
                held = held_.load();
            }
            if (result.status == alloc_status::out_of_memory)
                throw out_of_memory(nbytes, held, result.native_code, backend_.name());
            throw driver_error(std::string(backend_.name()) + " allocation of " + std::to_string(bytes) +
                                   " bytes",
                               result.native_code);
        }
        auto* b = new block_type;  // on failure, result.memory frees itself
        b->memory = std::move(result.memory);
        b->bucket_bytes = bytes;
        b->bucket = static_cast<std::uint32_t>(index);
        b->owner = this;
        b->generation = generation_;
        std::lock_guard lock(s.mutex);
        peak_held_.max(held_.add(bytes));
        ++buckets_[index].in_use_count;
        mark_in_use(s, *b, nbytes);
        return b;
    }

    static Pool* owner_of(const block_type* b) noexcept { return static_cast<Pool*>(b->owner); }

    // Takes a block back from a handle. Never throws: if the events cannot be
    // copied (out of host memory), waits for them instead.
    static void recycle(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count) noexcept {
        if (!detail::same_process(b->generation)) return;  // made before fork(): leak it, no driver call
        Pool* pool = owner_of(b);
        if (!pool) {  // the pool is gone: this handle outlived it
            if constexpr (traits::free_waits_for_events) traits::wait_for(events, count);
            delete b;
            return;
        }
        pool->put_back(b, nbytes, events, count);
    }

    void put_back(block_type* b, std::size_t nbytes, const event_type* events, std::size_t count) noexcept {
        bool pending = false;
        if constexpr (traits::has_events) {
            std::size_t live = 0;
            for (std::size_t i = 0; i < count; ++i) live += !traits::event_complete(events[i]);
            if (live) {
                try {
                    b->events.assign(events, events + count);
                    pending = true;
                } catch (...) {
                    traits::wait_for(events, count);
                }
            }
        }
        if constexpr (thread_cached) {
            if (!pending && b->bucket != exact_bucket && !detail::shut_down()) {
                if (auto* m = tc_ops::mine(*this)) return tc_ops::put(*this, *m, b, nbytes);
            }
        }
        auto& bucket = buckets_[b->bucket];
        auto& s = stripes_[stripe_of(b->bucket)];
        bool keep = false;
        {
            std::lock_guard lock(s.mutex);
            s.in_use.erase(s.in_use.iterator_to(*b));
            --bucket.in_use_count;
            s.bytes_in_use -= b->bucket_bytes;
            s.bytes_requested -= nbytes;
            const std::size_t in_bucket = bucket.cached_count + bucket.pending_count + magazine_slots(b->bucket);
            // After shutdown() nothing is cached: the buffer goes straight back.
            keep = !detail::shut_down() && idle_total_.try_reserve(b->bucket_bytes, [&](std::size_t idle_before) {
                return limits_.admit(b->bucket_bytes, idle_before, in_bucket);
            });
            if (keep && pending) {
                bucket.pending.push_back(*b);
                ++bucket.pending_count;
                s.bytes_pending += b->bucket_bytes;
            } else if (keep) {
                bucket.free.push_front(*b);
                ++bucket.cached_count;
                s.bytes_cached += b->bucket_bytes;
            } else {
                ++s.evictions;
                ++bucket.evictions;
                ++s.driver_frees;
                held_.sub(b->bucket_bytes);
            }
        }
        if (!keep) {
            if constexpr (traits::free_waits_for_events) traits::wait_for(b->events.data(), b->events.size());
            delete b;  // the driver frees it once any command still using it is done
        }
    }

    // Slots the threads' magazines hold against the caps in this bucket.
    std::size_t magazine_slots(std::size_t index) const noexcept {
        if constexpr (thread_cached) return index < exact_bucket ? tc_.reserved[index] : 0;
        else return 0;
    }

    static void dispose(detail_list& doomed) noexcept {
        doomed.clear_and_dispose([](block_type* b) {
            if constexpr (traits::free_waits_for_events) traits::wait_for(b->events.data(), b->events.size());
            delete b;
        });
    }

    B backend_;
    [[no_unique_address]] Limits limits_;
    [[no_unique_address]] Flags flags_;
    const memory_kind kind_;
    const std::size_t max_alloc_;
    const std::uint32_t generation_ = detail::birth_generation();  // also installs the fork handler
    std::array<stripe_state, Locks::stripes> stripes_;
    std::array<bucket_state, Buckets::bucket_count + 1> buckets_;
    idle_counter idle_total_;  // cached + pending bytes, against the byte cap
    counter held_;        // bytes held from the driver
    counter peak_held_;
    [[no_unique_address]] std::conditional_t<thread_cached, detail::thread_cache_state<exact_bucket>,
                                             detail::no_thread_cache> tc_;
};

}  // namespace clpool
