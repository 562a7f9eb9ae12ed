// SubAllocated<B>: blocks carved from segments, on the mock and host backends (docs/ARENA.md).
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <map>
#include <random>
#include <string>
#include <vector>

#if defined(__unix__) && !defined(__SANITIZE_THREAD__)
#include <sys/wait.h>
#include <unistd.h>
#endif

using namespace clpool;
using namespace clpool::test;

namespace {

using Arena = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<MockBackend>, Diagnostics>;

// Segments small enough that a few requests fill one.
ArenaOptions tiny() {
    ArenaOptions o;
    o.granularity = 64;
    o.small_limit = 4096;
    o.small_segment = 16384;
    o.large_segment = 65536;
    o.large_limit = 32768;  // above it, a segment of the request's own size
    o.large_round = 4096;
    o.min_segment = 65536;  // no growth cap: segments are full size from the start
    return o;
}

std::string error_of(std::shared_ptr<Ledger> ledger, ArenaOptions o = {}) {
    try {
        SubAllocated<MockBackend> b(MockBackend(std::move(ledger)), o);
    } catch (const config_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

static_assert(Backend<SubAllocated<MockBackend>>);
static_assert(Backend<SubAllocated<HostBackend>>);
static_assert(backend_declares<SubAllocated<HostBackend>, BackendAbility::sub_allocates>);
static_assert(!backend_declares<SubAllocated<HostBackend>, BackendAbility::events>);

TEST_CASE("more kept sub-buffers per segment than a segment holds is refused, naming the value and the limit") {
    auto ledger = std::make_shared<Ledger>();
    ArenaOptions o;
    o.cached_views = 17;
    const auto error = error_of(ledger, o);
    CHECK(error.find("cached_views is 17") != std::string::npos);
    CHECK(error.find("at most 16") != std::string::npos);
    for (std::size_t n : {0, 1, 16}) {
        o.cached_views = n;
        CHECK(error_of(ledger, o).empty());
    }
}

TEST_CASE("a base-address alignment of 0 or not a power of two is refused at construction, naming the value") {
    auto ledger = std::make_shared<Ledger>();
    ledger->sub_alignment = 0;
    const auto zero = error_of(ledger);
    CHECK(zero.find("alignment of 0 bytes") != std::string::npos);
    ledger->sub_alignment = 96;  // 768 bits
    const auto odd = error_of(ledger);
    CHECK(odd.find("alignment of 96 bytes") != std::string::npos);
    CHECK(odd.find("power of two") != std::string::npos);
    ledger->sub_alignment = 512;
    CHECK(error_of(ledger).empty());
    ArenaOptions o;
    o.granularity = 100;
    CHECK(error_of(ledger, o).find("granularity is 100") != std::string::npos);
    o = ArenaOptions{};
    o.small_segment = o.large_segment * 2;
    CHECK(error_of(ledger, o).find("small_limit <= small_segment <= large_segment") != std::string::npos);
    o = ArenaOptions{};
    o.large_limit = o.large_segment * 2;
    CHECK(error_of(ledger, o).find("small_limit <= large_limit <= large_segment") != std::string::npos);
    o = ArenaOptions{};
    o.growth = 0;
    CHECK(error_of(ledger, o).find("growth is 0") != std::string::npos);
    CHECK(ledger->allocations == 0);  // nothing was allocated on the way
}

TEST_CASE("blocks honour the larger of the granularity and the parent's alignment") {
    auto ledger = std::make_shared<Ledger>();
    ledger->sub_alignment = 4096;
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    CHECK(pool.backend().granularity() == 4096);
    std::vector<Arena::handle> hs;
    for (std::size_t n : {1, 100, 700, 3000, 5000, 9000}) hs.push_back(pool.allocate(n));
    for (const auto& h : hs) CHECK(h.buffer().offset() % 4096 == 0);
}

TEST_CASE("small requests share a segment; a miss is carved without a driver allocation") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    auto a = pool.allocate(1000);
    auto b = pool.allocate(2000);
    auto c = pool.allocate(3000);
    CHECK(ledger->allocations == 1);
    CHECK(&a.buffer().segment() == &b.buffer().segment());
    CHECK(&b.buffer().segment() == &c.buffer().segment());
    const auto s = pool.stats();
    CHECK(s.segments == 1);
    CHECK(s.segment_bytes == 16384);
    CHECK(s.segment_allocations == 1);
    CHECK(s.misses == 3);
    CHECK(s.segment_free_bytes == 16384 - 1024 - 2048 - 3072);
    CHECK(s.largest_free_block == s.segment_free_bytes);  // one free range after the three blocks
    CHECK(s.fragmentation() == doctest::Approx(0.0));
}

TEST_CASE("a request larger than a segment gets a segment of its own") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    const std::size_t big = 65536 * 3 + 1;
    auto h = pool.allocate(big);
    REQUIRE(h);
    CHECK(h.buffer().size() == h.bucket_size());
    CHECK(h.buffer().offset() == 0);
    const auto s = pool.stats();
    CHECK(s.segments == 1);
    CHECK(s.segment_bytes >= big);
    CHECK(s.segment_bytes < big + 65536);  // its own size (rounded to a class), not a multiple of segments
}

TEST_CASE("a device limit that is not a multiple of the granularity: no segment above it, a size_error past it") {
    auto ledger = std::make_shared<Ledger>();
    const std::size_t limit = 100000;  // not a multiple of 64
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger, limit), tiny()));
    CHECK(pool.max_alloc_size() <= limit);
    CHECK(pool.max_alloc_size() % pool.backend().granularity() == 0);
    auto h = pool.allocate(pool.max_alloc_size());  // the largest request served
    CHECK(h.buffer().size() == pool.max_alloc_size());
    CHECK(pool.stats().segment_bytes <= limit);
    CHECK_THROWS_AS((void)pool.allocate(limit - 10), size_error);  // rounded, above the device's limit
    CHECK(pool.stats().segment_bytes <= limit);
}

