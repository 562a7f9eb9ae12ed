// The replay engine: runs a parsed trace through runtime-chosen pool configurations and measures each.
#pragma once

#include <clpool/clpool.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/units.hpp"
#include "trace.hpp"

namespace clpool::replay {

// ---------------------------------------------------------------- configurations

// pow2: PowerOfTwoBuckets; fixed: FixedSetBuckets; half .. sixteenth:
// SubdividedBuckets<2 .. 16> (quarter and eighth: the library's
// QuarterPowerOfTwoBuckets and EighthPowerOfTwoBuckets); arena: ArenaBuckets
// over SubAllocated<backend> (blocks carved from segments, docs/ARENA.md).
enum class bucket_scheme : unsigned char { pow2, fixed, half, quarter, eighth, sixteenth, arena };
enum class kind_choice : unsigned char { device, pinned, integrated };

// A pool configuration picked at run time. The pools are compile-time policy
// types; replay instantiates one per (bucket scheme, limit, kind) and picks
// among them (make_pool_set).
struct Config {
    std::string name;
    bucket_scheme buckets = bucket_scheme::pow2;
    bool capped = false;  // Capped{cap, per_bucket}; else Unlimited
    std::size_t cap = std::numeric_limits<std::size_t>::max();
    std::size_t per_bucket = std::numeric_limits<std::size_t>::max();
    kind_choice kind = kind_choice::device;
    ArenaOptions arena;  // buckets=arena only
    std::string spec;    // how it was written, for the report
};

// A bad --config text; the message names the key or value and what is allowed.
class config_spec_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

inline const char* to_string(bucket_scheme b) noexcept {
    switch (b) {
        case bucket_scheme::fixed: return "fixed";
        case bucket_scheme::half: return "half";
        case bucket_scheme::quarter: return "quarter";
        case bucket_scheme::eighth: return "eighth";
        case bucket_scheme::sixteenth: return "sixteenth";
        case bucket_scheme::arena: return "arena";
        case bucket_scheme::pow2: break;
    }
    return "pow2";
}

// The bucket schemes by name, as --config spells them.
inline constexpr std::pair<std::string_view, bucket_scheme> bucket_schemes[] = {
    {"pow2", bucket_scheme::pow2},       {"fixed", bucket_scheme::fixed},   {"half", bucket_scheme::half},
    {"quarter", bucket_scheme::quarter}, {"eighth", bucket_scheme::eighth}, {"sixteenth", bucket_scheme::sixteenth},
    {"arena", bucket_scheme::arena}};
inline const char* to_string(kind_choice k) noexcept {
    return k == kind_choice::device ? "device" : k == kind_choice::pinned ? "pinned" : "integrated";
}

// The named pools as configurations (their policies, their default caps):
// BufferPool, PinnedBufferPool, PersistentBufferPool, ArenaPool.
// Throws config_error if CLPOOL_MAX_CACHED_GB is invalid (PersistentBufferPool's cap).
inline std::vector<Config> alias_configs() {
    Config buffer{"BufferPool",        bucket_scheme::pow2, false,          Config{}.cap,
                  Config{}.per_bucket, kind_choice::device, ArenaOptions{}, "buckets=pow2,kind=device"};
    Config pinned{"PinnedBufferPool",  bucket_scheme::pow2, false,          Config{}.cap,
                  Config{}.per_bucket, kind_choice::pinned, ArenaOptions{}, "buckets=pow2,kind=pinned"};
    const EnvironmentCapped caps;  // the alias's limit policy
    Config persistent{"PersistentBufferPool",
                      bucket_scheme::fixed,
                      true,
                      caps.max_bytes,
                      caps.max_per_bucket,
                      kind_choice::integrated,
                      ArenaOptions{},
                      "buckets=fixed,cap=" + std::to_string(caps.max_bytes) +
                          ",per-bucket=" + std::to_string(caps.max_per_bucket) + ",kind=integrated"};
    Config arena{"ArenaPool",         bucket_scheme::arena, false,          Config{}.cap,
                 Config{}.per_bucket, kind_choice::device,  ArenaOptions{}, "buckets=arena,kind=device"};
    return {buffer, pinned, persistent, arena};
}

// Parses "key=value,key=value": buckets=pow2|fixed|half|quarter|eighth|sixteenth|arena, cap=SIZE|none,
// per-bucket=N|none, kind=device|pinned|integrated, name=TEXT. Unset keys
// take BufferPool's values (pow2, unlimited, device). Giving cap or
// per-bucket makes the pool Capped (the other limit then unbounded). With
// buckets=arena: segment=SIZE (small segments), large-segment=SIZE,
// small=SIZE (the largest request carved from small segments),
// granularity=SIZE, max-free=F, views=N (idle views kept per segment) (ArenaOptions; defaults as there).
// Throws config_spec_error naming the bad key or value and what is allowed.
inline Config parse_config(std::string_view spec, std::size_t ordinal) {
    Config c;
    c.spec = std::string(spec);
    c.name = "custom" + std::to_string(ordinal);
    if (spec.empty()) throw config_spec_error("empty --config; expected e.g. 'buckets=pow2,cap=1GiB,per-bucket=8'");
    std::vector<std::string> seen, arena_keys;
    while (!spec.empty()) {
        const std::size_t comma = spec.find(',');
        const std::string_view item = spec.substr(0, comma);
        spec.remove_prefix(comma == std::string_view::npos ? spec.size() : comma + 1);
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0)
            throw config_spec_error("'" + std::string(item) +
                                    "' in --config is not key=value; keys: name, buckets, "
                                    "cap, per-bucket, kind");
        const std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
        if (std::find(seen.begin(), seen.end(), key) != seen.end())
            throw config_spec_error("--config key '" + key + "' given twice in '" + c.spec + "'");
        seen.push_back(key);
        if (key == "name") {
            if (value.empty()) throw config_spec_error("--config name= is empty; give the configuration a name");
            c.name = value;
        } else if (key == "buckets") {
            const auto* it = std::find_if(std::begin(bucket_schemes), std::end(bucket_schemes),
                                          [&](const auto& b) { return b.first == value; });
            if (it == std::end(bucket_schemes))
                throw config_spec_error("--config buckets='" + value +
                                        "'; expected pow2, fixed, half, quarter, eighth, sixteenth or arena");
            c.buckets = it->second;
        } else if (key == "cap") {
            if (value == "none") continue;
            const auto b = tools::parse_bytes(value);
            if (!b || *b > std::numeric_limits<std::size_t>::max())
                throw config_spec_error("--config cap='" + value +
                                        "'; expected a byte size (e.g. 512MiB, 1GiB) or none");
            c.capped = true;
            c.cap = static_cast<std::size_t>(*b);
        } else if (key == "per-bucket") {
            if (value == "none") continue;
            std::uint64_t n = 0;
            if (!detail::parse_dec(value, n))
                throw config_spec_error("--config per-bucket='" + value +
                                        "'; expected a count of buffers (e.g. 8) or none");
            c.capped = true;
            c.per_bucket = static_cast<std::size_t>(n);
        } else if (key == "kind") {
            if (value == "device") c.kind = kind_choice::device;
            else if (value == "pinned") c.kind = kind_choice::pinned;
            else if (value == "integrated") c.kind = kind_choice::integrated;
            else throw config_spec_error("--config kind='" + value + "'; expected device, pinned or integrated");
        } else if (key == "segment" || key == "large-segment" || key == "small" || key == "granularity") {
            const auto b = tools::parse_bytes(value);
            if (!b || *b == 0 || *b > (std::size_t{1} << 62))
                throw config_spec_error("--config " + key + "='" + value + "'; expected a byte size (e.g. 2MiB)");
            const auto bytes = static_cast<std::size_t>(*b);
            if (key == "segment") c.arena.small_segment = bytes;
            else if (key == "large-segment") c.arena.large_segment = bytes;
            else if (key == "small") c.arena.small_limit = bytes;
            else c.arena.granularity = bytes;
            arena_keys.push_back(key);
        } else if (key == "max-free") {
            char* end = nullptr;
            // Decimal only: strtod alone reads hex ("0x0.2" is 0.125).
            const double f = tools::is_decimal_number(value) ? std::strtod(value.c_str(), &end) : -1.0;
            if (value.empty() || end != value.c_str() + value.size() || !(f >= 0.0 && f <= 1.0))
                throw config_spec_error("--config max-free='" + value +
                                        "'; expected a fraction of the segments' bytes from 0 to 1 (e.g. 0.125)");
            c.arena.max_free_fraction = f;
            arena_keys.push_back(key);
        } else if (key == "views") {
            std::uint64_t n = 0;
            if (!detail::parse_dec(value, n) || n > 16)
                throw config_spec_error("--config views='" + value +
                                        "'; expected the idle views kept per segment, 0 to 16 (e.g. 16)");
            c.arena.cached_views = static_cast<std::size_t>(n);
            arena_keys.push_back(key);
        } else {
            throw config_spec_error("unknown --config key '" + key +
                                    "'; keys: name, buckets, cap, per-bucket, kind, and with buckets=arena: "
                                    "segment, large-segment, small, granularity, max-free, views");
        }
    }
    if (!arena_keys.empty() && c.buckets != bucket_scheme::arena)
        throw config_spec_error("--config " + arena_keys.front() + "= applies to buckets=arena only (in '" + c.spec +
                                "')");
    if (!std::has_single_bit(c.arena.granularity))
        throw config_spec_error("--config granularity=" + std::to_string(c.arena.granularity) +
                                " is not a power of two");
    if (c.arena.small_limit > c.arena.small_segment || c.arena.small_segment > c.arena.large_segment)
        throw config_spec_error("--config needs small <= segment <= large-segment (got " +
                                std::to_string(c.arena.small_limit) + ", " + std::to_string(c.arena.small_segment) +
                                ", " + std::to_string(c.arena.large_segment) + ") in '" + c.spec + "'");
    // large_limit (not a --config key) within [small, large-segment], as ArenaOptions needs: a large
    // segment below it, requests between them get their own segments; a small limit above it, the
    // large limit rises with it.
    c.arena.large_limit = std::clamp(c.arena.large_limit, c.arena.small_limit, c.arena.large_segment);
    return c;
}

