// Pool::snapshot(): every buffer, its state, sizes, age and tag; the buffers add up to stats() read with them,
// a sub-allocating pool's segments too while other threads carve; a fork child reads a parent's pool without its locks.
#include "pool_factory.hpp"
#include "cl_events.hpp"
#include "sanitizers.hpp"

#include <clpool/diagnostics/snapshot_json.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
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

// Sums a snapshot's buffers per state and checks them against its stats,
// bucket by bucket too.
void check_totals(const PoolSnapshot& snap) {
    std::size_t in_use = 0, cached = 0, pending = 0, requested = 0;
    for (const auto& b : snap.buffers) {
        CHECK(b.bytes_held >= b.bytes_requested);
        CHECK(b.made_ns <= snap.taken_ns);
        if (b.state == BufferState::in_use) in_use += b.bytes_held;
        if (b.state == BufferState::cached) cached += b.bytes_held;
        if (b.state == BufferState::pending) pending += b.bytes_held;
        requested += b.bytes_requested;
    }
    const auto& s = snap.stats;
    CHECK(in_use == s.bytes_in_use);
    CHECK(cached == s.bytes_cached);
    CHECK(pending == s.bytes_pending);
    CHECK(requested == s.bytes_requested);
    CHECK(in_use + cached + pending == s.bytes_allocated);
    for (const auto& bs : s.buckets) {
        std::size_t u = 0, c = 0, p = 0;
        for (const auto& b : snap.buffers) {
            if (b.bucket_size != bs.bucket_size) continue;
            u += b.state == BufferState::in_use;
            c += b.state == BufferState::cached;
            p += b.state == BufferState::pending;
        }
        CHECK(u == bs.in_use_buffers);
        CHECK(c == bs.cached_buffers);
        CHECK(p == bs.pending_buffers);
    }
}

}  // namespace

TEST_CASE_TEMPLATE("snapshot lists every buffer with its state and tag, and agrees with its stats", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<8, Striped<4>>>) {
    auto pool = make_pool<P>();
    std::vector<typename P::handle> kept;
    for (std::size_t n : {100u, 1000u, 5000u, 5000u, 70000u}) kept.push_back(pool->allocate(n));
    kept[2].set_tag("activations");
    CHECK(std::string(kept[2].tag()) == "activations");
    std::vector<typename P::handle> gone;
    for (std::size_t n : {1000u, 1000u, 300000u}) gone.push_back(pool->allocate(n));
    gone.clear();  // cached (in a magazine, with ThreadCached)

    const auto snap = pool->snapshot();
    CHECK(snap.pool == std::string("mock"));
    CHECK(snap.buffers.size() == 8);
    check_totals(snap);
    std::size_t tagged = 0, idle = 0;
    for (const auto& b : snap.buffers) {
        if (b.tag == "activations") {
            ++tagged;
            CHECK(b.state == BufferState::in_use);
            CHECK(b.bytes_requested == 5000);
            CHECK(b.bytes_held == 8192);
        }
        idle += b.state == BufferState::cached;
    }
    CHECK(tagged == 1);
    CHECK(idle == 3);
    CHECK(snap.buffers.front().state == BufferState::in_use);

    // A hand-out clears the last holder's tag.
    kept[2].release();
    auto again = pool->allocate(5000);
    CHECK(again.tag() == nullptr);
    check_totals(pool->snapshot());

    pool->trim();
    const auto trimmed = pool->snapshot();
    check_totals(trimmed);
    CHECK(trimmed.buffers.size() == 5);
}

TEST_CASE("snapshot: the logical hand-out clock orders the last hand-outs") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    auto a = pool->allocate(64);
    auto b = pool->allocate(64);
    a.set_tag("a");
    b.set_tag("b");
    const auto snap = pool->snapshot();
    REQUIRE(snap.buffers.size() == 2);
    const auto& first = snap.buffers[0].tag == "a" ? snap.buffers[0] : snap.buffers[1];
    const auto& second = snap.buffers[0].tag == "a" ? snap.buffers[1] : snap.buffers[0];
    CHECK(first.handout_seq < second.handout_seq);
    CHECK(second.handouts_since == 0);
    CHECK(first.handouts_since == 1);
}

// BufferInfo::uses counts a buffer's hand-outs, so a snapshot (and its JSON) tells a reused buffer from a fresh one.
TEST_CASE("snapshot: a buffer's uses count its hand-outs from the shared lists, the first included") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    pool->allocate(256).release();  // made: the first use
    auto h = pool->allocate(256);  // a hit of the same buffer: the second
    const auto snap = pool->snapshot();
    REQUIRE(snap.buffers.size() == 1);
    CHECK(snap.buffers[0].uses == 2);
    CHECK(to_json(snap).find("\"uses\":2") != std::string::npos);
}

// Hand-outs from a ThreadCached magazine do not move a buffer's logical clock (handout_seq,
// handouts_since), as documented; nor may they later, when the magazine is emptied (its thread's
// exit, trim()) and its hits are added to the stripe's hit count.
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