TEST_CASE("released blocks merge with free neighbours, and trim gives whole empty segments back") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    {
        auto a = pool.allocate(4096);
        auto b = pool.allocate(4096);
        auto c = pool.allocate(4096);
        b.release();
        CHECK(pool.stats().bytes_cached == 4096);  // the pool caches it: a hit makes no call
        pool.trim();                              // the cache goes back to the segment
        auto s = pool.stats();
        CHECK(s.segments == 1);
        CHECK(s.segment_free_bytes == 16384 - 3 * 4096 + 4096);
        CHECK(s.fragmentation() > 0.0);  // two free ranges: b's hole and the tail
        c.release();
        pool.trim();
        s = pool.stats();
        CHECK(s.largest_free_block == 16384 - 4096);  // b, c and the tail merged
        CHECK(s.fragmentation() == doctest::Approx(0.0));
    }
    pool.trim();
    const auto s = pool.stats();
    CHECK(s.segments == 0);
    CHECK(s.segment_bytes == 0);
    CHECK(ledger->live == 0);
    CHECK(s.peak_segment_bytes == 16384);
}

TEST_CASE("before a segment is added, the pool's cache goes back and merges") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    {
        std::vector<Arena::handle> hs;
        for (int i = 0; i < 8; ++i) hs.push_back(pool.allocate(2048));  // fills the 16 KiB segment
    }  // eight cached 2 KiB blocks
    CHECK(ledger->allocations == 1);
    auto h = pool.allocate(4096);  // fits only once two neighbours merged
    CHECK(ledger->allocations == 1);
    CHECK(pool.stats().bytes_cached == 0);
    CHECK(pool.stats().segments == 1);
}

TEST_CASE("a failed sub-range falls back to a whole buffer and is counted") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    ledger->fail_sub_ranges = true;
    auto h = pool.allocate(1000);
    REQUIRE(h);
    CHECK(h.buffer().is_fallback());
    std::memset(h.buffer().data(), 0xab, h.nbytes());  // usable memory (ASan checks the bounds)
    auto s = pool.stats();
    CHECK(s.sub_buffer_fallbacks == 1);
    CHECK(s.sub_buffers_made == 0);  // the failed call made none
    CHECK(s.segment_free_bytes == s.segment_bytes);  // the carved range went back
    ledger->fail_sub_ranges = false;
    auto g = pool.allocate(5000);
    CHECK_FALSE(g.buffer().is_fallback());
    CHECK(pool.stats().sub_buffers_made == 1);
    h.release();
    g.release();
    pool.trim();
    CHECK(ledger->live == 0);
}

TEST_CASE("a fallback whose whole buffer the driver refuses is not counted as a fallback or an allocation") {
    auto ledger = std::make_shared<Ledger>();
    ledger->capacity = 16384;  // a small segment, and nothing beside it
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    ledger->fail_sub_ranges = true;
    CHECK_THROWS_AS((void)pool.allocate(1000), out_of_memory);
    const auto s = pool.stats();
    CHECK(s.sub_buffer_fallbacks == 0);  // no block was served as a whole buffer
    CHECK(s.sub_buffers_made == 0);
    CHECK(s.segment_allocations == static_cast<std::uint64_t>(ledger->allocations.load()));
    ledger->capacity = -1;
    auto h = pool.allocate(1000);  // now the whole buffer comes
    CHECK(h.buffer().is_fallback());
    CHECK(pool.stats().sub_buffer_fallbacks == 1);
    CHECK(pool.stats().segment_allocations == static_cast<std::uint64_t>(ledger->allocations.load()));
}

TEST_CASE("out of memory: the cache and the empty segments go back, then the request succeeds") {
    auto ledger = std::make_shared<Ledger>();
    ledger->capacity = 65536 * 2;
    auto o = tiny();
    o.max_free_fraction = 1.0;  // keep empty segments until the driver runs out
    o.release_before_new_peak = false;
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
    { auto a = pool.allocate(65536); }  // a cached block filling a large segment
    { auto b = pool.allocate(40000); }  // carved from that segment once the cache merged: no driver call
    CHECK(ledger->allocations == 1);
    auto c = pool.allocate(65536 + 1);  // a segment of its own, which fits only once the empty one is gone
    REQUIRE(c);
    CHECK(ledger->live_bytes <= ledger->capacity);
    const auto s = pool.stats();
    CHECK(s.oom_retries == 0);  // the arena gave its empty segment back itself, before reporting out of memory
    CHECK(s.segments == 1);
    CHECK(s.failed_allocations == 0);
    CHECK_THROWS_AS((void)pool.allocate(65536 * 2), out_of_memory);
    CHECK(c.buffer().data() != nullptr);  // nothing the user holds is lost
}

TEST_CASE("a new segment that would raise the peak comes after the whole empty segments went back") {
    for (const bool rule : {true, false}) {
        CAPTURE(rule);
        auto ledger = std::make_shared<Ledger>();
        auto o = tiny();
        o.release_before_new_peak = rule;
        o.empty_grace = 0;  // a's segment empties during c's miss: the grace would keep it (next test)
        Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
        auto a = pool.allocate(40000);  // a segment of its own: 40960 bytes
        auto b = pool.allocate(40000);  // another: the peak is 81920
        a.release();                    // cached; empty once the cache goes back
        auto c = pool.allocate(50000);  // 53248 bytes: a's empty segment cannot hold it
        REQUIRE(c);
        const auto s = pool.stats();
        if (rule) {
            CHECK(s.segments == 2);  // a's empty segment went before c's came
            CHECK(s.segment_bytes == 40960 + 53248);
            CHECK(s.peak_segment_bytes == 40960 + 53248);
            CHECK(ledger->live == 2);
        } else {
            CHECK(s.segments == 3);  // max_free_fraction is 1: the empty segment stays
            CHECK(s.peak_segment_bytes == 2 * 40960 + 53248);
        }
    }
}

