// Pool::record_history: the events (hit, miss, free, pending, evict, trim, oom) in order with their fields, the ring's
// wrap-around, call sites, CLPOOL_HISTORY, threads recording while another snapshots, and the JSON.
#include "pool_factory.hpp"
#include "cl_events.hpp"

#include <clpool/diagnostics/snapshot_json.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <map>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using namespace clpool::test;

// Call sites are named from the dynamic symbol table (clpool_tests links with
// -rdynamic): these functions have external linkage and are never inlined, so
// that they are the innermost frame of what they record.
#if defined(__clang__)
#define HISTORY_SITE [[gnu::noinline]]
#else
#define HISTORY_SITE [[gnu::noinline, gnu::noipa]]
#endif
// The empty asm after each call keeps it out of tail position: a tail call
// (`jmp` to Handle::release when it is not inlined) would leave no frame of
// release_here on the stack, and the test function would be the innermost.
namespace history_sites {
inline void keep_frame() { asm volatile("" ::: "memory"); }
template <class P>
HISTORY_SITE typename P::handle allocate_here(P& pool, std::size_t n) {
    auto h = pool.allocate(n);
    keep_frame();
    return h;
}
template <class H>
HISTORY_SITE void release_here(H& h) {
    h.release();
    keep_frame();
}
}  // namespace history_sites

namespace {

struct expected {
    HistoryAction action;
    bool hit;
    std::size_t requested, held;
    const char* tag;
};

void check_events(const History& h, std::uintptr_t id, const std::vector<expected>& want) {
    REQUIRE(h.events.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        const auto& e = h.events[i];
        const auto& w = want[i];
        CAPTURE(i);
        CHECK(to_string(e.action) == std::string(to_string(w.action)));
        CHECK(e.hit == w.hit);
        CHECK(e.bytes_requested == w.requested);
        CHECK(e.bytes_held == w.held);
        CHECK(e.tag == std::string(w.tag));
        const bool of_buffer = w.action != HistoryAction::trim && w.action != HistoryAction::oom;
        CHECK(e.id == (of_buffer ? id : 0));
        CHECK(e.bucket_size == (of_buffer ? w.held : 0));
        CHECK(e.frames.empty());  // no call sites asked for
        if (i) CHECK(h.events[i - 1].t_ns <= e.t_ns);
    }
}

// A frame names a function template with its return type first: look for the name.
bool names(const std::string& frame, const char* function) { return frame.find(function) != std::string::npos; }

}  // namespace

TEST_CASE_TEMPLATE("history: hit, miss, free, evict and trim are recorded in order with their fields", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<8, Striped<4>>>, host::BufferPool) {
    auto pool = make_pool<P>();
    const std::uint64_t before = detail::steady_ns();
    pool->record_history(100);
    auto a = pool->allocate(1000);
    a.set_tag("first");
    a.release();
    auto b = pool->allocate(900);
    b.release();
    CHECK(pool->trim() == 1024);
    const auto snap = pool->snapshot();
    REQUIRE(snap.history);
    const History& h = *snap.history;
    CHECK(h.capacity == 100);
    CHECK(h.recorded == 6);
    CHECK(h.dropped == 0);
    REQUIRE(h.events.size() == 6);
    const std::uintptr_t buffer = h.events[0].id;
    CHECK(buffer != 0);
    check_events(h, buffer,
                 {{HistoryAction::alloc, false, 1000, 1024, ""},
                  {HistoryAction::free, false, 1000, 1024, "first"},
                  {HistoryAction::alloc, true, 900, 1024, ""},
                  {HistoryAction::free, false, 900, 1024, ""},
                  {HistoryAction::evict, false, 0, 1024, ""},
                  {HistoryAction::trim, false, 0, 1024, ""}});
    // Time stamps are late by up to a tick of history_clock (1 ms; more when the
    // machine is too busy to run the ticker): a second is far beyond both.
    CHECK(h.events.front().t_ns + 1'000'000'000 >= before);
    CHECK(h.events.back().t_ns <= snap.taken_ns);
    CHECK(snap.buffers.empty());
}

TEST_CASE_TEMPLATE("history: a release the cap refuses is an evict", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, ThreadCached<4>>) {
    auto pool = make_pool<P>(Capped{std::size_t{1} << 20, 1});
    pool->record_history(100);
    auto a = pool->allocate(4096);
    auto b = pool->allocate(4096);
    b.set_tag("second");
    a.release();  // kept: the bucket's one idle buffer
    b.release();  // refused: given back
    const auto h = *pool->snapshot().history;
    REQUIRE(h.events.size() == 4);
    CHECK(h.events[2].action == HistoryAction::free);
    CHECK(h.events[3].action == HistoryAction::evict);
    CHECK(h.events[3].tag == "second");
    CHECK(h.events[3].id == h.events[1].id);
    CHECK(h.events[3].bytes_requested == 4096);
    CHECK(pool->stats().evictions == 1);
}

TEST_CASE("history: the ring keeps the newest events, oldest first, and counts the dropped ones") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    pool->record_history(4);
    for (std::size_t i = 1; i <= 5; ++i) pool->allocate(i * 100).release();  // 10 events: alloc, free, ...
    const auto h = *pool->snapshot().history;
    CHECK(h.capacity == 4);
    CHECK(h.recorded == 10);
    CHECK(h.dropped == 6);
    REQUIRE(h.events.size() == 4);
    CHECK(h.events[0].action == HistoryAction::alloc);
    CHECK(h.events[0].bytes_requested == 400);
    CHECK(h.events[1].action == HistoryAction::free);
    CHECK(h.events[2].bytes_requested == 500);
    CHECK(h.events[3].action == HistoryAction::free);
    CHECK(h.events[3].bytes_requested == 500);

    // Restarting drops what was recorded.
    pool->record_history(8);
    pool->allocate(100).release();
    const auto again = *pool->snapshot().history;
    CHECK(again.recorded == 2);
    CHECK(again.capacity == 8);
}