// ---------------------------------------------------------------- backends

// Bytes held from the driver by every pool of one configuration. The replay
// is single-threaded, so plain counters.
struct DriverCounter {
    std::size_t held = 0;
    // A simulated device capacity: an allocation that would take held past it
    // fails as out of memory (the pool then trims and retries once).
    std::size_t capacity = std::numeric_limits<std::size_t>::max();
    std::uint64_t allocations = 0;
    std::uint64_t frees = 0;
    // Views the parent made (sub_range): over OpenCL a clCreateSubBuffer, a
    // driver call though not an allocation of device memory.
    std::uint64_t views = 0;
};

// Memory from a Counted backend: the inner memory, and a note on the counter
// that is taken off again when the memory is freed.
template <class M>
class CountedMemory {
public:
    CountedMemory() = default;
    CountedMemory(M inner, std::size_t bytes, DriverCounter* c) noexcept
        : inner_(std::move(inner)), bytes_(bytes), counter_(c) {}
    CountedMemory(CountedMemory&& o) noexcept
        : inner_(std::move(o.inner_)), bytes_(o.bytes_), counter_(std::exchange(o.counter_, nullptr)) {}
    CountedMemory& operator=(CountedMemory&& o) noexcept {
        if (this != &o) {
            drop();
            inner_ = std::move(o.inner_);
            bytes_ = o.bytes_;
            counter_ = std::exchange(o.counter_, nullptr);
        }
        return *this;
    }
    ~CountedMemory() { drop(); }
    const M& inner() const noexcept { return inner_; }

private:
    void drop() noexcept {
        if (counter_) {
            counter_->held -= bytes_;
            ++counter_->frees;
        }
        counter_ = nullptr;
    }
    M inner_{};
    std::size_t bytes_ = 0;
    DriverCounter* counter_ = nullptr;
};

