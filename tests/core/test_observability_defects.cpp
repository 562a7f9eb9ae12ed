// Defects found in the observability core (snapshots, their JSON, out-of-memory forensics), one case each: each fails on the code before its fix.
#include "alloc_counter.hpp"
#include "pool_factory.hpp"
#include "sanitizers.hpp"

#include <clpool/core/snapshot_json.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace clpool;
using namespace clpool::test;

namespace {

using DefectsArena = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<MockBackend>>;

ArenaOptions defects_tiny_arena() {
    ArenaOptions o;
    o.granularity = 64;
    o.small_limit = 4096;
    o.small_segment = 16384;
    o.large_segment = 65536;
    o.large_limit = 32768;
    o.large_round = 4096;
    o.min_segment = 65536;
    o.max_free_fraction = 1.0;  // keep empty segments until the driver runs out
    o.release_before_new_peak = false;
    return o;
}

}  // namespace

// Defect: a sub-allocating pool gives its cache back (to the arena) before it
// asks the driver for a new segment (Pool::obtain), so by the time of the
// out-of-memory retry's trim nothing is cached: what() and the dump's
// cached_given_back said "given back before the retry: 0 bytes" although the
// pool had just given back all of its cached bytes.
TEST_CASE("out_of_memory of a sub-allocating pool counts the cache it gave back before the retry") {
    auto ledger = std::make_shared<Ledger>();
    ledger->capacity = 65536;  // one large segment
    DefectsArena pool(SubAllocated<MockBackend>(MockBackend(ledger), defects_tiny_arena()));
    pool.allocate(40000).release();  // a cached block of 40960 bytes
    REQUIRE(pool.stats().bytes_cached == 40960);
    std::string what;
    try {
        (void)pool.allocate(70000);  // a segment of its own, which the device cannot hold
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("given back before the retry: 40960 bytes") != std::string::npos);
}

// Defect: hand-outs from a ThreadCached magazine are documented not to move
// a buffer's logical clock (handout_seq, handouts_since). They did, late:
// when a magazine was emptied (its thread's exit, trim()), its hits were
// added to the stripe's hit count, which is the clock, so every buffer's
// handouts_since jumped by them.
TEST_CASE("snapshot: a magazine's hand-outs do not move handouts_since, even once the magazine is emptied") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>;
    auto pool = make_pool<P>();
    auto held = pool->allocate(64);  // a miss: the stripe's first hand-out
    held.set_tag("held");
    std::thread([&] {
        for (int i = 0; i < 10; ++i) pool->allocate(64).release();  // one miss, then hits from its magazine
    }).join();  // its magazine goes back to the shared lists
    const auto snap = pool->snapshot();
    CHECK(snap.stats.hits == 9);  // the magazine's hits still count as hits
    const BufferInfo* info = nullptr;
    for (const auto& b : snap.buffers)
        if (b.tag == "held") info = &b;
    REQUIRE(info);
    CHECK(info->handouts_since == 1);  // the other thread's miss; its magazine hits are not hand-outs of the stripe
}