// Most events wait in a stage of 64 and go to the ring 64 at a time; a tagged
// one goes to the ring at once, after what waits. Either way the history is
// the newest `capacity` events in the order they happened.
TEST_CASE("history: the newest events come back in order whether they waited in the stage or not") {
    struct want_event {
        HistoryAction action;
        std::size_t requested;
        bool tagged;
    };
    for (const std::size_t capacity : {1, 2, 63, 64, 65, 129, 1000}) {
        for (const std::size_t tag_every : {0, 7, 64}) {  // 0: no tags
            CAPTURE(capacity);
            CAPTURE(tag_every);
            auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
            pool->record_history(capacity);
            std::vector<want_event> want;
            for (std::size_t i = 1; i <= 300; ++i) {
                auto h = pool->allocate(i);
                want.push_back({HistoryAction::alloc, i, false});
                const bool tagged = tag_every != 0 && i % tag_every == 0;
                if (tagged) h.set_tag("tagged");
                h.release();
                want.push_back({HistoryAction::free, i, tagged});
            }
            const auto h = *pool->snapshot().history;
            CHECK(h.recorded == want.size());
            const std::size_t kept = std::min(capacity, want.size());
            CHECK(h.dropped == want.size() - kept);
            REQUIRE(h.events.size() == kept);
            for (std::size_t j = 0; j < kept; ++j) {
                const auto& w = want[want.size() - kept + j];
                const auto& e = h.events[j];
                CAPTURE(j);
                CHECK(e.action == w.action);
                CHECK(e.bytes_requested == w.requested);
                CHECK(e.tag == (w.tagged ? "tagged" : ""));
            }
        }
    }
}

TEST_CASE_TEMPLATE("history: off records nothing, and turning it off forgets events and call sites", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>) {
    auto pool = make_pool<P>();
    pool->record_history(0);  // whatever CLPOOL_HISTORY says
    auto a = pool->allocate(100);
    pool->allocate(5000).release();
    auto snap = pool->snapshot();
    CHECK(!snap.history);
    for (const auto& b : snap.buffers) CHECK(b.frames.empty());
    CHECK(to_json(snap).find("\"history\"") == std::string::npos);
    CHECK(to_json(snap).find("\"frames\"") == std::string::npos);

    pool->record_history(16, CallSites::on);
    auto b = pool->allocate(5000);
    CHECK(pool->snapshot().buffers.size() == 2);
    pool->record_history(0);
    b.release();
    snap = pool->snapshot();
    CHECK(!snap.history);
    for (const auto& buf : snap.buffers) CHECK(buf.frames.empty());
}