TEST_CASE("to_json writes the versioned schema with every buffer, and escapes tags") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    auto a = pool->allocate(64);
    a.set_tag("quote\" back\\ nl\n");
    pool->allocate(4096).release();
    const std::string j = to_json(pool->snapshot());
    CHECK(j.find("\"schema\":\"clpool.snapshot\",\"version\":2,") != std::string::npos);
    CHECK(j.find("\"tag\":\"quote\\\" back\\\\ nl\\u000a\"") != std::string::npos);
    CHECK(j.find("\"state\":\"in_use\"") != std::string::npos);
    CHECK(j.find("\"state\":\"cached\"") != std::string::npos);
    CHECK(j.find("\"out_of_memory\":null") != std::string::npos);
    CHECK(!write_snapshot("/nonexistent-dir/x.json", ProcessSnapshot{}));
}

// docs/OBSERVABILITY.md writes what pool.snapshot() returns with write_snapshot(path, snapshot),
// as to_json has both overloads: a pool's snapshot, not only a ProcessSnapshot.
TEST_CASE("write_snapshot writes one pool's snapshot, as to_json does") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    auto h = pool->allocate(100);
    h.set_tag("written");
    const auto snap = pool->snapshot();
    const char* path = "clpool_test_write_snapshot_pool.json";
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

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("snapshot reports a buffer released with running events as pending, and agrees with stats") {
    auto pool = make_pool<BufferPool>();
    Gate gate;
    auto h = pool->allocate(4096);
    h.set_tag("staging");
    auto in_use = pool->allocate(100);
    h.release_after(&gate.event, 1);
    auto snap = pool->snapshot();
    check_totals(snap);
    REQUIRE(snap.buffers.size() == 2);
    CHECK(snap.buffers[1].state == BufferState::pending);
    CHECK(snap.buffers[1].tag == "staging");
    gate.open();
    (void)pool->allocate(4096);  // reaps it
    check_totals(pool->snapshot());
}
#endif

TEST_CASE(
    "out_of_memory::what() names what was asked, the ten largest live buffers with tags, what was given "
    "back and the fragmentation; CLPOOL_OOM_SNAPSHOT gets the snapshot") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    P pool{MockBackend(ledger)};
    std::vector<P::handle> live;
    static const char* const tags[] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11"};
    for (std::size_t i = 0; i < 12; ++i) {
        live.push_back(pool.allocate(1000 * (i + 1) + 1));
        live.back().set_tag(tags[i]);
    }
    pool.allocate(8192).release();  // cached: given back before the retry
    const std::string path = "clpool_test_oom_snapshot.json";
    std::remove(path.c_str());
    ::setenv("CLPOOL_OOM_SNAPSHOT", path.c_str(), 1);
    ledger->fail_from = ledger->attempts.load();
    ledger->fail_count = 2;
    std::string what;
    try {
        (void)pool.allocate(100'000);
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
    }
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
    INFO(what);
    CHECK(what.find("asked: 100000 bytes (the driver was asked for 131072)") != std::string::npos);
    CHECK(what.find("given back before the retry: 8192 bytes") != std::string::npos);
    CHECK(what.find("live: 12 buffers") != std::string::npos);
    CHECK(what.find("fragmentation: ") != std::string::npos);
    CHECK(what.find("1. 16384 bytes held, 12001 asked, tag 't11'") != std::string::npos);
    CHECK(what.find("10. ") != std::string::npos);
    CHECK(what.find("11. ") == std::string::npos);
    CHECK(what.find("tag 't0'") == std::string::npos);  // the smallest are left out
    CHECK(what.find("snapshot written to " + path) != std::string::npos);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string json(1 << 16, '\0');
    json.resize(std::fread(json.data(), 1, json.size(), f));
    std::fclose(f);
    std::remove(path.c_str());
    CHECK(json.find("\"out_of_memory\":{\"pool\":\"mock\",\"requested\":100000,\"bucket_size\":131072,"
                    "\"cached_given_back\":8192") != std::string::npos);
    CHECK(json.find("\"tag\":\"t11\"") != std::string::npos);

    // A dump that cannot be written is said, and the error is still out_of_memory.
    ::setenv("CLPOOL_OOM_SNAPSHOT", "/nonexistent-dir/oom.json", 1);
    ledger->fail_from = ledger->attempts.load();
    CHECK_THROWS_WITH_AS((void)pool.allocate(100'000),
                         doctest::Contains("could not write the snapshot to /nonexistent-dir/oom.json"), out_of_memory);
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
}

// A miss on another thread carves from the arena without the pool's locks, so snapshot() must read
// a sub-allocating pool's segment list and its segment counters under one hold of the arena's lock:
// OBSERVABILITY.md says its segments and its stats (segment_free_bytes, largest_free_block) agree.
TEST_CASE("snapshot of a sub-allocating pool: its segments agree with its stats while other threads carve") {
    using P = MockArenaPool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    auto o = small_arena_options();
    o.max_free_fraction = 0.5;  // segments come and go
    o.release_before_new_peak = true;
    P pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t)
        workers.emplace_back([&, t] {
            std::vector<P::handle> mine;
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

// A parent thread may hold a pool's locks at the fork, and the child has no thread to let them
// go: stats() and snapshot() in the child must not take them (they report the pool as empty),
// and record_history() is refused as allocate() is, before any lock.
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