// A backend adapter that counts what the inner backend holds.
template <Backend B>
class Counted {
public:
    using memory_type = CountedMemory<typename B::memory_type>;
    Counted(B inner, DriverCounter* c) : inner_(std::move(inner)), counter_(c) {}
    std::size_t max_alloc_size() const noexcept { return inner_.max_alloc_size(); }
    bool unified_memory() const noexcept { return inner_.unified_memory(); }
    decltype(auto) name() const { return inner_.name(); }  // the pool wants what the inner backend gives

    // A parent for SubAllocated (SegmentBackend): a view holds no bytes, but
    // making one is a driver call (clCreateSubBuffer), counted as such on every target.
    using sub_memory_type = typename B::sub_memory_type;
    std::size_t sub_alignment() const { return inner_.sub_alignment(); }
    Allocation<sub_memory_type> sub_range(const memory_type& segment, std::size_t offset, std::size_t n) noexcept {
        ++counter_->views;
        return inner_.sub_range(segment.inner(), offset, n);
    }
    sub_memory_type whole_range(const memory_type& m, std::size_t n) noexcept {
        return inner_.whole_range(m.inner(), n);
    }
    Allocation<memory_type> allocate(std::size_t n, MemoryKind k) noexcept {
        // Pass-through buffers are never refused, so held may already be past the capacity.
        if (counter_->held > counter_->capacity || n > counter_->capacity - counter_->held)
            return {memory_type{}, AllocStatus::out_of_memory, 0};
        auto a = inner_.allocate(n, k);
        if (a.status != AllocStatus::ok) return {memory_type{}, a.status, a.native_code};
        counter_->held += n;
        ++counter_->allocations;
        return {memory_type(std::move(a.memory), n, counter_), AllocStatus::ok, 0};
    }

private:
    B inner_;
    DriverCounter* counter_;
};