TEST_CASE(
    "past the peak, empty segments go oldest first and only as many as needed; not one just emptied of the "
    "request's kind") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));  // empty_grace 16
    auto a = pool.allocate(40000);  // segments of their own: 40960 bytes
    auto b = pool.allocate(40000);
    pool.allocate(100000).release();  // 102400 bytes, cached
    pool.trim();                      // its segment goes: 81920 held, the peak 184320
    a.release();                      // cached: a's and b's segments empty once the cache goes back
    b.release();
    auto d = pool.allocate(110000);  // 110592 bytes: neither empty segment holds it; its miss empties them
    auto s = pool.stats();
    CHECK(s.segments == 3);  // just emptied, of d's kind (large): kept for the step's next large requests
    CHECK(s.segment_bytes == 2 * 40960 + 110592);
    CHECK(s.peak_segment_bytes == 2 * 40960 + 110592);
    auto e = pool.allocate(1000);  // a small segment (16384 bytes) would pass the peak
    s = pool.stats();
    CHECK(s.segments == 3);  // a's went (the oldest, of the other kind); then 16384 more stayed within the peak
    CHECK(s.segment_bytes == 40960 + 110592 + 16384);
    CHECK(s.peak_segment_bytes == 2 * 40960 + 110592);
    CHECK(ledger->live == 3);
    pool.trim();  // every empty segment, whatever the grace: b's
    CHECK(pool.stats().segments == 2);
    CHECK(ledger->live == 2);
}

TEST_CASE("below the peak, a new segment leaves the empty segments for reuse without a driver call") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    auto a = pool.allocate(40000);   // 40960 bytes
    auto b = pool.allocate(100000);  // 102400 bytes: the peak is 143360
    b.release();
    pool.trim();  // b's segment goes: 40960 held, 143360 the peak
    a.release();  // cached; empty once the cache goes back
    auto c = pool.allocate(50000);  // 53248: 40960 + 53248 stays below the peak, so a's empty segment stays
    REQUIRE(c);
    auto s = pool.stats();
    CHECK(s.segments == 2);
    CHECK(s.segment_bytes == 40960 + 53248);
    CHECK(s.segment_free_bytes == 40960 + 53248 - 51200);  // a kept, and c's tail past its class
    const long allocations = ledger->allocations;
    auto d = pool.allocate(40000);  // carved from the kept segment
    CHECK(ledger->allocations == allocations);
    s = pool.stats();
    CHECK(s.segments == 2);
    CHECK(s.peak_segment_bytes == 143360);
}

TEST_CASE("a handle that outlives its pool keeps its block; the segment goes with the last block") {
    auto ledger = std::make_shared<Ledger>();
    Arena::handle h;
    {
        Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
        h = pool.allocate(3000);
        auto g = pool.allocate(3000);
    }
    CHECK(ledger->live == 1);  // the segment, held by h
    std::memset(h.buffer().data(), 1, h.nbytes());
    h.release();
    CHECK(ledger->live == 0);
}

TEST_CASE("random work on host::ArenaPool: live blocks never overlap and keep their contents") {
    host::ArenaPool pool{HostBackend{}};
    std::mt19937_64 rng(5);
    struct Live {
        host::ArenaPool::handle h;
        unsigned char tag;
    };
    std::vector<Live> live(48);
    for (int step = 0; step < 4000; ++step) {
        auto& slot = live[rng() % live.size()];
        if (slot.h) {
            const auto* p = reinterpret_cast<const unsigned char*>(slot.h.buffer().data());
            REQUIRE(std::all_of(p, p + slot.h.nbytes(), [&](unsigned char c) { return c == slot.tag; }));
        }
        const std::size_t n = static_cast<std::size_t>(std::exp2(static_cast<double>(rng() % 2000) / 100.0));
        slot.h = pool.allocate(n);
        slot.tag = static_cast<unsigned char>(step);
        std::memset(slot.h.buffer().data(), slot.tag, n);
        if (step % 500 == 0) pool.trim();
    }
    std::map<const std::byte*, std::size_t> spans;
    for (const auto& l : live) spans[l.h.buffer().data()] = l.h.bucket_size();
    const std::byte* end = nullptr;
    for (const auto& [p, n] : spans) {
        CHECK((end == nullptr || p >= end));  // distinct segments may lie anywhere, blocks never inside another
        end = p + n;
    }
    const auto s = pool.stats();
    CHECK(s.segment_free_bytes <= s.segment_bytes);
    CHECK(s.largest_free_block <= s.segment_free_bytes);
    CHECK(s.segment_allocations >= s.segments);
}