// Defect: Pool::snapshot() read a sub-allocating pool's segment list
// (add_segments) and its segment counters (add_stats) under two separate
// holds of the arena's lock. A miss on another thread carves from the arena
// without the pool's locks, so a carve in between made the snapshot's own
// segments disagree with its stats (segment_free_bytes, largest_free_block),
// which OBSERVABILITY.md says agree.
TEST_CASE("snapshot of a sub-allocating pool: its segments agree with its stats while other threads carve") {
    auto ledger = std::make_shared<Ledger>();
    auto o = defects_tiny_arena();
    o.max_free_fraction = 0.5;  // segments come and go
    o.release_before_new_peak = true;
    DefectsArena pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t)
        workers.emplace_back([&, t] {
            std::vector<DefectsArena::handle> mine;
            std::size_t n = 64 + 512 * static_cast<std::size_t>(t);
            while (!stop.load(std::memory_order_relaxed)) {
                n = (n * 7 + 4099) % 20000 + 64;
                mine.push_back(pool.allocate(n));
                if (mine.size() > 6) {
                    mine.clear();
                    pool.trim();  // the next allocations are misses: carves
                }
            }
        });
    int disagree = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until && disagree == 0) {
        const auto snap = pool.snapshot();
        std::size_t free_bytes = 0, largest = 0, bytes = 0;
        for (const auto& seg : snap.segments) {
            free_bytes += seg.free_bytes;
            largest = std::max(largest, seg.largest_free);
            bytes += seg.bytes;
        }
        disagree += snap.segments.size() != snap.stats.segments || bytes != snap.stats.segment_bytes ||
                    free_bytes != snap.stats.segment_free_bytes || largest != snap.stats.largest_free_block;
    }
    stop = true;
    for (auto& w : workers) w.join();
    CHECK(disagree == 0);
}

// Defect: OBSERVABILITY.md (and the include comment of its first example)
// has write_snapshot(path, snapshot) for what pool.snapshot() returns, as
// to_json has both overloads; write_snapshot took a ProcessSnapshot only,
// so writing a pool's snapshot did not compile.
TEST_CASE("write_snapshot writes one pool's snapshot, as to_json does") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    auto h = pool->allocate(100);
    h.set_tag("written");
    const auto snap = pool->snapshot();
    const char* path = "clpool_test_observability_defects_pool.json";
    std::remove(path);
    REQUIRE(write_snapshot(path, snap));
    std::FILE* f = std::fopen(path, "rb");
    REQUIRE(f);
    std::string text(1 << 16, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), f));
    std::fclose(f);
    std::remove(path);
    CHECK(text == to_json(snap));
    CHECK(!write_snapshot("/nonexistent-dir/x.json", snap));
}

// Defect: the CLPOOL_OOM_SNAPSHOT dump was written in place (fopen "wb",
// fwrite). Out-of-memories on two threads at once (two pools here) each
// truncated and wrote the same file: a short snapshot over the start of a
// longer one left the longer one's tail after it, not JSON, while both
// what() said "snapshot written to".
TEST_CASE("CLPOOL_OOM_SNAPSHOT: out-of-memories on two threads at once leave one whole snapshot") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    const char* path = "clpool_test_observability_defects_oom_race.json";
    ::setenv("CLPOOL_OOM_SNAPSHOT", path, 1);
    auto la = std::make_shared<Ledger>(), lb = std::make_shared<Ledger>();
    P a{MockBackend(la)}, b{MockBackend(lb)};
    std::vector<P::handle> ka, kb;
    for (std::size_t i = 0; i < 200; ++i) ka.push_back(a.allocate(100 + i));  // a long snapshot
    kb.push_back(b.allocate(100));  // a short one
    la->capacity = la->live_bytes.load();  // the devices are full
    lb->capacity = lb->live_bytes.load();
    int bad = 0;
    for (int round = 0; round < 300 && bad == 0; ++round) {
        std::thread ta([&] {
            for (int i = 0; i < 5; ++i) (void)a.try_allocate(1 << 20);
        });
        std::thread tb([&] {
            for (int i = 0; i < 5; ++i) (void)b.try_allocate(1 << 20);
        });
        ta.join();
        tb.join();
        std::FILE* f = std::fopen(path, "rb");
        REQUIRE(f);
        std::string text(1 << 20, '\0');
        text.resize(std::fread(text.data(), 1, text.size(), f));
        std::fclose(f);
        const auto end = text.find("]}\n");  // the end of the top-level object: the file's end
        bad += end == std::string::npos || end + 3 != text.size();
    }
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
    std::remove(path);
    CHECK(bad == 0);
}

