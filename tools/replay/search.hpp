// Searches over replays: the smallest device capacity a configuration needs, and the configuration that needs least.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "replay.hpp"

namespace clpool::replay {

// What a replay must achieve to count as served: no failed allocation, and at
// least min_hit_rate of the allocations after the first `warmup` served with
// no driver call.
struct Requirement {
    double min_hit_rate = 0.0;
    std::size_t warmup = 0;
    bool met_by(const Result& r) const noexcept { return r.failed == 0 && r.warm_hit_rate() >= min_hit_rate; }
};

// The outcome of a capacity search for one configuration.
struct CapacityResult {
    std::optional<std::size_t> capacity;  // empty: no capacity meets the requirement (or none below `below`)
    Result at;                            // the replay at that capacity (or the unconstrained one)
    unsigned replays = 0;
};

// The smallest simulated capacity (bytes the configuration may hold from the
// driver at once) with which the trace replays meeting `req`, to within
// `resolution` bytes, by bisection between the live peak (no configuration
// fits in less) and the peak held with no capacity (which replays exactly as
// unconstrained). Bisection assumes that a capacity meeting the requirement
// is followed by larger ones that do: true of failures (a pool that meets a
// capacity trims its idle buffers and retries once), not always of the hit
// rate, which a tighter capacity can raise (trimmed arena blocks merge into
// ranges that later misses carve from). So the answer is the smallest
// capacity the bisection met, not always the smallest there is.
// With `below`, the search gives up (empty capacity) unless the capacity just
// under `below` meets the requirement: one replay skips a candidate that
// cannot win, and finds one that wins only when constrained.
// Replays on the simulation (accounting only), whatever target the tool uses.
// Cost: up to 2 + log2((peak held - peak live) / resolution) replays.
inline CapacityResult min_capacity(const Trace& trace, const Config& c, const Requirement& req, std::size_t peak_live,
                                   std::size_t resolution,
                                   std::size_t below = std::numeric_limits<std::size_t>::max()) {
    CapacityResult out;
    Target sim;
    sim.what = Target::type::sim;
    auto replay_at = [&](std::size_t capacity) {
        sim.capacity = capacity;
        ++out.replays;
        return run(trace, c, sim, req.warmup);
    };
    out.at = replay_at(std::numeric_limits<std::size_t>::max());
    std::size_t hi = out.at.peak_held;  // if met: the same replay as unconstrained
    const bool bounded = below != std::numeric_limits<std::size_t>::max();
    if (!req.met_by(out.at) || hi >= below) {
        // Unconstrained, the requirement is missed or the bound not beaten. Under the bound a
        // capacity may still meet it: a pool that trims on out-of-memory can miss less (seen with
        // the arena, whose trimmed blocks merge in their segments), so one probe just below it.
        if (!bounded || below <= peak_live || out.at.failed) return out;
        Result r = replay_at(below - 1);
        if (!req.met_by(r)) return out;
        hi = below - 1;
        out.at = std::move(r);
    }
    std::size_t lo = peak_live == 0 ? 0 : peak_live - 1;  // below the live peak nothing fits
    resolution = std::max<std::size_t>(resolution, 1);
    while (hi - lo > resolution) {
        const std::size_t mid = lo + (hi - lo) / 2;
        Result r = replay_at(mid);
        if (req.met_by(r)) {
            hi = mid;
            out.at = std::move(r);
        } else {
            lo = mid;
        }
    }
    out.capacity = hi;
    return out;
}

// The configurations --suggest tries: every whole-buffer bucket scheme,
// unlimited and capped at fractions of the live peak, with and without a
// per-bucket cap (90); then the arena with three segment layouts, three
// max-free fractions, unlimited or capped (27).
inline std::vector<Config> suggest_candidates(std::size_t peak_live) {
    std::vector<Config> out;
    const std::size_t caps[] = {0, peak_live / 16, peak_live / 8, peak_live / 4, peak_live / 2};
    const std::size_t per_bucket[] = {std::numeric_limits<std::size_t>::max(), 2, 8};
    for (const auto& [scheme_name, scheme] : bucket_schemes) {
        if (scheme == bucket_scheme::arena) continue;
        for (const std::size_t cap : caps) {
            for (const std::size_t pb : per_bucket) {
                Config c;
                c.buckets = scheme;
                c.capped = cap != 0 || pb != std::numeric_limits<std::size_t>::max();
                if (cap != 0) c.cap = cap;
                c.per_bucket = pb;
                c.spec = "buckets=" + std::string(scheme_name);
                if (cap != 0) c.spec += ",cap=" + std::to_string(cap);
                if (pb != std::numeric_limits<std::size_t>::max()) c.spec += ",per-bucket=" + std::to_string(pb);
                c.name = c.spec;
                out.push_back(std::move(c));
            }
        }
    }
    constexpr std::size_t MiB = std::size_t{1} << 20;
    const std::pair<std::size_t, std::size_t> layouts[] = {
        {2 * MiB, 20 * MiB}, {2 * MiB, 64 * MiB}, {8 * MiB, 64 * MiB}};
    const std::pair<const char*, double> max_free[] = {{"1", 1.0}, {"0.125", 0.125}, {"0", 0.0}};  // 1: the default
    for (const auto& [segment, large] : layouts) {
        for (const auto& [free_text, free_fraction] : max_free) {
            for (const std::size_t cap : {std::size_t{0}, peak_live / 16, peak_live / 4}) {
                Config c;
                c.buckets = bucket_scheme::arena;
                c.arena.small_segment = segment;
                c.arena.large_segment = large;
                c.arena.max_free_fraction = free_fraction;
                c.capped = cap != 0;
                if (cap != 0) c.cap = cap;
                c.spec = "buckets=arena,segment=" + std::to_string(segment) +
                         ",large-segment=" + std::to_string(large) + ",max-free=" + free_text;
                if (cap != 0) c.spec += ",cap=" + std::to_string(cap);
                c.name = c.spec;
                out.push_back(std::move(c));
            }
        }
    }
    return out;
}

// The C++ that builds a configuration's pool on an OpenCL device: a `using`
// line, and a comment with how to construct it (the caps are run-time values).
inline std::string using_line(const Config& c, const std::string& alias = "TracedPool") {
    std::string buckets;
    switch (c.buckets) {
        case bucket_scheme::fixed: buckets = "clpool::FixedSetBuckets"; break;
        case bucket_scheme::half: buckets = "clpool::SubdividedBuckets<2>"; break;
        case bucket_scheme::quarter: buckets = "clpool::QuarterPowerOfTwoBuckets"; break;
        case bucket_scheme::eighth: buckets = "clpool::EighthPowerOfTwoBuckets"; break;
        case bucket_scheme::sixteenth: buckets = "clpool::SubdividedBuckets<16>"; break;
        case bucket_scheme::arena: buckets = "clpool::ArenaBuckets"; break;
        case bucket_scheme::pow2: buckets = "clpool::PowerOfTwoBuckets"; break;
    }
    const char* flags = c.kind == kind_choice::pinned       ? "clpool::HostPinned"
                        : c.kind == kind_choice::integrated ? "clpool::IntegratedAware"
                                                            : "clpool::DeviceLocal";
    const bool carved = c.buckets == bucket_scheme::arena;
    const std::string backend = carved ? "clpool::SubAllocated<clpool::OpenCLBackend>" : "clpool::OpenCLBackend";
    std::string line = "using " + alias + " = clpool::Pool<" + buckets + ", " + flags + ", " +
                       (c.capped ? "clpool::Capped" : "clpool::Unlimited") + ", clpool::SingleMutex, " + backend +
                       ">;\n";
    const std::string parent = "clpool::OpenCLBackend(context, device, CL_MEM_READ_WRITE)";
    if (carved) {
        const ArenaOptions d;
        const ArenaOptions& a = c.arena;
        const bool defaults = a.granularity == d.granularity && a.small_limit == d.small_limit &&
                              a.small_segment == d.small_segment && a.large_segment == d.large_segment &&
                              a.large_limit == d.large_limit && a.max_free_fraction == d.max_free_fraction &&
                              a.cached_views == d.cached_views;
        if (defaults && !c.capped && c.kind == kind_choice::device) line += "// (that is clpool::ArenaPool)\n";
        std::ostringstream frac;
        frac << a.max_free_fraction;
        line += "// " + alias + " pool(" + backend + "(" + parent +
                ", clpool::ArenaOptions{.granularity = " + std::to_string(a.granularity) +
                ", .small_limit = " + std::to_string(a.small_limit) +
                ", .small_segment = " + std::to_string(a.small_segment) +
                ", .large_segment = " + std::to_string(a.large_segment) +
                ", .large_limit = " + std::to_string(a.large_limit) + ", .max_free_fraction = " + frac.str() +
                (a.cached_views == d.cached_views ? "" : ", .cached_views = " + std::to_string(a.cached_views)) + "})";
    } else {
        line += "// " + alias + " pool(" + parent;
    }
    if (c.capped) {
        auto n = [](std::size_t v) {
            return v == std::numeric_limits<std::size_t>::max() ? std::string("SIZE_MAX") : std::to_string(v);
        };
        line += ", clpool::Capped(" + n(c.cap) + ", " + n(c.per_bucket) + ")";
    }
    return line + ");";
}

}  // namespace clpool::replay