namespace {

// The segments of a snapshot against its buffers and stats: blocks tile each
// segment, free blocks add up to the arena's free bytes, and every buffer of
// the pool lies in exactly one taken block of its state (and nothing else does).
void check_segments(const PoolSnapshot& snap) {
    std::size_t segment_bytes = 0, free_bytes = 0, largest = 0;
    std::map<std::uintptr_t, std::size_t> claimed;  // buffer id -> blocks naming it
    std::size_t taken = 0;
    for (const auto& seg : snap.segments) {
        std::size_t offset = 0, seg_free = 0, seg_largest = 0;
        for (const auto& b : seg.blocks) {
            CHECK(b.offset == offset);  // in address order, no gap, no overlap
            offset += b.bytes;
            if (b.free) {
                seg_free += b.bytes;
                seg_largest = std::max(seg_largest, b.bytes);
            } else {
                ++taken;
                ++claimed[b.buffer_id];
            }
        }
        CHECK(offset == seg.bytes);  // the blocks' bytes add up to the segment's
        CHECK(seg_free == seg.free_bytes);
        CHECK(seg_largest == seg.largest_free);
        segment_bytes += seg.bytes;
        free_bytes += seg.free_bytes;
        largest = std::max(largest, seg.largest_free);
    }
    CHECK(snap.segments.size() == snap.stats.segments);
    CHECK(segment_bytes == snap.stats.segment_bytes);
    CHECK(free_bytes == snap.stats.segment_free_bytes);
    CHECK(largest == snap.stats.largest_free_block);
    CHECK(taken == snap.buffers.size());
    for (const auto& buf : snap.buffers) {
        CHECK(claimed[buf.id] == 1);
        for (const auto& seg : snap.segments)
            for (const auto& b : seg.blocks)
                if (!b.free && b.buffer_id == buf.id) {
                    CHECK(b.state == buf.state);
                    CHECK(b.bytes >= buf.bytes_held);
                }
    }
    CHECK(claimed.count(0) == 0);
}

}  // namespace

TEST_CASE("snapshot lists the segments and their blocks, joined to the pool's buffers") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    CHECK(pool.snapshot().segments.empty());
    std::vector<Arena::handle> kept;
    for (std::size_t n : {1000u, 2000u, 3000u, 1000u, 40000u}) kept.push_back(pool.allocate(n));
    kept[1].release();  // cached: still a taken block
    kept[3].release();
    pool.trim();  // kept[3]'s block goes back: a hole between kept[2] and the tail
    auto c = pool.allocate(3000);
    c.release();  // a cached block
    const auto snap = pool.snapshot();
    CHECK(snap.segments.size() == 2);  // a small and a large segment
    CHECK(snap.buffers.size() == 4);
    check_segments(snap);
    std::size_t in_use = 0, cached = 0, holes = 0;
    for (const auto& seg : snap.segments)
        for (const auto& b : seg.blocks) {
            in_use += !b.free && b.state == BufferState::in_use;
            cached += !b.free && b.state == BufferState::cached;
            holes += b.free;
        }
    CHECK(in_use == 3);
    CHECK(cached == 1);
    CHECK(holes >= 2);  // fragmentation shows: a free block between taken ones and the tails
    const std::string json = to_json(snap);
    CHECK(json.find("\"segments\":[") != std::string::npos);
    CHECK(json.find("\"state\":\"free\"") != std::string::npos);
}

namespace {

// The default segment sizes, full size from the first (no growth cap).
ArenaOptions full_size() {
    ArenaOptions o;
    o.min_segment = o.large_segment;
    return o;
}

}  // namespace

TEST_CASE("a large request holds its size rounded to 512 bytes, not its class's (ArenaBuckets' exact_above)") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), full_size()));
    const std::size_t n = (3u << 20) + 1000;
    const std::size_t exact = (3u << 20) + 1024;
    CHECK(ArenaBuckets::size_from_index(ArenaBuckets::index_from_size(n)) == (3u << 20) + (128u << 10));  // its class
    CHECK(pool.bucket_size_for(n) == exact);
    auto h = pool.allocate(n);
    CHECK(h.bucket_size() == exact);
    CHECK(h.buffer().size() == exact);
    const auto s = pool.stats();
    CHECK(s.bytes_allocated == exact);
    CHECK(s.bytes_in_use == exact);
    CHECK(s.segment_free_bytes == s.segment_bytes - exact);
    // Up to exact_above the classes hold.
    CHECK(pool.bucket_size_for(ArenaBuckets::exact_above) == ArenaBuckets::exact_above);
    CHECK(pool.bucket_size_for(600000) == 622592);  // 512 KiB + 3 x 32 KiB
    // Over a backend that does not sub-allocate, the classes hold for every size.
    Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, MockBackend> plain{MockBackend(ledger)};
    CHECK(plain.bucket_size_for(n) == (3u << 20) + (128u << 10));
}

TEST_CASE(
    "released large blocks go back to the arena and merge: three freed blocks serve one of three times their size") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), full_size()));
    const std::size_t hidden = (3u << 20) + 3 * 512;  // not a class size (a class rounds it up to 3.125 MiB)
    auto a = pool.allocate(hidden);
    auto b = pool.allocate(hidden);
    auto c = pool.allocate(hidden);
    auto d = pool.allocate(hidden);  // stays: a, b and c lie between the segment's start and it
    CHECK(ledger->allocations == 1);  // one 20 MiB large segment
    a.release();
    b.release();
    c.release();
    auto s = pool.stats();
    CHECK(s.bytes_cached == 0);  // not cached by the pool: given back to the arena
    CHECK(s.bytes_allocated == hidden);
    CHECK(s.driver_frees == 3);
    CHECK(s.evictions == 0);  // no cap refused them
    CHECK(s.largest_free_block == 3 * hidden);  // merged; the tail after d is smaller
    check_segments(pool.snapshot());
    auto qkv = pool.allocate(3 * hidden);
    CHECK(ledger->allocations == 1);  // no new segment
    CHECK(qkv.buffer().offset() == 0);
    s = pool.stats();
    CHECK(s.segments == 1);
    CHECK(s.hits == 0);
    CHECK(s.misses == 5);
    CHECK(s.failed_allocations == 0);
    CHECK(s.bytes_allocated == 4 * hidden);
    const auto snap = pool.snapshot();
    check_segments(snap);
    std::size_t held = 0;
    for (const auto& buf : snap.buffers) held += buf.bytes_held;
    CHECK(held == snap.stats.bytes_allocated);
}