#if CLPOOL_TEST_COUNTS_NEW
// Defect: out_of_memory's forensics came from a whole snapshot(), history
// included: every ring copied under the pool's locks, merged, and each
// event's call site named, for lines that show none of it. Without
// CLPOOL_OOM_SNAPSHOT (the dump, which carries the history) an
// out-of-memory's cost no longer grows with the history: before, the heap
// allocations here grew with the 4096 events recorded (their frames).
TEST_CASE("out_of_memory without CLPOOL_OOM_SNAPSHOT does not gather the history it does not report") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
    auto ledger = std::make_shared<Ledger>();
    P pool{MockBackend(ledger)};
    constexpr std::size_t oom_history_events = 4096;
    pool.record_history(oom_history_events, CallSites::on);
    for (std::size_t i = 0; i < oom_history_events; ++i) pool.allocate(1000).release();
    auto kept = pool.allocate(1000);
    ledger->capacity = ledger->live_bytes.load();  // the device is full
    std::string what;
    std::size_t allocations = 0;
    {
        CountAllocations counting;
        try {
            (void)pool.allocate(1 << 20);
        } catch (const out_of_memory& e) {
            what = e.what();
        }
        allocations = counting.count();
    }
    INFO(what);
    CHECK(what.find("largest live buffers:") != std::string::npos);  // the report is still made
    CHECK(allocations < oom_history_events / 4);
    REQUIRE(pool.snapshot().history);  // a snapshot still carries it
    CHECK(pool.snapshot().history->events.size() == oom_history_events);
}
#endif

#if !CLPOOL_TEST_TSAN  // TSan does not follow a multithreaded parent into a fork child (test_fork_locks.cpp)
namespace {

// Admits everything; a release that finds it armed stays inside admit(), so
// under the pool's stripe lock (and its magazine lock with ThreadCached),
// until let go.
std::atomic<int> obs_fork_hold{0};  // 0 idle, 1 armed, 2 inside admit, 3 let go
struct ObsForkHoldLimits {
    bool admit(std::size_t, std::size_t, std::size_t) const noexcept {
        int armed = 1;
        if (obs_fork_hold.compare_exchange_strong(armed, 2)) {
            obs_fork_hold.notify_all();
            obs_fork_hold.wait(2);
        }
        return true;
    }
    std::size_t max_cached_bytes() const noexcept { return static_cast<std::size_t>(-1); }
};

}  // namespace

// stats() and snapshot() of a parent's pool in a fork child took its locks,
// which a parent thread held at the fork: the child hung.
TEST_CASE_TEMPLATE(
    "fork child: a parent's pool locked at the fork: empty stats(), snapshot(); record_history() refused", L,
    SingleMutex, ThreadCached<4>) {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, ObsForkHoldLimits, L>;
    auto pool = make_pool<P>();
    auto h = pool->allocate(5000);
    obs_fork_hold.store(1);
    std::thread holder([&] { h.release(); });  // stops inside admit(), the pool's locks held
    for (int v = obs_fork_hold.load(); v != 2; v = obs_fork_hold.load()) obs_fork_hold.wait(v);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(5);  // a hang shows as SIGALRM
        const PoolStats s = pool->stats();
        const PoolSnapshot snap = pool->snapshot();
        const bool empty = s.bytes_allocated == 0 && s.misses == 0 && snap.buffers.empty() &&
                           snap.stats.bytes_allocated == 0 && snap.pool == "mock";
        if (!empty) _exit(3);
        try {
            pool->record_history(16);  // refused as allocate() is, before any lock
            _exit(4);
        } catch (const usage_error&) {}
        _exit(0);
    }
    obs_fork_hold.store(3);
    obs_fork_hold.notify_all();
    holder.join();
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    obs_fork_hold.store(0);
    INFO("child killed by signal ", (WIFSIGNALED(status) ? WTERMSIG(status) : 0), " (14 = SIGALRM: a hang)");
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 3: the child saw a non-empty pool; 4: record_history was accepted
    CHECK(pool->stats().bytes_cached == pool->bucket_size_for(5000));  // the parent's pool is untouched
}
#endif
