// A replay's pool configurations: the bucket schemes, limits and memory kinds chosen at run time, the
// named pools as configurations, and the --config parser.
#pragma once

#include <clpool/clpool.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../common/units.hpp"
#include "trace.hpp"

namespace clpool::replay {

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
    // buckets=arena only: the parent's views cost no driver call (views=free:
    // SVMBackend's pointer plus an offset, OpenCLOffsetBackend's buffer plus an
    // offset), so only a segment's allocation counts as one.
    bool free_views = false;
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
// BufferPool, PinnedBufferPool, PersistentBufferPool, ArenaPool, and the arenas
// whose views are free: SVMArenaPool and OffsetArenaPool (the same
// configuration: on the simulation a segment is a segment either way).
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
    Config svm = arena;
    svm.name = "SVMArenaPool";
    svm.free_views = true;
    svm.arena = ArenaOptions::for_free_views();  // what SubAllocated takes over a parent with free views
    svm.spec = "buckets=arena,views=free,kind=device";
    Config offsets = svm;
    offsets.name = "OffsetArenaPool";
    return {buffer, pinned, persistent, arena, svm, offsets};
}

// Parses "key=value,key=value": buckets=pow2|fixed|half|quarter|eighth|sixteenth|arena, cap=SIZE|none,
// per-bucket=N|none, kind=device|pinned|integrated, name=TEXT. Unset keys
// take BufferPool's values (pow2, unlimited, device). Giving cap or
// per-bucket makes the pool Capped (the other limit then unbounded). With
// buckets=arena: segment=SIZE (small segments), large-segment=SIZE,
// small=SIZE (the largest request carved from small segments),
// granularity=SIZE, max-free=F, views=N (idle views kept per segment) or
// views=free (a parent whose views make no driver call) (ArenaOptions; defaults as there).
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
            if (value == "free") c.free_views = true;
            else if (!detail::parse_dec(value, n) || n > 16)
                throw config_spec_error("--config views='" + value +
                                        "'; expected the idle views kept per segment, 0 to 16 (e.g. 16), or free "
                                        "(views cost no driver call: SVM, offsets)");
            else c.arena.cached_views = static_cast<std::size_t>(n);
            arena_keys.push_back(key);
        } else {
            throw config_spec_error("unknown --config key '" + key +
                                    "'; keys: name, buckets, cap, per-bucket, kind, and with buckets=arena: "
                                    "segment, large-segment, small, granularity, max-free, views");
        }
    }
    if (c.free_views) {  // the free-view defaults (ArenaOptions::for_free_views) where no key says otherwise
        const ArenaOptions f = ArenaOptions::for_free_views();
        auto given = [&](const char* k) { return std::find(seen.begin(), seen.end(), k) != seen.end(); };
        if (!given("small")) c.arena.small_limit = f.small_limit;
        if (!given("large-segment")) c.arena.large_segment = f.large_segment;
        c.arena.empty_grace = f.empty_grace;
        c.arena.cached_views = f.cached_views;
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

}  // namespace clpool::replay