TEST_CASE_TEMPLATE("history: call sites name the caller, for events and for each buffer's holder", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>) {
    auto pool = make_pool<P>();
    pool->record_history(16, CallSites::on);
    auto a = history_sites::allocate_here(*pool, 3000);
    history_sites::release_here(a);
    auto b = history_sites::allocate_here(*pool, 3000);  // a hit: from the magazine with ThreadCached
    const auto snap = pool->snapshot();
    const auto& h = *snap.history;
    REQUIRE(h.events.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        REQUIRE(!h.events[i].frames.empty());
        INFO(h.events[i].frames[0]);
        CHECK(names(h.events[i].frames[0], i == 1 ? "history_sites::release_here<" : "history_sites::allocate_here<"));
        CHECK(h.events[i].frames.size() >= 2);  // and its callers
    }
    REQUIRE(snap.buffers.size() == 1);
    REQUIRE(!snap.buffers[0].frames.empty());
    INFO(snap.buffers[0].frames[0]);
    CHECK(names(snap.buffers[0].frames[0], "history_sites::allocate_here<"));
    const std::string j = to_json(snap);
    CHECK(j.find("\"frames\":[\"") != std::string::npos);
    CHECK(j.find("history_sites::allocate_here<") != std::string::npos);
}

TEST_CASE("history: an out-of-memory is a trim and an oom event; what() shows the live buffers' call sites") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    P pool{MockBackend(ledger)};
    pool.record_history(64, CallSites::on);
    auto big = history_sites::allocate_here(pool, 50'000);
    big.set_tag("big");
    pool.allocate(8192).release();  // cached: given back before the retry
    ledger->fail_from = ledger->attempts.load();
    ledger->fail_count = 2;
    std::string what;
    try {
        (void)pool.allocate(100'000);
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("1. 65536 bytes held, 50000 asked, tag 'big'") != std::string::npos);
    const auto at = what.find("\n         at ");
    REQUIRE(at != std::string::npos);
    CHECK(names(what.substr(at, what.find('\n', at + 1) - at), "history_sites::allocate_here<"));
    const auto h = *pool.snapshot().history;
    REQUIRE(h.events.size() >= 3);
    const auto& oom = h.events.back();
    CHECK(oom.action == HistoryAction::oom);
    CHECK(oom.bytes_requested == 100'000);
    CHECK(oom.id == 0);
    const auto& trim = h.events[h.events.size() - 2];
    CHECK(trim.action == HistoryAction::trim);
    CHECK(trim.bytes_held == 8192);
    CHECK(h.events[h.events.size() - 3].action == HistoryAction::evict);
}

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("history on OpenCL: a release with running events is pending, then a hit once they complete") {
    auto pool = make_pool<BufferPool>();
    pool->record_history(32, CallSites::on);
    Gate gate;
    auto h = pool->allocate(4096);
    h.set_tag("staging");
    h.release_after(&gate.event, 1);
    gate.open();
    auto again = pool->allocate(4000);
    const auto snap = pool->snapshot();
    const auto& hist = *snap.history;
    REQUIRE(hist.events.size() == 3);
    CHECK(hist.events[0].action == HistoryAction::alloc);
    CHECK(!hist.events[0].hit);
    CHECK(hist.events[1].action == HistoryAction::pending);
    CHECK(hist.events[1].tag == "staging");
    CHECK(hist.events[2].action == HistoryAction::alloc);
    CHECK(hist.events[2].hit);
    CHECK(hist.events[2].id == hist.events[0].id);
    CHECK(hist.events[2].bytes_requested == 4000);
    for (const auto& e : hist.events) CHECK(!e.frames.empty());
    REQUIRE(snap.buffers.size() == 1);
    CHECK(!snap.buffers[0].frames.empty());
}
#endif

TEST_CASE_TEMPLATE("history: threads record while another snapshots; every event is counted once", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4, Striped<4>>>) {
    auto pool = make_pool<P>();
    pool->record_history(256, CallSites::on);
    constexpr int threads = 4, pairs = 2000;
    std::atomic<int> running{threads};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&, t] {
            for (int i = 0; i < pairs; ++i) {
                auto h = pool->allocate(std::size_t{256} << ((t + i) % 6));
                if (i % 7 == 0) h.set_tag("worker");
            }
            running.fetch_sub(1);
        });
    std::uint64_t last = 0;
    int snapshots = 0;
    while (running.load() > 0 || snapshots < 3) {
        const auto snap = pool->snapshot();
        const auto& h = *snap.history;
        CHECK(h.recorded >= last);
        last = h.recorded;
        CHECK(h.events.size() <= h.capacity);
        CHECK(h.dropped == h.recorded - h.events.size());
        for (std::size_t i = 1; i < h.events.size(); ++i) CHECK(h.events[i - 1].t_ns <= h.events[i].t_ns);
        ++snapshots;
    }
    for (auto& w : workers) w.join();
    const auto h = *pool->snapshot().history;
    CHECK(h.recorded == std::uint64_t{2} * threads * pairs);  // exited threads' magazines included
    CHECK(h.events.size() == 256);
}

