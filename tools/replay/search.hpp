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
// driver at once) with which the trace replays meeting `req`. More capacity
// does not always serve better (an arena that may keep a segment places its
// blocks differently from one that may not, and can fail later), so this is
// no bisection: it walks up from the live peak (no configuration fits in
// less) through the capacities where the replay changes. A replay at
// capacity C refuses some allocations, and every capacity below the least
// one that would have granted one of them (DriverCounter::next_capacity)
// replays exactly as C does; so the first capacity met on that walk is the
// smallest there is. A replay that refuses nothing is the same at every
// larger capacity; at the unconstrained peak held the walk ends.
// `resolution` bounds the cost: each step goes up by at least that many
// bytes, so a range of capacities narrower than it may be stepped over
// (1: exact, every change visited).
// With `below`, the search gives up (empty capacity) once the walk reaches
// `below` without meeting the requirement: a candidate that cannot win stops early.
// Replays on the simulation (accounting only), whatever target the tool uses.
// Cost: one replay per step, at most 2 + (peak held - peak live) / resolution.
inline CapacityResult min_capacity(const Trace& trace, const Config& c, const Requirement& req, std::size_t peak_live,
                                   std::size_t resolution,
                                   std::size_t below = std::numeric_limits<std::size_t>::max()) {
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    CapacityResult out;
    Target sim;
    sim.what = Target::type::sim;
    std::size_t next = none;
    sim.next_capacity = &next;
    auto replay_at = [&](std::size_t capacity) {
        sim.capacity = capacity;
        ++out.replays;
        return run(trace, c, sim, req.warmup);  // sets next as its pool set goes
    };
    out.at = replay_at(none);
    const std::size_t top = out.at.peak_held;  // from here up, every replay is the unconstrained one
    resolution = std::max<std::size_t>(resolution, 1);
    for (std::size_t capacity = peak_live; capacity < below;) {
        if (capacity >= top) {
            if (req.met_by(out.at)) out.capacity = capacity;
            break;
        }
        Result r = replay_at(capacity);
        if (req.met_by(r)) {
            out.capacity = capacity;
            out.at = std::move(r);
            break;
        }
        if (next == none) break;  // nothing refused: every larger capacity replays as this one
        capacity = std::max(next, capacity > none - resolution ? none : capacity + resolution);
    }
    return out;
}

// The configurations --suggest tries: every whole-buffer bucket scheme,
// unlimited and capped at fractions of the live peak, with and without a
// per-bucket cap (90); then the arena with three segment layouts, three
// max-free fractions, unlimited or capped (27); then the arena whose views
// are free (SVM, offsets: views=free) with three large-segment sizes,
// unlimited or capped (6).
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
    for (const std::size_t large : {20 * MiB, 64 * MiB, 256 * MiB}) {
        for (const std::size_t cap : {std::size_t{0}, peak_live / 16}) {
            Config c = parse_config("buckets=arena,views=free,large-segment=" + std::to_string(large), 0);
            c.capped = cap != 0;
            if (cap != 0) c.cap = cap;
            if (cap != 0) c.spec += ",cap=" + std::to_string(cap);
            c.name = c.spec;
            out.push_back(std::move(c));
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
    // Views free: blocks as (buffer, offset); clpool::SVMBackend(context) instead for SVM pointers.
    const std::string backend = !carved        ? "clpool::OpenCLBackend"
                                : c.free_views ? "clpool::SubAllocated<clpool::OpenCLOffsetBackend>"
                                               : "clpool::SubAllocated<clpool::OpenCLBackend>";
    std::string line = "using " + alias + " = clpool::Pool<" + buckets + ", " + flags + ", " +
                       (c.capped ? "clpool::Capped" : "clpool::Unlimited") + ", clpool::SingleMutex, " + backend +
                       ">;\n";
    const std::string parent =
        std::string(c.free_views && carved ? "clpool::OpenCLOffsetBackend" : "clpool::OpenCLBackend") +
        "(context, device, CL_MEM_READ_WRITE)";
    if (carved) {
        const ArenaOptions d = c.free_views ? ArenaOptions::for_free_views() : ArenaOptions{};
        const ArenaOptions& a = c.arena;
        const bool defaults = a.granularity == d.granularity && a.small_limit == d.small_limit &&
                              a.small_segment == d.small_segment && a.large_segment == d.large_segment &&
                              a.large_limit == d.large_limit && a.max_free_fraction == d.max_free_fraction &&
                              a.cached_views == d.cached_views;
        if (defaults && !c.capped && c.kind == kind_choice::device)
            line += c.free_views ? "// (that is clpool::OffsetArenaPool; clpool::SVMArenaPool over SVM)\n"
                                 : "// (that is clpool::ArenaPool)\n";
        std::ostringstream frac;
        frac << a.max_free_fraction;
        line +=
            "// " + alias + " pool(" + backend + "(" + parent +
            ", clpool::ArenaOptions{.granularity = " + std::to_string(a.granularity) +
            ", .small_limit = " + std::to_string(a.small_limit) +
            ", .small_segment = " + std::to_string(a.small_segment) +
            ", .large_segment = " + std::to_string(a.large_segment) +
            ", .large_limit = " + std::to_string(a.large_limit) +
            (a.empty_grace == ArenaOptions{}.empty_grace ? "" : ", .empty_grace = " + std::to_string(a.empty_grace)) +
            ", .max_free_fraction = " + frac.str() +
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
