// Every pool of one replayed configuration, one per (context, flags) of the trace, behind a small
// virtual interface; make_pool_set instantiates the compile-time pool type a configuration names.
#pragma once

#include <clpool/clpool.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "config.hpp"
#include "counting_backends.hpp"
#include "trace.hpp"

namespace clpool::replay {

// Every pool of one configuration: one per (context, flags) of the trace, as
// the interposer keeps them. CL_MEM_USE_HOST_PTR buffers pass through
// unpooled (their storage is the application's) and count as driver allocations.
class PoolSet {
public:
    virtual ~PoolSet() {
        if (report_next_) *report_next_ = counter_.next_capacity;
    }
    // Replays one event. Returns false if the allocation failed (out of memory).
    virtual bool apply(const Event& e) = 0;
    // Stats merged over every pool of the set (buckets merged by size).
    virtual PoolStats stats() const = 0;
    // Bytes handed out beyond what was asked for, right now.
    virtual std::size_t waste() const noexcept = 0;
    const DriverCounter& driver() const noexcept { return counter_; }
    void set_capacity(std::size_t bytes) noexcept { counter_.capacity = bytes; }
    // Where to write DriverCounter::next_capacity when the set is destroyed (Target::next_capacity).
    void report_next_capacity(std::size_t* out) noexcept { report_next_ = out; }
    std::uint64_t passthrough() const noexcept { return passthrough_; }

protected:
    DriverCounter counter_;  // declared first: outlives the pools and handles of the derived class
    std::uint64_t passthrough_ = 0;
    std::size_t* report_next_ = nullptr;
};

inline constexpr std::uint64_t cl_mem_use_host_ptr = 1u << 3;  // CL_MEM_USE_HOST_PTR, without the headers

template <class PoolT, class MakeBackend>
class PoolSetImpl final : public PoolSet {
public:
    PoolSetImpl(MakeBackend make, typename PoolT::limit_policy limits) : make_(std::move(make)), limits_(limits) {}

    bool apply(const Event& e) override {
        if (e.flags & cl_mem_use_host_ptr) {
            if (e.kind == op::alloc) {
                ++passthrough_;
                ++counter_.allocations;
                counter_.held += e.bytes;
            } else {
                ++counter_.frees;
                counter_.held -= e.bytes;
            }
            if (e.ends_context) close(e.ctx);
            return true;
        }
        const bool ok = e.kind == op::free ? (release(e), true) : obtain(e);
        if (e.ends_context) close(e.ctx);
        return ok;
    }

    PoolStats stats() const override {
        PoolStats out;
        std::map<std::size_t, BucketStats> buckets;
        for (const auto& [key, pool] : pools_) merge(out, buckets, pool->stats());
        merge(out, buckets, closed_);
        for (auto& [size, b] : buckets) out.buckets.push_back(b);
        return out;
    }