TEST_CASE("history: turning it on and off while threads allocate") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>>();
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 3; ++t)
        workers.emplace_back([&, t] {
            for (int i = 0; !stop.load(); ++i) auto h = pool->allocate(std::size_t{512} << ((t + i) % 4));
        });
    for (int i = 0; i < 50; ++i) {
        pool->record_history(i % 3 == 2 ? 0 : 64, i % 2 ? CallSites::on : CallSites::off);
        const auto snap = pool->snapshot();
        CHECK(snap.history.has_value() == (i % 3 != 2));
    }
    stop = true;
    for (auto& w : workers) w.join();
}

TEST_CASE("history: to_json writes the history object (version 2)") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    pool->record_history(8);
    auto a = pool->allocate(64);
    a.set_tag("t\"q");
    a.release();
    const std::string j = to_json(pool->snapshot());
    INFO(j);
    CHECK(j.find("\"version\":2,") != std::string::npos);
    CHECK(j.find("\"history\":{\"capacity\":8,\"recorded\":2,\"dropped\":0,\"events\":[") != std::string::npos);
    CHECK(j.find("\"action\":\"alloc\",\"hit\":false,\"id\":") != std::string::npos);
    CHECK(j.find(",\"bytes_requested\":64,\"bytes_held\":256,\"bucket_size\":256,\"tag\":null}") != std::string::npos);
    CHECK(j.find("\"action\":\"free\",\"id\":") != std::string::npos);
    CHECK(j.find("\"tag\":\"t\\\"q\"}") != std::string::npos);
}

TEST_CASE("CLPOOL_HISTORY and CLPOOL_HISTORY_STACKS: bad values are config_errors naming the variable") {
    for (const char* bad : {"", "abc", "-1", "1e3", " 5", "16777217", "99999999999999999999"}) {
        CAPTURE(bad);
        std::string what;
        try {
            detail::parse_history_events("CLPOOL_HISTORY", bad);
        } catch (const config_error& e) {
            what = e.what();
        }
        CHECK(what.find("CLPOOL_HISTORY='" + std::string(bad) + "'") != std::string::npos);
    }
    CHECK(detail::parse_history_events("CLPOOL_HISTORY", "0") == 0);
    CHECK(detail::parse_history_events("CLPOOL_HISTORY", "100000") == 100000);
    CHECK(detail::parse_history_events("CLPOOL_HISTORY", "16777216") == 16777216);
    CHECK_THROWS_WITH_AS(detail::parse_history_stacks("CLPOOL_HISTORY_STACKS", "maybe"),
                         doctest::Contains("CLPOOL_HISTORY_STACKS='maybe'"), config_error);
    CHECK(detail::parse_history_stacks("CLPOOL_HISTORY_STACKS", "1"));
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    CHECK_THROWS_WITH_AS(pool->record_history(std::size_t{1} << 25), doctest::Contains("33554432"), config_error);
}