// Accounting only: no memory is made. For traces larger than this machine.
struct SimBackend {
    struct memory_type {};
    using sub_memory_type = memory_type;
    std::size_t max_alloc_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 2; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "sim"; }
    Allocation<memory_type> allocate(std::size_t, MemoryKind) noexcept { return {{}, AllocStatus::ok, 0}; }
    // Carving as on NVIDIA: CL_DEVICE_MEM_BASE_ADDR_ALIGN of 4096 bits, 512 bytes.
    static std::size_t sub_alignment() noexcept { return 512; }
    static Allocation<memory_type> sub_range(const memory_type&, std::size_t, std::size_t) noexcept {
        return {{}, AllocStatus::ok, 0};
    }
    static memory_type whole_range(const memory_type&, std::size_t) noexcept { return {}; }
};
static_assert(Backend<SimBackend>);
static_assert(SegmentBackend<Counted<SimBackend>>);
static_assert(SegmentBackend<Counted<HostBackend>>);
static_assert(Backend<Counted<HostBackend>>);

// Where the replayed pools get memory.
struct Target {
    enum class type { host, sim, opencl } what = type::host;
#ifdef CLPOOL_HAS_OPENCL
    cl::Context context;
    cl_device_id device = nullptr;
#endif
    // Bytes every configuration may hold from the driver at once (a simulated
    // device size; the capacity search sets it).
    std::size_t capacity = std::numeric_limits<std::size_t>::max();
    std::string description() const {
        return what == type::host  ? "host backend (aligned host memory)"
               : what == type::sim ? "simulation (no memory made)"
                                   : "OpenCL device";
    }
};

// ---------------------------------------------------------------- pool sets

