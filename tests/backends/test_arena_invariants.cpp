// SubAllocated called as a backend, as Pool calls it: random carves, releases and trims keep the
// arena's invariants (ranges tile each segment, stats match the map, views never overlap), also
// from several threads; and a request above max_alloc_size() is refused, not wrapped.
#include "mock_backend.hpp"

#include <clpool/backends/sub_allocated.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

using SA = SubAllocated<MockBackend>;
using Block = SA::memory_type;

// What the Pool does on a miss: carve, else grow.
Block carve(SA& b, std::size_t n, bool& ok) {
    auto a = b.allocate_held(n, MemoryKind::device_local);
    if (a.status != AllocStatus::ok) a = b.allocate(n, MemoryKind::device_local);
    ok = a.status == AllocStatus::ok;
    return std::move(a.memory);
}

void check_invariants(SA& b, const std::vector<Block>& live, Ledger& ledger) {
    std::vector<SegmentInfo> segs;
    b.add_segments(segs);
    PoolStats s;
    b.add_stats(s);
    std::size_t seg_bytes = 0, free_bytes = 0, largest = 0;
    for (const auto& seg : segs) {
        std::size_t off = 0;
        bool prev_free = false;
        for (const auto& blk : seg.blocks) {
            REQUIRE(blk.offset == off);
            REQUIRE(blk.bytes > 0);
            REQUIRE(!(prev_free && blk.free));  // merged
            prev_free = blk.free;
            off += blk.bytes;
            if (blk.free) {
                free_bytes += blk.bytes;
                largest = std::max(largest, blk.bytes);
            }
        }
        REQUIRE(off == seg.bytes);
        seg_bytes += seg.bytes;
    }
    CHECK(segs.size() == s.segments);
    CHECK(seg_bytes == s.segment_bytes);
    CHECK(free_bytes == s.segment_free_bytes);
    CHECK(largest == s.largest_free_block);
    // live views disjoint
    std::map<const std::byte*, std::size_t> spans;
    long views = 0;
    for (const auto& l : live) {
        if (!l.data()) continue;
        REQUIRE(spans.count(l.data()) == 0);
        spans[l.data()] = l.size();
        if (!l.is_fallback()) ++views;
    }
    const std::byte* end = nullptr;
    for (const auto& [p, n] : spans) {
        REQUIRE((end == nullptr || p >= end));
        end = p + n;
    }
    CHECK(ledger.live_views == views + static_cast<long>(s.sub_buffers_cached));
}

}  // namespace

TEST_CASE("random carve/release/trim on odd options keeps the arena's invariants") {
    for (int config = 0; config < 6; ++config) {
        CAPTURE(config);
        auto ledger = std::make_shared<Ledger>();
        ArenaOptions o;
        std::mt19937_64 rng(config);
        o.granularity = 64;
        o.small_limit = 1000 + config * 300;
        o.small_segment = 5000 + config * 777;
        o.large_segment = 40000 + config * 1234;
        o.large_limit = 20000;
        o.large_round = 3000 + config;
        o.min_segment = 1000;
        o.cached_views = config % 3 == 0 ? 0 : (config % 3 == 1 ? 1 : 16);
        ledger->sub_alignment = config % 2 ? 128 : 64;
        {
            SA b(MockBackend(ledger, 200000 + 17), o);
            std::vector<Block> live(40);
            for (int step = 0; step < 20000; ++step) {
                auto& slot = live[rng() % live.size()];
                slot = Block{};
                const std::size_t n = rng() % 3 == 0 ? rng() % 70000 : rng() % 3000;
                if (rng() % 50 == 0) ledger->fail_sub_ranges = true;
                bool ok = false;
                slot = carve(b, n, ok);
                ledger->fail_sub_ranges = false;
                REQUIRE(ok);
                if (ok && n) {
                    REQUIRE(slot.size() == n);
                }
                if (step % 997 == 0) b.release_empty();
                if (step % 101 == 0) check_invariants(b, live, *ledger);
            }
            check_invariants(b, live, *ledger);
            live.clear();
            b.release_empty();
            PoolStats s;
            b.add_stats(s);
            CHECK(s.segments == 0);
            CHECK(s.segment_bytes == 0);
            CHECK(s.sub_buffers_cached == 0);
            CHECK(ledger->live == 0);
            CHECK(ledger->live_views == 0);
        }
    }
}

#include <thread>

TEST_CASE("threads carving, releasing and trimming one SubAllocated") {
    auto ledger = std::make_shared<Ledger>();
    ArenaOptions o;
    o.granularity = 64;
    o.small_limit = 2048;
    o.small_segment = 8192;
    o.large_segment = 32768;
    o.large_limit = 16384;
    o.large_round = 4096;
    o.min_segment = 1024;
    o.cached_views = 2;
    {
        SA b(MockBackend(ledger), o);
        std::vector<std::thread> ts;
        for (int t = 0; t < 3; ++t)
            ts.emplace_back([&, t] {
                std::mt19937_64 rng(t);
                std::vector<Block> live(8);
                for (int i = 0; i < 3000; ++i) {
                    auto& slot = live[rng() % live.size()];
                    slot = Block{};
                    bool ok = false;
                    slot = carve(b, rng() % 3 ? rng() % 2048 : rng() % 40000, ok);
                    if (slot.data()) std::fill(slot.data(), slot.data() + slot.size(), std::byte(t));
                    if (i % 200 == 0) b.release_empty();
                    if (i % 50 == 0) {
                        PoolStats s;
                        b.add_stats(s);
                        std::vector<SegmentInfo> segs;
                        b.add_segments(segs);
                    }
                    for (auto& l : live)
                        if (l.data())
                            REQUIRE(std::all_of(l.data(), l.data() + l.size(),
                                                [&](std::byte c) { return c == std::byte(t); }));
                }
            });
        for (auto& t : ts) t.join();
        b.release_empty();
        PoolStats s;
        b.add_stats(s);
        CHECK(s.segments == 0);
        CHECK(ledger->live_views == 0);
    }
    CHECK(ledger->live == 0);
}

#include <limits>

// Pool checks max_alloc_size() before it calls the backend; a direct caller gets the same refusal.
// Before the fix, arena::round() wrapped to 0 for n > SIZE_MAX - granularity + 1, take(0) split off
// a zero-size range, and SubAllocated handed out a "block" whose view claimed n bytes of a segment
// that holds a few KiB, overlapping every other block there.
TEST_CASE("SubAllocated refuses a request above its max_alloc_size() instead of wrapping its rounding") {
    auto ledger = std::make_shared<Ledger>();
    ArenaOptions o;
    o.granularity = 64;
    o.small_limit = 4096;
    o.small_segment = 16384;
    o.large_segment = 65536;
    o.large_limit = 32768;
    o.large_round = 4096;
    o.min_segment = 65536;
    SA b(MockBackend(ledger), o);
    bool ok = false;
    Block first = carve(b, 1000, ok);
    REQUIRE(ok);
    const std::size_t huge = std::numeric_limits<std::size_t>::max() - 10;
    REQUIRE(huge > b.max_alloc_size());
    auto held = b.allocate_held(huge, MemoryKind::device_local);
    CHECK(held.status != AllocStatus::ok);
    if (held.status == AllocStatus::ok) {
        INFO("block of ", held.memory.size(), " bytes at offset ", held.memory.offset(), " in a segment of 16384");
        CHECK(held.memory.size() <= 16384);
    }
    auto grown = b.allocate(huge, MemoryKind::device_local);
    CHECK(grown.status != AllocStatus::ok);
}