// ctest runs this with CLPOOL_HISTORY set (clpool_tests_history_env, clpool_tests_bad_history);
// unset, it checks that pools record nothing by default.
TEST_CASE("CLPOOL_HISTORY in the environment: every new pool records, or cannot be made if the value is bad") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    const char* env = std::getenv("CLPOOL_HISTORY");
    const char* stacks = std::getenv("CLPOOL_HISTORY_STACKS");
    if (env && std::string(env) == "not-a-number") {
        CHECK_THROWS_WITH_AS(make_pool<P>(), doctest::Contains("CLPOOL_HISTORY='not-a-number'"), config_error);
        CHECK_THROWS_AS(make_pool<P>(), config_error);  // every time
        return;
    }
    auto pool = make_pool<P>();
    auto h = history_sites::allocate_here(*pool, 100);
    const auto snap = pool->snapshot();
    if (!env || std::string(env) == "0") {
        CHECK(!snap.history);
        return;
    }
    REQUIRE(snap.history);
    CHECK(snap.history->capacity == std::stoull(env));
    CHECK(snap.history->recorded == 1);
    const bool want_stacks = stacks && std::string(stacks) == "1";
    CHECK(snap.buffers[0].frames.empty() == !want_stacks);
}

TEST_CASE("history: time stamps follow the steady clock to within its ticks") {
    auto pool = make_pool<MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>>();
    pool->record_history(16);
    pool->allocate(64).release();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::uint64_t later = detail::steady_ns();
    pool->allocate(64).release();
    const auto snap = pool->snapshot();
    const auto& e = snap.history->events;
    REQUIRE(e.size() == 4);
    // The ticker ran while the test slept: the second pair is stamped after
    // the first by most of the sleep, and not before `later` less a second.
    CHECK(e[2].t_ns >= e[1].t_ns + 50'000'000);
    CHECK(e[2].t_ns + 1'000'000'000 >= later);
    CHECK(e[3].t_ns <= snap.taken_ns);
}

TEST_CASE("history: rings merge by time, keeping each ring's, each thread's and each buffer's order") {
    using detail::history_slot;
    // An event at tick t of `thread`'s n-th event and of buffer id's k-th.
    auto ev = [](std::uint64_t t, std::uint64_t thread, std::uint64_t n, std::uintptr_t id, std::uint32_t k,
                 HistoryAction a) {
        return history_slot{t, (thread << detail::thread_order::count_bits) | n, id, 64, 64, nullptr, a, false, false,
                            k};
    };
    auto merged = [](const std::vector<history_slot>& all, const std::vector<std::size_t>& ends,
                     std::vector<bool> one_order = {}) {
        one_order.resize(ends.size(), true);
        return detail::history_ring::merge_order(ends, one_order,
                                                 [&](std::size_t i) -> const history_slot& { return all[i]; });
    };
    using order = std::vector<std::size_t>;
    // Ring 0 (thread 1) released buffer 7 in the same tick (t = 5) as ring 1
    // (thread 2) handed it out: the hand-out first; by time otherwise.
    CHECK(merged({ev(1, 1, 1, 3, 0, HistoryAction::alloc), ev(5, 1, 2, 7, 1, HistoryAction::free),
                  ev(5, 1, 3, 3, 1, HistoryAction::free),  // ring 0 ends
                  ev(2, 2, 1, 9, 0, HistoryAction::alloc), ev(5, 2, 2, 7, 0, HistoryAction::alloc),
                  ev(6, 2, 3, 9, 1, HistoryAction::free)},
                 {3, 6}) == order{0, 3, 4, 1, 2, 5});
    // One thread's events in two rings (two lock stripes), one tick: the
    // thread's order, though ring 0 comes first.
    CHECK(merged({ev(4, 1, 3, 0, 0, HistoryAction::trim),  // ring 0 ends
                  ev(4, 1, 1, 8, 0, HistoryAction::alloc), ev(4, 1, 2, 8, 1, HistoryAction::free)},
                 {1, 3}) == order{1, 2, 0});
    // A buffer handed out and released twice within a tick, by threads 1 and
    // 2 and then 3 and 4: its own count orders the four events.
    CHECK(merged({ev(9, 2, 1, 5, 11, HistoryAction::free), ev(9, 4, 1, 5, 13, HistoryAction::free),  // merged ring
                  ev(9, 1, 1, 5, 10, HistoryAction::alloc),                                        // thread 1's ring
                  ev(9, 3, 1, 5, 12, HistoryAction::alloc)},                                       // thread 3's
                 {2, 3, 4}, {false, true, true}) == order{2, 0, 3, 1});
    // Where nothing orders two events, the earlier ring's comes first.
    CHECK(merged({ev(4, 1, 1, 8, 0, HistoryAction::free), ev(4, 2, 1, 0, 0, HistoryAction::trim),
                  ev(4, 3, 1, 9, 0, HistoryAction::alloc)},
                 {1, 2, 3}) == order{0, 1, 2});
}

TEST_CASE_TEMPLATE("history: a buffer handed to another thread is released after it was handed out", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<8, Striped<4>>>) {
    // Hand-outs land in the allocating thread's ring, releases in the
    // releasing thread's: both within one tick of the clock, mostly.
    auto pool = make_pool<P>();
    pool->record_history(100000);
    for (int round = 0; round < 20; ++round) {
        std::vector<typename P::handle> batch;
        for (int i = 0; i < 64; ++i) batch.push_back(pool->allocate(std::size_t{256} << (i % 4)));
        std::thread([&] { batch.clear(); }).join();
    }
    const auto h = *pool->snapshot().history;
    REQUIRE(h.events.size() == 20 * 64 * 2);
    std::map<std::uintptr_t, bool> out;
    int misordered = 0;
    for (const auto& e : h.events) {
        bool& held = out[e.id];
        if (e.action == HistoryAction::alloc) misordered += held;
        else misordered += !held;
        held = e.action == HistoryAction::alloc;
    }
    CHECK(misordered == 0);
}

// A buffer's id is its node's address, and a node freed by an evict is often
// the next miss's: within one tick the old buffer's events and the new one's
// share an id. Before each block's count started at a life number of its own
// (block::history_events), both counted from 0, the buffer chain contradicted
// the thread's and the rings' order, and the tick came out ring by ring: a
// free after the evict of its buffer (Striped, ThreadCached; without a
// sanitizer's quarantine, which keeps addresses from coming back).
TEST_CASE("history: a buffer made at a freed one's address orders after it") {
    using detail::history_slot;
    using A = HistoryAction;
    const std::uint64_t first = detail::next_block_life(), second = detail::next_block_life();
    CHECK(second > first);
    CHECK((first & 0xffffffffu) == 0);  // a life's events count up from its number
    auto ev = [](std::uint64_t thread_n, std::uintptr_t id, std::uint64_t k, A a) {
        return history_slot{
            5, (std::uint64_t{1} << detail::thread_order::count_bits) | thread_n, id, 64, 64, nullptr, a, false, false,
            k};
    };
    const std::uint64_t old_life = first, new_life = second;
    // One thread, one tick. Shared ring: alloc, evict, trim, then a new buffer
    // at the same address allocated; magazine ring: the two frees.
    const std::vector<history_slot> all{
        ev(1, 7, old_life, A::alloc), ev(3, 7, old_life + 2, A::evict), ev(4, 0, 0, A::trim),
        ev(5, 7, new_life, A::alloc), ev(2, 7, old_life + 1, A::free),  ev(6, 7, new_life + 1, A::free)};
    const std::vector<std::size_t> ends{4, 6};
    const auto order = detail::history_ring::merge_order(ends, {true, true},
                                                         [&](std::size_t i) -> const history_slot& { return all[i]; });
    CHECK(order == std::vector<std::size_t>{0, 4, 1, 2, 3, 5});
}

TEST_CASE_TEMPLATE("history: buffers evicted and made again at the same address keep each one's order", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>) {
    auto pool = make_pool<P>();
    pool->record_history(100000);
    for (int round = 0; round < 200; ++round) {  // each evicted, and the next miss in another stripe
        pool->allocate(256).release();
        pool->trim();
        pool->allocate(1024).release();
        pool->trim();
    }
    const auto h = *pool->snapshot().history;
    REQUIRE(h.dropped == 0);
    std::map<std::uintptr_t, int> state;  // 0: none, 1: held, 2: cached
    std::map<std::uintptr_t, int> misses;
    int misordered = 0;
    for (const auto& e : h.events) {
        if (e.id == 0) continue;
        int& s = state[e.id];
        if (e.action == HistoryAction::alloc) {
            misses[e.id] += !e.hit;
            misordered += s == 1 || (s == 2 && !e.hit) || (s == 0 && e.hit);
            s = 1;
        } else if (e.action == HistoryAction::free) {
            misordered += s != 1;
            s = 2;
        } else if (e.action == HistoryAction::evict) {
            misordered += s == 0;
            s = 0;
        }
    }
    CAPTURE(misses.size());  // below 400 where addresses came back
    CHECK(misordered == 0);
}

// Block life numbers sit in the high 32 bits of a block's event count, so
// after 2^32 blocks (the arena makes one per large allocation) they wrap to
// 0: the process's 2^32-th block counts from 0 again. Within one tick, a
// buffer made at a freed one's address must still order after it.
TEST_CASE("history: a buffer made at a freed one's address orders after it when the block lives wrapped") {
    using detail::history_slot;
    using A = HistoryAction;
    // next_block_life() is lives++ << 32: the last life before the wrap, and the first after it.
    const std::uint64_t old_life = (std::uint64_t{1} << 32) - 1, new_life = std::uint64_t{1} << 32;
    const std::uint64_t old_start = old_life << 32, new_start = new_life << 32;
    CHECK(new_start == 0);  // what the counter's shift makes of it
    auto ev = [](std::uint64_t thread, std::uint64_t thread_n, std::uintptr_t id, std::uint64_t k, A a) {
        return history_slot{
            5, (thread << detail::thread_order::count_bits) | thread_n, id, 64, 64, nullptr, a, false, false, k};
    };
    // Thread 1 frees and evicts the old buffer; thread 2 then gets a new one
    // at its address and frees it; one tick, rings of threads that ran side
    // by side (only the buffer chain orders thread 2's events after thread 1's).
    const std::vector<history_slot> all{ev(2, 1, 7, new_start, A::alloc), ev(2, 2, 7, new_start + 1, A::free),
                                        ev(1, 1, 7, old_start + 1, A::free), ev(1, 2, 7, old_start + 2, A::evict)};
    const std::vector<std::size_t> ends{2, 4};
    const auto order = detail::history_ring::merge_order(ends, {true, true},
                                                         [&](std::size_t i) -> const history_slot& { return all[i]; });
    CHECK(order == std::vector<std::size_t>{2, 3, 0, 1});
}

namespace {
// Memory that is only a size: lets a pool hand out buffers past 2^48 bytes,
// which a host or simulated backend accepts (their limit is about 2^63).
struct HistorySizeOnly {
    std::size_t bytes = 0;
};
struct HistoryHugeBackend {
    using memory_type = HistorySizeOnly;
    std::size_t max_alloc_size() const noexcept { return std::size_t{1} << 62; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "huge"; }
    Allocation<HistorySizeOnly> allocate(std::size_t n, MemoryKind) noexcept {
        return {HistorySizeOnly{n}, AllocStatus::ok, 0};
    }
};
static_assert(Backend<HistoryHugeBackend>);
}  // namespace

TEST_CASE_TEMPLATE("history: requests of 2^48 bytes and more keep their size and their action", P,
                   Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, HistoryHugeBackend, Diagnostics>,
                   Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>, HistoryHugeBackend, Diagnostics>) {
    P pool{HistoryHugeBackend{}};
    const std::size_t huge = (std::size_t{1} << 50) + 3, at_limit = std::size_t{1} << 48;
    for (const CallSites sites : {CallSites::off, CallSites::on}) {
        CAPTURE(static_cast<int>(sites));
        pool.record_history(100, sites);
        auto a = pool.allocate(huge);
        a.release();  // the staged path
        auto b = pool.allocate(at_limit);
        b.set_tag("tagged");
        b.release();  // the tagged path
        auto c = pool.allocate(huge);  // a hit
        c.release();
        const auto h = *pool.snapshot().history;
        REQUIRE(h.events.size() == 6);
        const std::vector<std::pair<HistoryAction, std::size_t>> want{
            {HistoryAction::alloc, huge},    {HistoryAction::free, huge},  {HistoryAction::alloc, at_limit},
            {HistoryAction::free, at_limit}, {HistoryAction::alloc, huge}, {HistoryAction::free, huge}};
        for (std::size_t i = 0; i < want.size(); ++i) {
            CAPTURE(i);
            CHECK(to_string(h.events[i].action) == std::string(to_string(want[i].first)));
            CHECK(h.events[i].bytes_requested == want[i].second);
            CHECK(h.events[i].bytes_held == std::bit_ceil(want[i].second));
        }
        CHECK(h.events[4].hit);
        CHECK(h.events[3].tag == "tagged");
        pool.trim();
    }
}