    std::size_t waste() const noexcept override { return waste_; }

private:
    void release(const Event& e) {
        auto it = live_.find(e.id);
        if (it == live_.end()) return;  // its alloc failed
        waste_ -= it->second.bucket_size() - it->second.nbytes();
        live_.erase(it);
        --live_in_ctx_[e.ctx];
    }
    bool obtain(const Event& e) {
        auto& slot = pools_[{e.ctx, e.flags}];
        if (!slot) slot = std::make_unique<PoolT>(make_(e.flags, &counter_), limits_);
        try {
            auto h = slot->allocate(static_cast<std::size_t>(e.bytes));
            waste_ += h.bucket_size() - h.nbytes();
            live_.emplace(e.id, std::move(h));
            ++live_in_ctx_[e.ctx];
            return true;
        } catch (const out_of_memory&) {
            return false;
        } catch (const size_error&) {
            return false;
        }
    }
    // The context's last event: with none of its buffers live, its pools
    // close (their cache and segments go back), as the interposer's do when
    // the application releases the context. Their counts stay in closed_.
    void close(std::uint64_t ctx) {
        if (live_in_ctx_[ctx] != 0) return;  // buffers never freed keep their pools
        for (auto it = pools_.lower_bound({ctx, 0}); it != pools_.end() && it->first.first == ctx;) {
            PoolStats s = it->second->stats();
            s.bytes_allocated = s.bytes_cached = s.bytes_in_use = s.bytes_requested = s.bytes_pending = 0;
            s.segments = s.segment_bytes = s.segment_free_bytes = s.largest_free_block = s.sub_buffers_cached = 0;
            for (auto& b : s.buckets) b.cached_buffers = b.in_use_buffers = b.pending_buffers = 0;
            std::map<std::size_t, BucketStats> buckets;
            for (const auto& b : closed_.buckets) buckets[b.bucket_size] = b;
            closed_.buckets.clear();
            merge(closed_, buckets, s);
            for (auto& [size, b] : buckets) closed_.buckets.push_back(b);
            it = pools_.erase(it);
        }
    }
    // Adds s into out (and its buckets into `buckets`, by size).
    static void merge(PoolStats& out, std::map<std::size_t, BucketStats>& buckets, const PoolStats& s) {
        out.hits += s.hits;
        out.misses += s.misses;
        out.evictions += s.evictions;
        out.driver_frees += s.driver_frees;
        out.oom_retries += s.oom_retries;
        out.failed_allocations += s.failed_allocations;
        out.bytes_allocated += s.bytes_allocated;
        out.bytes_cached += s.bytes_cached;
        out.bytes_in_use += s.bytes_in_use;
        out.bytes_requested += s.bytes_requested;
        out.bytes_pending += s.bytes_pending;
        out.peak_bytes_allocated += s.peak_bytes_allocated;  // an upper bound across pools
        out.peak_bytes_in_use += s.peak_bytes_in_use;
        out.segments += s.segments;
        out.segment_bytes += s.segment_bytes;
        out.peak_segment_bytes += s.peak_segment_bytes;  // an upper bound across pools
        out.segment_free_bytes += s.segment_free_bytes;
        out.largest_free_block = std::max(out.largest_free_block, s.largest_free_block);
        out.segment_allocations += s.segment_allocations;
        out.sub_buffer_fallbacks += s.sub_buffer_fallbacks;
        out.sub_buffers_made += s.sub_buffers_made;
        out.sub_buffers_reused += s.sub_buffers_reused;
        out.sub_buffers_cached += s.sub_buffers_cached;
        for (const auto& b : s.buckets) {
            auto& m = buckets[b.bucket_size];
            m.bucket_size = b.bucket_size;
            m.hits += b.hits;
            m.misses += b.misses;
            m.evictions += b.evictions;
            m.cached_buffers += b.cached_buffers;
            m.in_use_buffers += b.in_use_buffers;
            m.pending_buffers += b.pending_buffers;
        }
    }