TEST_CASE("host::ArenaPool's snapshot agrees with its stats after random work") {
    host::ArenaPool pool{HostBackend{}};
    std::mt19937_64 rng(11);
    std::vector<host::ArenaPool::handle> live;
    for (int i = 0; i < 400; ++i) {
        if (!live.empty() && rng() % 3 == 0) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
        else live.push_back(pool.allocate(1 + rng() % (3u << 20)));
        if (i % 97 == 0) pool.trim();
    }
    const auto snap = pool.snapshot();
    CHECK(!snap.segments.empty());
    check_segments(snap);
}

TEST_CASE("segment sizes follow the request: small, large, the request's own above large_limit") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    auto small = pool.allocate(1000);
    CHECK(pool.stats().segment_bytes == 16384);  // small_segment
    auto large = pool.allocate(10000);
    CHECK(pool.stats().segment_bytes == 16384 + 65536);  // large_segment
    auto own = pool.allocate(60000);  // above large_limit, and more than the large segment has left:
    CHECK(own.bucket_size() == 61440);  // a segment of its class's size (61440), rounded to large_round
    CHECK(pool.stats().segment_bytes == 16384 + 65536 + 61440);
    CHECK(own.buffer().offset() == 0);
    CHECK(ledger->allocations == 3);
}

TEST_CASE("a new pool's segments grow with what it holds (growth, min_segment), up to the full size") {
    auto ledger = std::make_shared<Ledger>();
    auto o = tiny();
    o.min_segment = 4096;
    o.growth = 0.5;
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
    std::vector<Arena::handle> hs;
    hs.push_back(pool.allocate(1000));
    CHECK(pool.stats().segment_bytes == 4096);  // min_segment: nothing held yet
    std::size_t last = 4096;
    while (pool.stats().segment_bytes < 4 * 16384) {
        const auto before = pool.stats().segment_bytes;
        hs.push_back(pool.allocate(1000));
        const auto grown = pool.stats().segment_bytes - before;
        if (grown == 0) continue;
        CHECK(grown <= std::max<std::size_t>(4096, before / 2));  // at most growth x what was held
        CHECK(grown >= last);  // never shrinking while nothing goes back
        CHECK(grown <= 16384);  // never above small_segment
        last = grown;
    }
    CHECK(last == 16384);
}

TEST_CASE("best fit ties go to the oldest segment's lowest offset, the same on every run") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    std::vector<Arena::handle> a, b;  // two full small segments of four 4 KiB blocks each
    for (int i = 0; i < 4; ++i) a.push_back(pool.allocate(4096));
    for (int i = 0; i < 4; ++i) b.push_back(pool.allocate(4096));
    REQUIRE(ledger->allocations == 2);
    const auto* seg_a = &a[0].buffer().segment();
    const auto* seg_b = &b[0].buffer().segment();
    REQUIRE(seg_a != seg_b);
    const std::size_t off_a1 = a[1].buffer().offset(), off_a3 = a[3].buffer().offset();
    const std::size_t off_b1 = b[1].buffer().offset();
    // Free, in an order that is neither age nor address: b1, a3, a1; then into the arena.
    b[1].release();
    a[3].release();
    a[1].release();
    pool.trim();  // the cache goes back; no segment is empty, so none is freed
    REQUIRE(ledger->allocations - ledger->live == 0);
    auto x = pool.allocate(4096);
    auto y = pool.allocate(4096);
    auto z = pool.allocate(4096);
    CHECK(&x.buffer().segment() == seg_a);
    CHECK(x.buffer().offset() == std::min(off_a1, off_a3));
    CHECK(&y.buffer().segment() == seg_a);
    CHECK(y.buffer().offset() == std::max(off_a1, off_a3));
    CHECK(&z.buffer().segment() == seg_b);
    CHECK(z.buffer().offset() == off_b1);
    CHECK(ledger->allocations == 2);
}

#if defined(__unix__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("a fork child abandons the parent's arena (no segment freed, no range touched); its own pool works") {
    auto ledger = std::make_shared<Ledger>();
    auto pool = std::make_unique<Arena>(SubAllocated<MockBackend>(MockBackend(ledger), tiny()));
    auto kept = pool->allocate(3000);
    { auto cached = pool->allocate(5000); }  // a cached block too
    REQUIRE(ledger->live == 2);  // a small and a large segment
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);  // a hang shows as SIGALRM
        int code = 0;
        kept.release();  // the parent's block: its range is not given back here
        pool.reset();  // the parent's pool: abandoned, its segments never freed
        if (ledger->live != 2) code = 3;
        auto child_ledger = std::make_shared<Ledger>();
        {
            Arena fresh(SubAllocated<MockBackend>(MockBackend(child_ledger), tiny()));
            auto a = fresh.allocate(3000);
            auto b = fresh.allocate(3000);
            if (!a || !b || child_ledger->allocations != 1 || &a.buffer().segment() != &b.buffer().segment()) code = 4;
        }
        if (child_ledger->live != 0) code = 5;  // the child's own pool frees its segments
        _exit(code);  // no exit handlers: the parent's state is not the child's to tear down
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO("child killed by signal ", (WIFSIGNALED(status) ? WTERMSIG(status) : 0), " (14 = SIGALRM: a hang)");
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 3: the parent's segments freed in the child; 4, 5: the child's pool failed
    kept.release();  // the parent goes on as before
    CHECK(pool->allocate(3000));
    pool.reset();
    CHECK(ledger->live == 0);
}
#endif

