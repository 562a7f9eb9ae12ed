// Pool::snapshot(): every buffer, its state, sizes, age and tag; the buffers add up to stats() read with them.
#include "pool_factory.hpp"
#include "cl_events.hpp"

#include <clpool/core/snapshot_json.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

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

// Before, nothing set BufferInfo::uses: every buffer said 0, in the JSON too.
TEST_CASE("snapshot: a buffer's uses count its hand-outs from the shared lists, the first included") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    pool->allocate(256).release();  // made: the first use
    auto h = pool->allocate(256);   // a hit of the same buffer: the second
    const auto snap = pool->snapshot();
    REQUIRE(snap.buffers.size() == 1);
    CHECK(snap.buffers[0].uses == 2);
    CHECK(to_json(snap).find("\"uses\":2") != std::string::npos);
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