// Every pool of one configuration: one per (context, flags) of the trace, as
// the interposer keeps them. CL_MEM_USE_HOST_PTR buffers pass through
// unpooled (their storage is the application's) and count as driver allocations.
class PoolSet {
public:
    virtual ~PoolSet() = default;
    // Replays one event. Returns false if the allocation failed (out of memory).
    virtual bool apply(const Event& e) = 0;
    // Stats merged over every pool of the set (buckets merged by size).
    virtual PoolStats stats() const = 0;
    // Bytes handed out beyond what was asked for, right now.
    virtual std::size_t waste() const noexcept = 0;
    const DriverCounter& driver() const noexcept { return counter_; }
    void set_capacity(std::size_t bytes) noexcept { counter_.capacity = bytes; }
    std::uint64_t passthrough() const noexcept { return passthrough_; }

protected:
    DriverCounter counter_;  // declared first: outlives the pools and handles of the derived class
    std::uint64_t passthrough_ = 0;
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
inline std::unique_ptr<PoolSet> make_pool_set(const Config& c, const Target& t) {
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
        if (t.what == Target::type::host) {
            auto make = [wrap](std::uint64_t, DriverCounter* dc) {
                return wrap(Counted<HostBackend>(HostBackend(), dc));
            };
            using P = Pool<Buckets, DeviceLocal, Limits, SingleMutex, decltype(make(0, nullptr))>;
            return std::make_unique<PoolSetImpl<P, decltype(make)>>(make, limits);
        }
        if (t.what == Target::type::sim) {
            auto make = [wrap](std::uint64_t, DriverCounter* dc) {
                return wrap(Counted<SimBackend>(SimBackend(), dc));
            };
            using P = Pool<Buckets, DeviceLocal, Limits, SingleMutex, decltype(make(0, nullptr))>;
            return std::make_unique<PoolSetImpl<P, decltype(make)>>(make, limits);
        }
#ifdef CLPOOL_HAS_OPENCL
        auto make = [wrap, ctx = t.context, dev = t.device](std::uint64_t flags, DriverCounter* dc) {
            // Keep the trace's access flags; the pool adds ALLOC_HOST_PTR for pinned kinds.
            const cl_mem_flags access = flags & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY);
            return wrap(Counted<OpenCLBackend>(OpenCLBackend(ctx, dev, access ? access : CL_MEM_READ_WRITE), dc));
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
#else
        throw usage_error("replay: built without OpenCL; use the host backend");
#endif
    });
}

// ---------------------------------------------------------------- the replay

// A driver call that failed while one event replayed (an out-of-memory or an
// oversized request is not one: it counts as a failed allocation). line() is
// the event's 1-based line in the trace, native_code() the driver's code;
// what() reads "line N: <configuration>: <the event>: <the driver's error>".
class replay_error : public std::runtime_error {
public:
    replay_error(std::size_t line, const std::string& message, int native_code)
        : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line), native_code_(native_code) {}
    std::size_t line() const noexcept { return line_; }
    int native_code() const noexcept { return native_code_; }

private:
    std::size_t line_;
    int native_code_;
};

struct Result {
    std::string name;
    std::string spec;
    PoolStats stats;                     // merged over the configuration's pools
    std::uint64_t allocations = 0;       // allocs in the trace
    std::uint64_t driver_allocations = 0;  // pool misses + pass-through buffers
    std::uint64_t passthrough = 0;       // CL_MEM_USE_HOST_PTR, never pooled
    std::uint64_t failed = 0;            // allocations the backend refused
    std::size_t peak_held = 0;           // bytes held from the driver, at most, over the trace
    std::size_t held_at_end = 0;
    std::size_t peak_waste = 0;          // rounding waste (bucket - asked) at most, over the trace
    double seconds = 0;                  // wall time of the replay
    std::vector<std::size_t> held;       // bytes held after each event
    std::uint64_t views = 0;             // views (sub-buffers) made: driver calls that allocate no memory
    // After the warm-up (run's `warmup` first allocations): allocations, and
    // those that called the driver (an allocation or a view made) or failed.
    std::uint64_t warm_allocations = 0;
    std::uint64_t warm_driver_allocations = 0;

    std::uint64_t avoided() const noexcept { return allocations - driver_allocations - failed; }  // = pool hits
    double hit_rate() const noexcept {
        return allocations ? static_cast<double>(avoided()) / static_cast<double>(allocations) : 0.0;
    }
    // The share of allocations after the warm-up served with no driver call
    // (1 if there are none).
    double warm_hit_rate() const noexcept {
        return warm_allocations
                   ? 1.0 - static_cast<double>(warm_driver_allocations) / static_cast<double>(warm_allocations)
                   : 1.0;
    }
    // Peak bytes held over peak bytes live (the unpooled replay's peak).
    double held_over_live(std::size_t peak_live) const noexcept {
        return peak_live ? static_cast<double>(peak_held) / static_cast<double>(peak_live) : 0.0;
    }
};