TEST_CASE("a large block released and asked for again at its size gets its kept view back: no new view made") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), full_size()));
    const std::size_t n = (3u << 20) + 1000;  // above exact_above: given back to the arena on release
    auto keep = pool.allocate(n);
    auto a = pool.allocate(n);
    const std::byte* data = a.buffer().data();
    const std::size_t offset = a.buffer().offset();
    CHECK(ledger->sub_ranges == 2);
    a.release();
    auto s = pool.stats();
    CHECK(s.sub_buffers_cached == 1);
    CHECK(ledger->live_views == 2);  // keep's, and a's kept idle with the segment
    auto b = pool.allocate(n);
    CHECK(b.buffer().offset() == offset);
    CHECK(b.buffer().data() == data);
    CHECK(b.buffer().size() == b.bucket_size());
    CHECK(ledger->sub_ranges == 2);  // no call to the parent
    s = pool.stats();
    CHECK(s.sub_buffers_made == 2);
    CHECK(s.sub_buffers_reused == 1);
    CHECK(s.sub_buffers_cached == 0);
    // With cached_views = 0 every carve makes its view.
    auto plain_ledger = std::make_shared<Ledger>();
    ArenaOptions o = full_size();
    o.cached_views = 0;
    Arena plain(SubAllocated<MockBackend>(MockBackend(plain_ledger), o));
    plain.allocate(n).release();
    CHECK(plain.stats().sub_buffers_cached == 0);
    CHECK(plain_ledger->live_views == 0);
    auto c = plain.allocate(n);
    CHECK(plain_ledger->sub_ranges == 2);
    CHECK(plain.stats().sub_buffers_reused == 0);
}

TEST_CASE("a carve over a kept view of another range releases that view before its own is made") {
    auto ledger = std::make_shared<Ledger>();
    Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), full_size()));
    auto a = pool.allocate(3u << 20);
    const std::size_t offset = a.buffer().offset();
    a.release();
    REQUIRE(pool.stats().sub_buffers_cached == 1);
    REQUIRE(ledger->live_views == 1);
    auto b = pool.allocate(2u << 20);  // best fit: the same free range, from its start: over a's kept view
    CHECK(b.buffer().offset() == offset);
    CHECK(ledger->live_views_at_sub_range == 0);  // a's view was gone when b's was made
    CHECK(ledger->live_views == 1);
    const auto s = pool.stats();
    CHECK(s.sub_buffers_cached == 0);
    CHECK(s.sub_buffers_made == 2);
    CHECK(s.sub_buffers_reused == 0);
}

TEST_CASE("kept views are bounded per segment, go with trim() and with the pool") {
    auto ledger = std::make_shared<Ledger>();
    {
        Arena pool(SubAllocated<MockBackend>(MockBackend(ledger), full_size()));
        std::vector<Arena::handle> hs;
        for (int i = 0; i < 18; ++i) hs.push_back(pool.allocate((1u << 20) + 512));  // one 20 MiB segment
        REQUIRE(pool.stats().segments == 1);
        auto last = std::move(hs.back());  // keeps the segment from being empty
        hs.pop_back();
        for (std::size_t i = 0; i < hs.size(); i += 2) hs[i].release();  // 9 blocks apart: 9 views kept
        CHECK(pool.stats().sub_buffers_cached == 9);
        hs.clear();  // 8 more: at most 16 kept, the oldest released
        CHECK(pool.stats().sub_buffers_cached == 16);
        CHECK(ledger->live_views == 17);  // 16 kept and last's
        pool.trim();
        CHECK(pool.stats().sub_buffers_cached == 0);
        CHECK(ledger->live_views == 1);
        CHECK(pool.stats().segments == 1);  // last is still there
        last.release();
        CHECK(pool.stats().sub_buffers_cached == 1);
        CHECK(ledger->live_views == 1);
    }
    CHECK(ledger->live_views == 0);  // the pool's last kept view went with it
    CHECK(ledger->live == 0);
}

namespace {

// Every view alive now, by origin; a view made over the bytes of one still
// alive is counted. `on_release` runs (once) as a view is released, before
// it is gone: there a test carves from another thread, to see whether that
// carve can make its view while the released one still covers its bytes.
struct ViewRegistry {
    std::mutex mutex;
    std::map<const std::byte*, std::size_t> live;
    long overlaps = 0;
    std::function<void(const std::byte*)> on_release;
};

class TrackedRange : public HostRange {
public:
    TrackedRange() noexcept = default;
    TrackedRange(std::byte* data, std::size_t n, ViewRegistry* registry = nullptr)
        : HostRange(data, n), registry_(registry) {
        if (!registry_) return;  // a fallback's whole buffer
        std::lock_guard lock(registry_->mutex);
        auto next = registry_->live.lower_bound(data);
        if (next != registry_->live.end() && next->first < data + n) ++registry_->overlaps;
        if (next != registry_->live.begin() && std::prev(next)->first + std::prev(next)->second > data)
            ++registry_->overlaps;
        registry_->live[data] = n;
    }
    TrackedRange(TrackedRange&& o) noexcept
        : HostRange(std::move(static_cast<HostRange&>(o))), registry_(std::exchange(o.registry_, nullptr)) {}
    TrackedRange& operator=(TrackedRange&& o) noexcept {
        if (this != &o) {
            drop();
            static_cast<HostRange&>(*this) = std::move(static_cast<HostRange&>(o));
            registry_ = std::exchange(o.registry_, nullptr);
        }
        return *this;
    }
    ~TrackedRange() { drop(); }

private:
    void drop() noexcept {
        if (!registry_) return;
        if (auto hook = std::exchange(registry_->on_release, nullptr)) hook(data());
        std::lock_guard lock(registry_->mutex);
        registry_->live.erase(data());
        registry_ = nullptr;
    }
    ViewRegistry* registry_ = nullptr;
};

// Host memory whose views are tracked in a ViewRegistry.
class TrackingBackend {
public:
    using memory_type = HostMemory;
    using sub_memory_type = TrackedRange;
    static constexpr BackendAbilities abilities = BackendAbility::none;