    MakeBackend make_;
    typename PoolT::limit_policy limits_;
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<PoolT>> pools_;
    PoolStats closed_;  // the counts of the pools closed with their context
    std::unordered_map<std::uint64_t, std::size_t> live_in_ctx_;      // live handles per context
    std::unordered_map<std::uint64_t, typename PoolT::handle> live_;  // destroyed first: handles go back to pools
    std::size_t waste_ = 0;
};

namespace detail {

template <class T>
struct tag {
    using type = T;
};

// Calls f(tag<Buckets>, tag<Limits>) for the configuration's policies.
template <class F>
auto with_policies(const Config& c, F&& f) {
    auto with_limits = [&](auto b) {
        if (c.capped) return f(b, tag<Capped>{});
        return f(b, tag<Unlimited>{});
    };
    switch (c.buckets) {
        case bucket_scheme::fixed: return with_limits(tag<FixedSetBuckets>{});
        case bucket_scheme::half: return with_limits(tag<SubdividedBuckets<2>>{});
        case bucket_scheme::quarter: return with_limits(tag<QuarterPowerOfTwoBuckets>{});
        case bucket_scheme::eighth: return with_limits(tag<EighthPowerOfTwoBuckets>{});
        case bucket_scheme::sixteenth: return with_limits(tag<SubdividedBuckets<16>>{});
        case bucket_scheme::arena: return with_limits(tag<ArenaBuckets>{});
        case bucket_scheme::pow2: break;
    }
    return with_limits(tag<PowerOfTwoBuckets>{});
}

template <class L>
L make_limits(const Config& c) {
    if constexpr (std::is_same_v<L, Capped>) return Capped(c.cap, c.per_bucket);
    else return L{};
}

}  // namespace detail

// Builds the pool set for one configuration on one target. Memory kinds
// matter only on an OpenCL device (the host and the simulation make one kind).
// Throws driver_error if the OpenCL backend cannot be made.
inline std::unique_ptr<PoolSet> make_pool_set_of(const Config& c, const Target& t) {
    return detail::with_policies(c, [&](auto btag, auto ltag) -> std::unique_ptr<PoolSet> {
        using Buckets = typename decltype(btag)::type;
        using Limits = typename decltype(ltag)::type;
        // The arena's buckets come with its backend: blocks carved from segments of the counted parent.
        constexpr bool carved = std::is_same_v<Buckets, ArenaBuckets>;
        const Limits limits = detail::make_limits<Limits>(c);
        const ArenaOptions arena = c.arena;
        auto wrap = [arena](auto parent) {
            if constexpr (carved) return SubAllocated<decltype(parent)>(std::move(parent), arena);
            else {
                (void)arena;  // captured for the arena's configurations only
                return parent;
            }
        };
        // A pool set whose pools are over wrap(make_parent(flags, counter)).
        auto over = [&](auto make_parent) -> std::unique_ptr<PoolSet> {
            auto make = [wrap, make_parent](std::uint64_t flags, DriverCounter* dc) {
                return wrap(make_parent(flags, dc));
            };
            using P = Pool<Buckets, DeviceLocal, Limits, SingleMutex, decltype(make(0, nullptr))>;
            return std::make_unique<PoolSetImpl<P, decltype(make)>>(make, limits);
        };
        // views=free: the parent's views count as no driver call. On an OpenCL device the blocks
        // are still sub-buffers, counted as the offsets (OpenCLOffsetBackend) or pointers (SVM) they stand for.
        if (t.what == Target::type::host) {
            if constexpr (carved)
                if (c.free_views)
                    return over(
                        [](std::uint64_t, DriverCounter* dc) { return Counted<HostBackend, true>(HostBackend(), dc); });
            return over([](std::uint64_t, DriverCounter* dc) { return Counted<HostBackend>(HostBackend(), dc); });
        }
        if (t.what == Target::type::sim) {
            if constexpr (carved)
                if (c.free_views)
                    return over(
                        [](std::uint64_t, DriverCounter* dc) { return Counted<SimBackend, true>(SimBackend(), dc); });
            return over([](std::uint64_t, DriverCounter* dc) { return Counted<SimBackend>(SimBackend(), dc); });
        }
#ifdef CLPOOL_HAS_OPENCL
        auto on_device = [&](auto free) -> std::unique_ptr<PoolSet> {
            auto make = [wrap, ctx = t.context, dev = t.device](std::uint64_t flags, DriverCounter* dc) {
                // Keep the trace's access flags; the pool adds ALLOC_HOST_PTR for pinned kinds.
                const cl_mem_flags access = flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY);
                return wrap(Counted<OpenCLBackend, decltype(free)::value>(
                    OpenCLBackend(ctx, dev, access ? access : CL_MEM_READ_WRITE), dc));
            };
            auto build = [&](auto ftag) -> std::unique_ptr<PoolSet> {
                using P = Pool<Buckets, typename decltype(ftag)::type, Limits, SingleMutex, decltype(make(0, nullptr))>;
                return std::make_unique<PoolSetImpl<P, decltype(make)>>(make, limits);
            };
            switch (c.kind) {
                case kind_choice::pinned: return build(detail::tag<HostPinned>{});
                case kind_choice::integrated: return build(detail::tag<IntegratedAware>{});
                case kind_choice::device: break;
            }
            return build(detail::tag<DeviceLocal>{});
        };
        if constexpr (carved)
            if (c.free_views) return on_device(std::true_type{});
        return on_device(std::false_type{});
#else
        throw usage_error("replay: built without OpenCL; use the host backend");
#endif
    });
}

// Builds the pool set for one configuration on one target (make_pool_set_of),
// reporting its next capacity where the target asks.
inline std::unique_ptr<PoolSet> make_pool_set(const Config& c, const Target& t) {
    auto set = make_pool_set_of(c, t);
    set->report_next_capacity(t.next_capacity);
    return set;
}

}  // namespace clpool::replay