// What the trace costs with no pool: one driver allocation per alloc, and
// only the live bytes held (the baseline for every configuration).
inline Result run_unpooled(const Trace& trace) {
    Result r;
    r.name = "no pool";
    r.spec = "every alloc is a driver allocation";
    std::size_t held = 0;
    r.held.reserve(trace.events.size());
    for (const auto& e : trace.events) {
        if (e.kind == op::alloc) {
            ++r.allocations;
            held += e.bytes;
        } else {
            held -= e.bytes;
        }
        r.peak_held = std::max(r.peak_held, held);
        r.held.push_back(held);
    }
    r.driver_allocations = r.allocations;
    r.warm_allocations = r.warm_driver_allocations = r.allocations;
    r.held_at_end = held;
    return r;
}

// Replays the trace through one configuration: pools are made fresh, every
// alloc asks its (context, flags) pool, every free releases the handle.
// Buffers still live at the end are released, then the pools destroyed.
// The first `warmup` allocations are left out of warm_allocations and
// warm_driver_allocations. Target::capacity caps the bytes held.
// Throws replay_error, naming the event's line, for a driver call that fails
// (an allocation the driver refuses other than for memory, a backend that
// cannot be made), config_error; trace_error, naming the line, if a
// pass-through buffer would take the bytes held past 2^64-1.
// Cost: one pool operation per event, plus the backend's allocations.
inline Result run(const Trace& trace, const Config& c, const Target& t, std::size_t warmup = 0) {
    Result r;
    r.name = c.name;
    r.spec = c.spec;
    r.held.reserve(trace.events.size());
    auto set = make_pool_set(c, t);
    set->set_capacity(t.capacity);
    const auto start = std::chrono::steady_clock::now();
    for (const auto& e : trace.events) {
        const std::uint64_t driver_before = set->driver().allocations + set->driver().views;
        // Pass-through buffers are never refused (pooled ones are, by Counted's capacity check),
        // so only they can take the 64-bit count of bytes held past its limit.
        if (e.kind == op::alloc && (e.flags & cl_mem_use_host_ptr) &&
            e.bytes > std::numeric_limits<std::size_t>::max() - set->driver().held)
            throw trace_error(e.line, "pass-through (CL_MEM_USE_HOST_PTR) size " + std::to_string(e.bytes) +
                                          " takes the bytes " + c.name + " holds (" +
                                          std::to_string(set->driver().held) + ") past " +
                                          std::to_string(std::numeric_limits<std::size_t>::max()));
        bool ok = false;
        try {
            ok = set->apply(e);
        } catch (const driver_error& err) {
            // The driver's message names the call, not the trace: say which event made it.
            char flags[17];
            const auto end = std::to_chars(flags, flags + sizeof flags, e.flags, 16).ptr;
            const std::string event = std::string(e.kind == op::alloc ? "alloc" : "free") + " of id " +
                                      std::to_string(e.id) + " (" + std::to_string(e.bytes) + " bytes, flags 0x" +
                                      std::string(flags, end) + ")";
            throw replay_error(e.line, c.name + ": " + event + ": " + err.what(), err.native_code());
        }
        if (!ok) ++r.failed;
        if (e.kind == op::alloc && r.allocations++ >= warmup) {
            ++r.warm_allocations;
            if (!ok || set->driver().allocations + set->driver().views != driver_before) ++r.warm_driver_allocations;
        }
        const std::size_t held = set->driver().held;
        r.peak_held = std::max(r.peak_held, held);
        r.peak_waste = std::max(r.peak_waste, set->waste());
        r.held.push_back(held);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.stats = set->stats();
    r.passthrough = set->passthrough();
    r.driver_allocations = set->driver().allocations;
    r.views = set->driver().views;
    r.held_at_end = set->driver().held;
    return r;
}

}  // namespace clpool::replay
