// Defects found in the replay tool (tools/replay), one test each: each fails on the code before its fix.
#include "tools/replay/replay.hpp"
#include "tools/replay/search.hpp"
#include "tools/replay/trace.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using namespace clpool;
using namespace clpool::replay;

namespace {

Config pow2_config() {
    Config c;
    c.name = "pow2";
    c.spec = "buckets=pow2";
    return c;
}

}  // namespace

// Defect: CL_MEM_USE_HOST_PTR buffers "count as held but are never refused" (docs/TOOLS.md), so
// they can take the bytes held past the simulated capacity. Counted::allocate then computed
// `capacity - held`, which wrapped around, and let every pooled allocation through without the
// pool trimming its idle buffers: the replay held far more than the capacity, kept a cache a real
// device could not have, and the capacity search reported a capacity too small.
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

// Defect: parse_config checks small <= segment <= large-segment (docs/TOOLS.md) but left
// ArenaOptions::large_limit (not a --config key) at its 10 MiB default, so a documented-valid
// 'small=16MiB,segment=16MiB' passed parse_config and then threw config_error on the first
// allocation, naming large_limit, which the user cannot set.
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

// Defect: a header of version 1 with trailing blanks ("clpool-trace 1 ", common in a hand-written
// trace) was reported as "unsupported trace version", though version 1 is the one supported.
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

// Defect: parse_trace took any size up to 2^64-1, so live bytes that add past it (two allocations
// of 2^63) wrapped: the "no pool" replay held 0 bytes after the second and reported a peak of 2^63,
// and live_bytes_at_end wrapped too.
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

// Defect: CL_MEM_USE_HOST_PTR buffers are added to the bytes held unchecked (they are never
// refused), so on the simulation a pool's cached bytes plus a pass-through buffer could wrap past
// 2^64-1: held dropped to 0 and the peak missed the pass-through buffer.
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