    explicit TrackingBackend(ViewRegistry* registry) noexcept : registry_(registry) {}
    std::size_t max_alloc_size() const noexcept { return host_.max_alloc_size(); }
    bool unified_memory() const noexcept { return false; }
    const char* name() const noexcept { return "tracking"; }
    Allocation<HostMemory> allocate(std::size_t n, MemoryKind k) noexcept { return host_.allocate(n, k); }
    std::size_t sub_alignment() const noexcept { return 64; }
    Allocation<TrackedRange> sub_range(const HostMemory& segment, std::size_t offset, std::size_t n) noexcept {
        try {
            return {TrackedRange(segment.data() + offset, n, registry_), AllocStatus::ok, 0};
        } catch (...) {
            return {TrackedRange(), AllocStatus::failed, -1};
        }
    }
    static TrackedRange whole_range(const HostMemory& m, std::size_t n) noexcept { return TrackedRange(m.data(), n); }

private:
    ViewRegistry* registry_;
    HostBackend host_{64};
};

using Tracked = SubAllocated<TrackingBackend>;

Tracked::memory_type carve(Tracked& arena, std::size_t n) {
    auto got = arena.allocate_held(n, MemoryKind::device_local);
    if (got.status != AllocStatus::ok) got = arena.allocate(n, MemoryKind::device_local);
    REQUIRE(got.status == AllocStatus::ok);
    return std::move(got.memory);
}

// As the next view is released, another thread carves `n` bytes (given time
// to finish, or to wait while the arena's lock is held); joined by finish().
struct CarveWhileReleasing {
    Tracked& arena;
    ViewRegistry& registry;
    std::thread worker;
    Tracked::memory_type carved;

    void arm(std::size_t n) {
        registry.on_release = [this, n](const std::byte*) {
            std::promise<void> done;
            auto finished = done.get_future();
            worker = std::thread([this, n, done = std::move(done)]() mutable {
                carved = carve(arena, n);
                done.set_value();
            });
            (void)finished.wait_for(std::chrono::milliseconds(500));
        };
    }
    void finish() {
        REQUIRE(worker.joinable());  // the hook ran
        worker.join();
    }
};

}  // namespace

TEST_CASE("a released kept view is gone before another thread can carve over its bytes") {
    ViewRegistry registry;
    ArenaOptions o = tiny();
    SUBCASE("a kept view pushed out by a newer one") {
        o.cached_views = 1;
        Tracked arena(TrackingBackend(&registry), o);
        auto a = carve(arena, 8192);  // one large segment: a at 0, then live separators
        auto sep = carve(arena, 8192);
        auto b = carve(arena, 8192);
        auto rest = carve(arena, 8192);
        a = {};  // kept
        CarveWhileReleasing race{arena, registry, {}, {}};
        race.arm(8000);  // a's range, not a's size: a view of its own
        b = {};  // kept: a's view goes
        race.finish();
        CHECK(race.carved.offset() == 0);
        CHECK(registry.overlaps == 0);
    }
    SUBCASE("a kept view a carve overlaps") {
        Tracked arena(TrackingBackend(&registry), o);
        auto a = carve(arena, 16384);
        auto sep = carve(arena, 8192);
        a = {};  // kept
        CarveWhileReleasing race{arena, registry, {}, {}};
        race.arm(8192);  // the second half of a's range
        auto first = carve(arena, 8192);  // the first half: a's view goes
        race.finish();
        CHECK(first.offset() == 0);
        CHECK(race.carved.offset() == 8192);
        CHECK(registry.overlaps == 0);
    }
    SUBCASE("kept views released by trim") {
        Tracked arena(TrackingBackend(&registry), o);
        auto a = carve(arena, 8192);
        auto sep = carve(arena, 8192);
        a = {};  // kept
        CarveWhileReleasing race{arena, registry, {}, {}};
        race.arm(8000);
        arena.release_empty();
        race.finish();
        CHECK(race.carved.offset() == 0);
        CHECK(registry.overlaps == 0);
    }
    SUBCASE("no views kept: a block's view goes before its range") {
        o.cached_views = 0;
        Tracked arena(TrackingBackend(&registry), o);
        auto a = carve(arena, 8192);
        auto sep = carve(arena, 8192);
        CarveWhileReleasing race{arena, registry, {}, {}};
        race.arm(8000);
        a = {};
        race.finish();
        CHECK(registry.overlaps == 0);
    }
    CHECK(registry.live.empty());
}

namespace {

// Host memory whose next segment allocation first runs `before_segment`
// (once): there a test frees a block, as another thread may between the
// pool's failed carve and the new segment.
struct SegmentHookHost : HostBackend {
    std::function<void()>* before_segment = nullptr;
    Allocation<HostMemory> allocate(std::size_t n, MemoryKind k) noexcept {
        if (before_segment && *before_segment) std::exchange(*before_segment, nullptr)();
        return HostBackend::allocate(n, k);
    }
};

}  // namespace

TEST_CASE("a new segment carves the request itself, even if a fitting range was freed while it was made") {
    std::function<void()> hook;
    SegmentHookHost parent;
    parent.before_segment = &hook;
    SubAllocated<SegmentHookHost> arena(parent, tiny());
    auto take = [&](std::size_t n) {
        auto got = arena.allocate_held(n, MemoryKind::device_local);
        if (got.status != AllocStatus::ok) got = arena.allocate(n, MemoryKind::device_local);
        REQUIRE(got.status == AllocStatus::ok);
        return std::move(got.memory);
    };
    auto a = take(4096);  // one small segment (16 KiB), full
    auto b = take(4096);
    auto c = take(4096);
    auto d = take(4096);
    REQUIRE(arena.allocate_held(4096, MemoryKind::device_local).status == AllocStatus::out_of_memory);
    hook = [&] { a = {}; };  // a's range is free by the time the new segment is added
    auto got = arena.allocate(4096, MemoryKind::device_local);
    REQUIRE(got.status == AllocStatus::ok);
    CHECK(got.memory.segment().data() != b.segment().data());  // carved from the new segment
    std::vector<SegmentInfo> segments;
    arena.add_segments(segments);
    REQUIRE(segments.size() == 2);
    for (const auto& s : segments) CHECK(s.free_bytes < s.bytes);  // neither sits empty
    CHECK(arena.allocate_held(4096, MemoryKind::device_local).status == AllocStatus::ok);  // a's range serves the next
}

