// The replay tool's trace parser and engine (tools/replay): every parse error names its line; the
// engine's counts match a trace worked by hand; runtime configurations pick the right policies.
#include "tools/common/trace_format.hpp"
#include "tools/replay/replay.hpp"
#include "tools/replay/search.hpp"
#include "tools/replay/trace.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <string_view>

using namespace clpool;
using namespace clpool::replay;

namespace {

// The error a trace raises: its line and message; line 0 if it parses.
std::pair<std::size_t, std::string> error_of(std::string_view text) {
    try {
        parse_trace(text);
    } catch (const trace_error& e) {
        return {e.line(), e.what()};
    }
    return {0, ""};
}

constexpr std::string_view worked =
    "clpool-trace 1\n"
    "# two contexts, a pinned buffer, a USE_HOST_PTR buffer, an id reused\n"
    "1000 alloc 1 0x1 0x1 4096\n"
    "2000 alloc 2 0x1 0x1 1048576\n"
    "3000 alloc 3 0x1 0x11 65536\n"
    "4000 free 1\n"
    "5000 alloc 4 0x1 0x1 4000\n"
    "6000 free 2\n"
    "7000 alloc 1 0x1 0x1 1000000\n"
    "8000 alloc 5 0x2 0x1 300\n"
    "9000 alloc 6 0x1 0x9 8192\n"
    "10000 free 4\n"
    "11000 free 1\n"
    "12000 free 5\n"
    "13000 free 6\n"
    "14000 alloc 7 0x1 0x1 4096\n"
    "15000 free 7\n"
    "16000 alloc 8 0x2 0x1 256\n";

Config pow2_config() {
    Config c;
    c.name = "pow2";
    c.spec = "buckets=pow2";
    return c;
}

}  // namespace

TEST_CASE("a valid trace parses into events, frees carrying their alloc's size") {
    const Trace t = parse_trace(worked);
    REQUIRE(t.events.size() == 16);
    CHECK(t.lines == 18);
    CHECK(t.events[0].kind == op::alloc);
    CHECK(t.events[0].line == 3);
    CHECK(t.events[2].ctx == 0x1);
    CHECK(t.events[2].flags == 0x11);
    CHECK(t.events[2].bytes == 65536);
    CHECK(t.events[3].kind == op::free);
    CHECK(t.events[3].bytes == 4096);  // filled in from the alloc of id 1
    CHECK(t.events[6].id == 1);        // id 1 reused after its free
    CHECK(t.live_at_end == 2);         // ids 3 and 8
    CHECK(t.live_bytes_at_end == 65536 + 256);
}

TEST_CASE("CRLF line ends, blank lines and comments are accepted") {
    const Trace t = parse_trace("clpool-trace 1\r\n\r\n# c\r\n5 alloc 1 0xA 0X1 10\r\n5 free 1\r\n");
    REQUIRE(t.events.size() == 2);
    CHECK(t.events[0].ctx == 0xA);
    CHECK(t.events[1].line == 5);
}

TEST_CASE("what the interposer's writer formats, the parser reads back") {
    namespace fmt = clpool::tools::trace_format;
    char line[fmt::max_line];
    std::string text;
    const auto add = [&](int n) {
        REQUIRE(n > 0);
        REQUIRE(static_cast<std::size_t>(n) < sizeof line);
        text.append(line, static_cast<std::size_t>(n));
    };
    add(fmt::format_header(line, sizeof line, "pid 4242; written by libclpool_interpose"));
    add(fmt::format_alloc(line, sizeof line, 897469, 1, 0x1, 0x1, 1000));
    CHECK(std::string_view(line) == "897469 alloc 1 0x1 0x1 1000\n");  // docs/TRACE_FORMAT.md's example
    add(fmt::format_free(line, sizeof line, 905269, 1));
    CHECK(std::string_view(line) == "905269 free 1\n");
    add(fmt::format_alloc(line, sizeof line, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX));
    CHECK(text.rfind("clpool-trace 1\n# pid 4242; written by libclpool_interpose\n", 0) == 0);
    const Trace t = parse_trace(text);
    REQUIRE(t.events.size() == 3);
    CHECK(t.events[0].t_ns == 897469);
    CHECK(t.events[0].flags == 0x1);
    CHECK(t.events[1].kind == op::free);
    CHECK(t.events[1].bytes == 1000);
    CHECK(t.events[2].t_ns == UINT64_MAX - 1);  // the longest line fits max_line
    CHECK(t.events[2].ctx == UINT64_MAX);
    CHECK(t.events[2].bytes == UINT64_MAX);
}