TEST_CASE("two pools built from one SubAllocated value each carve, count and trim their own arena") {
    auto ledger = std::make_shared<Ledger>();
    const SubAllocated<MockBackend> shared_options(MockBackend(ledger), tiny());
    Arena first(shared_options);
    Arena second(shared_options);
    CHECK(second.backend().granularity() == 64);  // the options came along
    {
        auto big = first.allocate(2u << 20);  // above 1 MiB: a segment of its own, back to the arena on release
        CHECK(first.stats().segments == 1);
        CHECK(second.stats().segments == 0);  // not the other pool's
        std::vector<SegmentInfo> seen;
        second.backend().add_segments(seen);
        CHECK(seen.empty());
        auto other = second.allocate(2u << 20);
        CHECK(second.stats().segments == 1);
        CHECK(first.stats().segments == 1);
    }
    CHECK(first.stats().segments == 1);  // empty, kept
    second.trim();  // frees second's empty segment only
    CHECK(first.stats().segments == 1);
    CHECK(second.stats().segments == 0);
    CHECK(ledger->live == 1);
    first.trim();
    CHECK(ledger->live == 0);
}

TEST_CASE("a copy of a SubAllocated is a fresh arena: the original's blocks stay carved from the original's") {
    auto ledger = std::make_shared<Ledger>();
    SubAllocated<MockBackend> a(MockBackend(ledger), tiny());
    auto block = a.allocate(1000, MemoryKind::device_local);
    REQUIRE(block.status == AllocStatus::ok);
    SubAllocated<MockBackend> b = a;
    PoolStats sa, sb;
    a.add_stats(sa);
    b.add_stats(sb);
    CHECK(sa.segments == 1);
    CHECK(sb.segments == 0);
    b = a;  // assignment too
    sb = PoolStats{};
    b.add_stats(sb);
    CHECK(sb.segments == 0);
    CHECK(b.release_empty() == 0);
    sa = PoolStats{};
    a.add_stats(sa);
    CHECK(sa.segments == 1);
}

// A 64 KiB block cached, then 1.5 MB, 12 MiB and 3 MiB blocks (large segments), then 300000 bytes
// (a small request). With 17659712 bytes of device the 3 MiB block's segment is a little larger than
// the request (a quarter of what is held), and no small segment fits beside it: the small request
// used to fail with 375296 bytes free in that segment, where 65536 bytes less device served the
// whole sequence (the 3 MiB segment at its own size, then a small segment of exactly 300032).
TEST_CASE("under pressure the arena carves a request from the other kind's free space before it fails") {
    for (const long capacity : {17594176L, 17659712L}) {
        CAPTURE(capacity);
        auto ledger = std::make_shared<Ledger>();
        ledger->capacity = capacity;
        Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<MockBackend>> pool{
            SubAllocated<MockBackend>(MockBackend(ledger))};
        REQUIRE(pool.backend().granularity() == 512);
        pool.allocate(65536).release();
        auto a = pool.allocate(1500000);
        auto b = pool.allocate(12582912);
        auto c = pool.allocate(3145728);
        decltype(pool)::handle d;
        CHECK_NOTHROW(d = pool.allocate(300000));
        CHECK(ledger->live_bytes <= capacity);
    }
}

namespace {
// Host memory whose views are a pointer and a size, declared free (as SVM's and offsets' are).
struct FreeViewHost : HostBackend {
    static constexpr bool views_are_free = true;
    using HostBackend::HostBackend;
};
using FreeViewArena = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<FreeViewHost>>;
}  // namespace

TEST_CASE("a parent with free views gets ArenaOptions::for_free_views when given no options") {
    FreeViewArena pool{FreeViewHost{}};
    auto small = pool.allocate(1000);
    auto large = pool.allocate(40000);
    CHECK(pool.stats().segments == 1);  // one kind of segment: the small block does not get one of its own
    CHECK(pool.stats().sub_buffers_made == 0);
    SubAllocated<HostBackend> plain{HostBackend{}};
    auto x = plain.allocate(1000, MemoryKind::device_local);
    auto y = plain.allocate(2u << 20, MemoryKind::device_local);
    PoolStats s;
    plain.add_stats(s);
    CHECK(s.segments == 2);  // ArenaOptions{}: small and large segments apart
}

// docs/ARENA.md, "Free views": a pool with little live holds at most live plus its first segment
// (min_segment, 64 KiB), here on a cache grown a token at a time and a step's temporaries.
TEST_CASE("a small free-view arena holds at most its live bytes plus one first segment") {
    FreeViewArena pool{FreeViewHost{}};
    std::size_t live = 0, peak_live = 0;
    FreeViewArena::handle cache;
    for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t tokens = 1; tokens <= 64; ++tokens) {
            std::vector<FreeViewArena::handle> temps;
            for (int i = 0; i < 3; ++i) temps.push_back(pool.allocate(1024));
            auto grown = pool.allocate(tokens * 1024);
            live = 3 * 1024 + tokens * 1024 + cache.nbytes();
            peak_live = std::max(peak_live, live);
            cache = std::move(grown);
            temps.push_back(pool.allocate(tokens * 256));
            peak_live = std::max(peak_live, live - (tokens - 1) * 1024 + tokens * 256);
        }
        cache = {};
    }
    const auto s = pool.stats();
    CAPTURE(peak_live);
    CHECK(s.peak_segment_bytes <= peak_live + ArenaOptions{}.min_segment);
}