TEST_CASE("each malformed line is an error naming its line and what was expected") {
    struct Case {
        std::string_view text;
        std::size_t line;
        std::string_view says;
    };
    const Case cases[] = {
        {"", 1, "empty file; expected the header"},
        {"clpool-trace 2\n", 1, "unsupported trace version"},
        {"CLPOOL-TRACE 1\n", 1, "not a clpool trace"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 8\n2 resize 1 9\n", 3, "unknown op 'resize'; expected alloc or free"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1\n", 2, "alloc has 5 fields; expected 6"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 8 9\n", 2, "alloc has 7 fields"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 8\n2 free 1 0x1\n", 3, "free has 4 fields; expected 3"},
        {"clpool-trace 1\n1 free\n", 2, "free has 2 fields; expected 3"},
        {"clpool-trace 1\n1\n", 2, "too few fields"},
        {"clpool-trace 1\n1  alloc 1 0x1 0x1 8\n", 2, "empty field 2"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 8 \n", 2, "empty field 7"},
        {"clpool-trace 1\nx alloc 1 0x1 0x1 8\n", 2, "bad time 'x'"},
        {"clpool-trace 1\n-1 alloc 1 0x1 0x1 8\n", 2, "bad time '-1'"},
        {"clpool-trace 1\n1 alloc one 0x1 0x1 8\n", 2, "bad id 'one'"},
        {"clpool-trace 1\n1 alloc 1 1 0x1 8\n", 2, "bad context '1'; expected a hex token like 0x1"},
        {"clpool-trace 1\n1 alloc 1 0x 0x1 8\n", 2, "bad context"},
        {"clpool-trace 1\n1 alloc 1 0x1 0xg 8\n", 2, "bad flags '0xg'"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 +8\n", 2, "bad size '+8'"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 99999999999999999999\n", 2, "bad size"},  // overflows 64 bits
        {"clpool-trace 1\n1 alloc 1 0x1 0x10000000000000000 8\n", 2, "bad flags"},
        {"clpool-trace 1\n1 free 4\n", 2, "free of id 4, which is not live"},
        {"clpool-trace 1\n1 alloc 1 0x1 0x1 0\n", 2, "size 0; expected at least 1 byte"},
        {"clpool-trace 1\n9 alloc 1 0x1 0x1 8\n# c\n8 free 1\n", 4, "time 8 is before 9 on line 2"},
        {"clpool-trace 1\n1 alloc 4 0x1 0x1 8\n2 free 4\n3 free 4\n", 4, "free of id 4, which is not live"},
        {"clpool-trace 1\n1 alloc 4 0x1 0x1 8\n# x\n2 alloc 4 0x2 0x1 8\n", 4,
         "alloc of id 4, which is still live (allocated on line 2)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const auto [line, message] = error_of(c.text);
        CHECK(line == c.line);
        CHECK(message.find("line " + std::to_string(c.line) + ": ") == 0);
        CHECK(message.find(c.says) != std::string::npos);
    }
}

TEST_CASE("a quoted bad line shows control bytes escaped and is cut at 80 characters") {
    const auto [line, message] = error_of(std::string("clpool-trace 1\n1 \x01op 2\n"));
    CHECK(line == 2);
    CHECK(message.find("'1 \\x01op 2'") != std::string::npos);
    const auto [l2, m2] = error_of("clpool-trace 1\n1 " + std::string(200, 'z') + "\n");
    CHECK(l2 == 2);
    CHECK(m2.find("...'") != std::string::npos);
    CHECK(m2.size() < 250);
}

// "clpool-trace 1 " (trailing blanks, common in a hand-written trace) has the supported version:
// the error must say what is wrong with the line, not that the version is unsupported.
TEST_CASE("replay: trailing blanks after the header are named as such, not as an unsupported version") {
    for (const char* text : {"clpool-trace 1 \n1 alloc 1 0x1 0x1 8\n", "clpool-trace 1\t\r\n"}) {
        CAPTURE(text);
        try {
            parse_trace(text);
            FAIL("parsed");
        } catch (const trace_error& e) {
            CHECK(e.line() == 1);
            const std::string what = e.what();
            CHECK(what.find("unsupported") == std::string::npos);
            CHECK(what.find("trailing") != std::string::npos);
        }
    }
}

// Sizes up to 2^64-1 parse, but live bytes that add past it (two allocations of 2^63) would wrap:
// the "no pool" replay would hold 0 bytes after the second and report a peak of 2^63.
TEST_CASE("replay: live bytes past 2^64-1 are a trace error naming the line and the size") {
    constexpr std::string_view text =
        "clpool-trace 1\n"
        "1 alloc 1 0x1 0x1 9223372036854775808\n"
        "2 alloc 2 0x1 0x1 9223372036854775808\n";
    try {
        parse_trace(text);
        FAIL("parsed");
    } catch (const trace_error& e) {
        CHECK(e.line() == 3);
        const std::string what = e.what();
        CHECK(what.find("9223372036854775808") != std::string::npos);
        CHECK(what.find("18446744073709551615") != std::string::npos);
    }
}

TEST_CASE("--config text becomes a configuration; bad keys and values are named") {
    const Config c = parse_config("name=x,buckets=quarter,cap=1GiB,per-bucket=8,kind=pinned", 1);
    CHECK(c.name == "x");
    CHECK(c.buckets == bucket_scheme::quarter);
    CHECK(c.capped);
    CHECK(c.cap == (std::size_t{1} << 30));
    CHECK(c.per_bucket == 8);
    CHECK(c.kind == kind_choice::pinned);
    const Config d = parse_config("buckets=fixed", 3);
    CHECK(d.name == "custom3");
    CHECK_FALSE(d.capped);
    CHECK_THROWS_WITH_AS(parse_config("buckets=zig", 1), doctest::Contains("buckets='zig'"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("cap=lots", 1), doctest::Contains("cap='lots'"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("per-bucket=-1", 1), doctest::Contains("per-bucket='-1'"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("colour=red", 1), doctest::Contains("unknown --config key 'colour'"),
                         config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets", 1), doctest::Contains("not key=value"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("cap=1,cap=2", 1), doctest::Contains("given twice"), config_spec_error);
}

TEST_CASE("quarter buckets round up by at most a quarter") {
    using Q = QuarterPowerOfTwoBuckets;
    for (std::size_t n : {1u, 256u, 257u, 320u, 321u, 1000u, 4096u, 4097u, 1000000u, 3u << 20}) {
        CAPTURE(n);
        const std::size_t b = Q::size_from_index(Q::index_from_size(n));
        CHECK(b >= n);
        if (n > 256) CHECK(b <= n + n / 4 + 1);
        if (Q::index_from_size(n) > 0) CHECK(Q::size_from_index(Q::index_from_size(n) - 1) < n);
    }
}

TEST_CASE("replaying the worked trace gives the counts worked out by hand") {
    const Trace t = parse_trace(worked);
    const auto configs = alias_configs();
    REQUIRE(configs.size() == 6);  // and SVMArenaPool, OffsetArenaPool
    CHECK(configs[3].name == "ArenaPool");
    for (auto what : {Target::type::host, Target::type::sim}) {
        Target target;
        target.what = what;
        CAPTURE(target.description());
        const Result buffer = run(t, configs[0], target);
        // 9 allocs: the 4000 B, 1000000 B and second 4096 B reuse freed buckets;
        // the USE_HOST_PTR (0x9) buffer passes through unpooled.
        CHECK(buffer.allocations == 9);
        CHECK(buffer.stats.hits == 3);
        CHECK(buffer.avoided() == 3);
        CHECK(buffer.passthrough == 1);
        CHECK(buffer.driver_allocations == 6);
        CHECK(buffer.failed == 0);
        CHECK(buffer.stats.evictions == 0);
        REQUIRE(buffer.held.size() == t.events.size());
        // The peak: the four pooled buffers made so far plus the 8 KiB pass-through while it lives.
        CHECK(buffer.peak_held == 4096 + 1048576 + 65536 + 512 + 8192);
        CHECK(buffer.peak_waste == (4096 - 4000) + (1048576 - 1000000) + (512 - 300));
        // At the end everything freed stays cached: nothing is given back by an unlimited pool.
        CHECK(buffer.held_at_end == 4096 + 1048576 + 65536 + 512 + 256);

        // Fixed buckets also serve the 256 B alloc from the 1 KiB bucket the 300 B one left.
        const Result persistent = run(t, configs[2], target);
        CHECK(persistent.stats.hits == 4);
        CHECK(persistent.driver_allocations == 5);

        // A cap below 1 MiB evicts both 1 MiB buffers as they come back.
        const Result tight = run(t, parse_config("name=tight,cap=64KiB,per-bucket=1", 1), target);
        CHECK(tight.stats.evictions == 2);
        CHECK(tight.stats.hits == 2);
        CHECK(tight.held_at_end == 4096 + 65536 + 512 + 256);
    }
}

TEST_CASE("with no pool every alloc goes to the driver and only live bytes are held") {
    const Trace t = parse_trace(worked);
    const Result none = run_unpooled(t);
    CHECK(none.driver_allocations == 9);
    CHECK(none.avoided() == 0);
    CHECK(none.held_at_end == t.live_bytes_at_end);
    CHECK(none.peak_held == 4096 + 1048576 + 65536);
}

TEST_CASE("finer bucket schemes are named in --config and pick the library's policies") {
    CHECK(parse_config("buckets=eighth", 1).buckets == bucket_scheme::eighth);
    CHECK(parse_config("buckets=half", 1).buckets == bucket_scheme::half);
    CHECK(parse_config("buckets=sixteenth", 1).buckets == bucket_scheme::sixteenth);
    CHECK_THROWS_WITH_AS(parse_config("buckets=tenth", 1),
                         doctest::Contains("expected pow2, fixed, half, quarter, eighth, sixteenth or arena"),
                         config_spec_error);
    // 300 B and 4000 B in eighths: 320 B and 4096 B buckets, so the waste is 20 + 96 (+ the others).
    Target sim;
    sim.what = Target::type::sim;
    const Result r = run(parse_trace(worked), parse_config("buckets=eighth", 1), sim);
    CHECK(r.peak_waste == (4096 - 4000) + (1048576 - 1000000) + (320 - 300));
}

TEST_CASE("a simulated capacity fails what does not fit, after the pool trims and retries") {
    const Trace t = parse_trace(worked);
    Target sim;
    sim.what = Target::type::sim;
    // The 300 B alloc (512 B bucket) comes when 1118208 bytes are held; the 8 KiB USE_HOST_PTR
    // buffer is the application's memory and ignores the capacity.
    sim.capacity = 1118720 - 1;
    const Result tight = run(t, alias_configs()[0], sim);
    CHECK(tight.failed == 1);
    sim.capacity = 1118720;
    const Result fits = run(t, alias_configs()[0], sim);
    CHECK(fits.failed == 0);
    // The last 256 B alloc does not fit beside the cached 512 B buffer: its pool gives that back, retries.
    CHECK(fits.stats.oom_retries == 1);
    CHECK(fits.peak_held == 1118720 + 8192);
}

// CL_MEM_USE_HOST_PTR buffers "count as held but are never refused" (docs/TOOLS.md), so they can
// take the bytes held past the simulated capacity. A pooled allocation must then still make the
// pool trim its idle buffers (the room left is none, not `capacity - held` wrapped around), or the
// replay holds more than a real device could and the capacity search reports one too small.
TEST_CASE("replay: a pooled allocation past the capacity still trims when pass-through buffers fill it") {
    constexpr std::string_view text =
        "clpool-trace 1\n"
        "1 alloc 1 0x1 0x1 4096\n"  // a miss; cached 4096 after its free
        "2 free 1\n"
        "3 alloc 2 0x1 0x9 1024\n"  // USE_HOST_PTR: held 5120
        "4 alloc 3 0x1 0x1 2048\n"  // a miss: live 3072, held 7168 unless the cache is trimmed
        "5 free 3\n"
        "6 free 2\n"
        "7 alloc 4 0x1 0x1 4096\n"  // a hit only if 4096 was kept
        "8 free 4\n";
    const Trace trace = parse_trace(text);
    const std::size_t peak_live = run_unpooled(trace).peak_held;
    REQUIRE(peak_live == 4096);

    Target sim;
    sim.what = Target::type::sim;
    sim.capacity = 4096;
    const Result r = run(trace, pow2_config(), sim);
    CHECK(r.failed == 0);
    // After the pooled allocation of 2048, the idle 4096 has gone back: 1024 + 2048 held.
    CHECK(r.held[3] == 3072);

    // Keeping the 4096 buffer (the only way to hit on event 7) takes 4096 + 1024 + 2048 bytes.
    const CapacityResult s = min_capacity(trace, pow2_config(), Requirement{0.5, 2}, peak_live, 1);
    REQUIRE(s.capacity.has_value());
    CHECK(*s.capacity == 7168);
}

// CL_MEM_USE_HOST_PTR buffers are added to the bytes held without a check (they are never
// refused), so on the simulation a pool's cached bytes plus a pass-through buffer can pass
// 2^64-1: that is an error naming the line, not a held count wrapped to 0 and a peak that
// misses the buffer.
TEST_CASE("replay: bytes held past 2^64-1 by a pass-through buffer are an error naming the line") {
    constexpr std::string_view text =
        "clpool-trace 1\n"
        "1 alloc 1 0x1 0x1 4611686018427387904\n"  // 2^62, pooled
        "2 alloc 2 0x1 0x1 4611686018427387904\n"
        "3 alloc 3 0x1 0x1 4611686018427387904\n"
        "4 free 1\n"
        "5 free 2\n"
        "6 free 3\n"                               // 3 * 2^62 cached
        "7 alloc 4 0x1 0x9 4611686018427387904\n"  // USE_HOST_PTR: 2^62 more
        "8 free 4\n";
    const Trace trace = parse_trace(text);
    Target sim;
    sim.what = Target::type::sim;
    try {
        const Result r = run(trace, pow2_config(), sim);
        FAIL("replayed, peak held " << r.peak_held);
    } catch (const trace_error& e) {
        CHECK(e.line() == 8);
        const std::string what = e.what();
        CHECK(what.find("4611686018427387904") != std::string::npos);
        CHECK(what.find("pow2") != std::string::npos);
    }
}

TEST_CASE("the capacity search finds the smallest capacity worked out by hand") {
    const Trace t = parse_trace(worked);
    const std::size_t live = run_unpooled(t).peak_held;
    REQUIRE(live == 1118208);
    const CapacityResult c = min_capacity(t, alias_configs()[0], Requirement{}, live, 1);
    REQUIRE(c.capacity.has_value());
    CHECK(*c.capacity == 1118720);
    CHECK(c.at.failed == 0);
    CHECK(c.replays >= 2);
    CHECK(c.replays <= 2 + 14);  // the unconstrained replay, then a walk up from the live peak
    // Coarser resolution: within it, never below the exact answer.
    const CapacityResult coarse = min_capacity(t, alias_configs()[0], Requirement{}, live, 4096);
    REQUIRE(coarse.capacity.has_value());
    CHECK(*coarse.capacity >= 1118720);
    CHECK(*coarse.capacity < 1118720 + 4096);
    // A bound it cannot beat: no answer.
    CHECK_FALSE(min_capacity(t, alias_configs()[0], Requirement{}, live, 1, 1118720).capacity.has_value());
    CHECK(min_capacity(t, alias_configs()[0], Requirement{}, live, 1, 1118721).capacity == 1118720);
    // 3 hits in 9 allocations: a 50% requirement is met at no capacity.
    CHECK_FALSE(min_capacity(t, alias_configs()[0], Requirement{0.5, 0}, live, 1).capacity.has_value());
}

TEST_CASE("the warm-up leaves the first allocations out of the warm hit rate") {
    const Trace t = parse_trace(worked);
    Target sim;
    sim.what = Target::type::sim;
    // After the first 3 allocations: 4000 B hit, 1000000 B hit, 300 B miss, USE_HOST_PTR (a driver
    // allocation), 4096 B hit, 256 B miss.
    const Result r = run(t, alias_configs()[0], sim, 3);
    CHECK(r.warm_allocations == 6);
    CHECK(r.warm_driver_allocations == 3);
    CHECK(r.warm_hit_rate() == doctest::Approx(0.5));
    CHECK(run(t, alias_configs()[0], sim).warm_allocations == 9);
    CHECK(r.held_over_live(1118208) == doctest::Approx(1126912.0 / 1118208.0));
}

TEST_CASE("--suggest's candidates parse back to themselves, and the winner prints as a using line") {
    const auto candidates = suggest_candidates(std::size_t{1} << 30);
    CHECK(candidates.size() == (std::size(bucket_schemes) - 1) * 5 * 3 + 27 + 6);
    std::set<std::string> specs;
    for (const auto& c : candidates) {
        CAPTURE(c.spec);
        CHECK(specs.insert(c.spec).second);
        const Config back = parse_config(c.spec, 1);
        CHECK(back.buckets == c.buckets);
        CHECK(back.capped == c.capped);
        CHECK(back.cap == c.cap);
        CHECK(back.per_bucket == c.per_bucket);
        CHECK(back.arena.small_segment == c.arena.small_segment);
        CHECK(back.arena.large_segment == c.arena.large_segment);
        CHECK(back.arena.max_free_fraction == c.arena.max_free_fraction);
        CHECK(back.free_views == c.free_views);
    }
    CHECK(using_line(parse_config("buckets=arena,views=free", 1)).find("clpool::OffsetArenaPool") != std::string::npos);
    const std::string line = using_line(parse_config("buckets=eighth,cap=1GiB,per-bucket=8", 1));
    CHECK(line.find("using TracedPool = clpool::Pool<clpool::EighthPowerOfTwoBuckets, clpool::DeviceLocal, "
                    "clpool::Capped, clpool::SingleMutex, clpool::OpenCLBackend>;") == 0);
    CHECK(line.find("clpool::Capped(1073741824, 8)") != std::string::npos);
    CHECK(using_line(parse_config("buckets=fixed,kind=pinned", 1))
              .find("FixedSetBuckets, clpool::HostPinned, "
                    "clpool::Unlimited") != std::string::npos);
}

TEST_CASE("buckets=arena takes the arena's options; they apply to it only and are checked") {
    const Config a = parse_config("buckets=arena,segment=4MiB,large-segment=32MiB,small=512KiB,max-free=0.5", 1);
    CHECK(a.buckets == bucket_scheme::arena);
    CHECK(a.arena.small_segment == 4u << 20);
    CHECK(a.arena.large_segment == 32u << 20);
    CHECK(a.arena.small_limit == 512u << 10);
    CHECK(a.arena.max_free_fraction == 0.5);
    CHECK(a.arena.granularity == ArenaOptions{}.granularity);
    CHECK_THROWS_WITH_AS(parse_config("buckets=pow2,segment=4MiB", 1),
                         doctest::Contains("segment= applies to buckets=arena only"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets=arena,segment=512KiB", 1),
                         doctest::Contains("small <= segment <= large-segment"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets=arena,granularity=768", 1),
                         doctest::Contains("granularity=768 is not a power of two"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets=arena,max-free=2", 1), doctest::Contains("max-free='2'"),
                         config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets=arena,segment=big", 1), doctest::Contains("segment='big'"),
                         config_spec_error);
}

// parse_config checks small <= segment <= large-segment (docs/TOOLS.md); ArenaOptions::large_limit,
// which is no --config key, must follow, so that a documented-valid 'small=16MiB,segment=16MiB'
// replays instead of throwing config_error at its first allocation naming a key the user cannot set.
TEST_CASE("replay: an arena --config with small above 10 MiB replays") {
    const Config c = parse_config("buckets=arena,small=16MiB,segment=16MiB,large-segment=20MiB", 1);
    const Trace trace = parse_trace("clpool-trace 1\n1 alloc 1 0x1 0x1 12582912\n2 free 1\n3 alloc 2 0x1 0x1 4096\n");
    Target sim;
    sim.what = Target::type::sim;
    Result r;
    CHECK_NOTHROW(r = run(trace, c, sim));
    CHECK(r.failed == 0);
    CHECK(r.allocations == 2);
}

TEST_CASE("the arena replays the worked trace from one small segment per pool") {
    const Trace t = parse_trace(worked);
    // Three (context, flags) pools each start with a min_segment (64 KiB) segment; the 1 MiB
    // request does not fit pool (1, 0x1)'s and gets a segment of its own size (growth allows
    // no more); 1000000 B is carved from it once the cache gave the 1 MiB block back. The
    // USE_HOST_PTR buffer passes through.
    constexpr std::size_t peak = 3 * (std::size_t{64} << 10) + (std::size_t{1} << 20) + 8192;
    for (auto what : {Target::type::host, Target::type::sim}) {
        Target target;
        target.what = what;
        CAPTURE(target.description());
        const Result r = run(t, alias_configs()[3], target);
        CHECK(r.failed == 0);
        CHECK(r.driver_allocations == 4 + 1);
        CHECK(r.avoided() == 9 - 5);
        CHECK(r.peak_held == peak);
        CHECK(r.stats.segment_allocations == 4);
        CHECK(r.stats.sub_buffer_fallbacks == 0);
    }
    // A byte less than what the pools need (the USE_HOST_PTR buffer, last, is never refused)
    // and context 2's segment is refused; its 300 B request alone, rounded to 512, then
    // fits: SubAllocated falls back to a segment of exactly the request.
    Target sim;
    sim.what = Target::type::sim;
    sim.capacity = peak - 8192 - 1;
    const Result tight = run(t, alias_configs()[3], sim);
    CHECK(tight.failed == 0);
    CHECK(tight.peak_held < peak);
    const auto c = min_capacity(t, alias_configs()[3], Requirement{}, run_unpooled(t).peak_held, 1);
    REQUIRE(c.capacity.has_value());
    CHECK(*c.capacity < peak);
}

TEST_CASE("the replay closes a context's pools after its last event, once none of its buffers is live") {
    const Trace t = parse_trace(
        "clpool-trace 1\n"
        "1 alloc 1 0x1 0x1 4096\n"
        "2 free 1\n"  // context 1's last event: its pool and its cached block go
        "3 alloc 2 0x2 0x1 4096\n"
        "4 alloc 3 0x3 0x1 4096\n"
        "5 free 3\n"  // context 3's last event with 2 of context 2 live: only context 3 closes
        "6 alloc 4 0x2 0x1 4096\n");
    CHECK(t.events[1].ends_context);
    CHECK_FALSE(t.events[2].ends_context);
    CHECK(t.events[4].ends_context);
    CHECK(t.events[5].ends_context);
    Target sim;
    sim.what = Target::type::sim;
    const Result r = run(t, alias_configs()[0], sim);
    CHECK(r.held[1] == 0);     // context 1's pool closed: nothing held
    CHECK(r.held[4] == 4096);  // context 3's closed; context 2's buffer is live
    CHECK(r.held_at_end == 2 * 4096);  // context 2 keeps its pool (a buffer never freed)
    CHECK(r.stats.misses == 4);        // the closed pools' counts stay in the stats
}

TEST_CASE("--suggest's arena candidates print as SubAllocated pools with their options") {
    const std::string line = using_line(parse_config("buckets=arena,segment=8MiB,large-segment=64MiB,max-free=0", 1));
    CHECK(line.find("clpool::Pool<clpool::ArenaBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::SingleMutex, "
                    "clpool::SubAllocated<clpool::OpenCLBackend>>;") != std::string::npos);
    CHECK(line.find("clpool::ArenaOptions{.granularity = 512, .small_limit = 1048576, .small_segment = 8388608, "
                    ".large_segment = 67108864, .large_limit = 10485760, .max_free_fraction = 0}") !=
          std::string::npos);
    CHECK(using_line(alias_configs()[3]).find("that is clpool::ArenaPool") != std::string::npos);
}

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"

TEST_CASE("the replay runs on the OpenCL test device with the same counts") {
    auto& env = test::OpenCLEnv::get();
    Target target;
    target.what = Target::type::opencl;
    target.context = env.context;
    target.device = env.device();
    const Result r = run(parse_trace(worked), alias_configs()[1], target);
    CHECK(r.stats.hits == 3);
    CHECK(r.driver_allocations == 6);
    CHECK(r.held_at_end == 4096 + 1048576 + 65536 + 512 + 256);
}
#endif

// Seven events on which more capacity fails where less succeeds: with room for a 2 MiB small
// segment the 300000-byte block lands beside the cached 1 MiB one, and the 1.5 MB request then
// finds two holes of 1 MiB and 0.75 MiB in it; with less room both small blocks get segments of
// their own, which the out-of-memory trim gives back. A bisection found 16180224 bytes, 12% above
// the smallest; walking the capacities where the replay changes finds the smallest.
TEST_CASE("the capacity search finds the smallest capacity where more capacity does not always serve") {
    const Trace t = parse_trace(
        "clpool-trace 1\n"
        "1 alloc 1 0x1 0x1 12582912\n"
        "2 free 1\n"
        "3 alloc 2 0x1 0x1 12582912\n"
        "4 alloc 3 0x1 0x1 1048576\n"
        "5 alloc 4 0x1 0x1 300000\n"
        "6 free 3\n"
        "7 alloc 5 0x1 0x1 1500000\n");
    const Config arena = alias_configs()[3];
    REQUIRE(arena.name == "ArenaPool");
    Target sim;
    sim.what = Target::type::sim;
    auto fails_at = [&](std::size_t capacity) {
        sim.capacity = capacity;
        return run(t, arena, sim).failed != 0;
    };
    const std::size_t live = run_unpooled(t).peak_held;
    std::size_t smallest = (live + 511) / 512 * 512;  // every size the simulation holds is a multiple of 512
    while (fails_at(smallest)) smallest += 512;
    REQUIRE(fails_at(smallest + (512u << 10)));  // not monotone: half a MiB more fails
    const CapacityResult c = min_capacity(t, arena, Requirement{}, live, 1);
    REQUIRE(c.capacity.has_value());
    CHECK(*c.capacity == smallest);
    CHECK(c.at.failed == 0);
}

TEST_CASE("views=free: the arena over a parent whose views cost no driver call") {
    const Config c = parse_config("buckets=arena,views=free", 1);
    CHECK(c.free_views);
    CHECK(c.arena.small_limit == ArenaOptions::for_free_views().small_limit);
    CHECK(c.arena.empty_grace == 0);
    CHECK(parse_config("buckets=arena,views=free,small=64KiB", 1).arena.small_limit == 64u << 10);
    CHECK_THROWS_WITH_AS(parse_config("buckets=pow2,views=free", 1),
                         doctest::Contains("views= applies to buckets=arena only"), config_spec_error);
    CHECK_THROWS_WITH_AS(parse_config("buckets=arena,views=cheap", 1), doctest::Contains("or free"), config_spec_error);
    const auto configs = alias_configs();
    REQUIRE(configs.size() == 6);
    CHECK(configs[4].name == "SVMArenaPool");
    CHECK(configs[5].name == "OffsetArenaPool");
    CHECK(configs[4].free_views);
    // A block carved at a new (offset, size) every step, each smaller than the first: views count
    // as driver calls, unless free.
    std::string text = "clpool-trace 1\n";
    for (int i = 1; i <= 50; ++i)
        text += std::to_string(2 * i) + " alloc " + std::to_string(i) + " 0x1 0x1 " +
                std::to_string(2000000 - 4096 * i) + "\n" + std::to_string(2 * i + 1) + " free " + std::to_string(i) +
                "\n";
    const Trace t = parse_trace(text);
    for (auto what : {Target::type::host, Target::type::sim}) {
        Target target;
        target.what = what;
        CAPTURE(target.description());
        const Result views = run(t, configs[3], target, 10);
        const Result free = run(t, configs[4], target, 10);
        CHECK(views.views == 50);
        CHECK(views.warm_hit_rate() == 0.0);
        CHECK(free.views == 0);
        CHECK(free.warm_hit_rate() == 1.0);
        CHECK(free.stats.sub_buffers_made == 0);
    }
}
