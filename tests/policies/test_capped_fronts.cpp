// Capped pools with a front (ThreadCached): a release that takes the shared lists gets the room the magazines hold empty.
#include "pool_factory.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>

using namespace clpool;
using namespace clpool::test;

namespace {

// MockBackend with events: a release_after whose event has not completed is pending.
struct CappedEventMockBackend : MockBackend {
    using MockBackend::MockBackend;
    struct Event {
        const std::atomic<bool>* done;
    };
    using event_type = Event;
    static constexpr BackendAbilities abilities = BackendAbility::events;
    static bool event_complete(const Event& e) noexcept { return e.done->load(); }
    static void wait_for(const Event*, std::size_t) noexcept {}
};
static_assert(Backend<CappedEventMockBackend>);

}  // namespace

// docs/POLICIES.md: "when the caps refuse a release, every magazine first gives
// back its empty slots", on every path. In a capped ThreadCached pool a release
// that takes the shared lists (an exact-size buffer) must not be refused for the
// magazines' empty reserved slots and evicted while nothing is idle: SingleMutex
// caches the same buffer.
TEST_CASE_TEMPLATE("a capped pool caches an exact-size release that fits while nothing is idle", L, SingleMutex,
                   ThreadCached<4>, ThreadCached<4, Striped<2>>) {
    using P = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, L, MockBackend>;
    P pool(MockBackend({}, 3000), Capped(3000, 16));  // 4 KiB would pass the device limit: 2500 B is exact
    pool.allocate(1000).release();  // 1024 B idle
    auto h = pool.allocate(1000);  // a hit: nothing idle now
    CHECK(pool.stats().bytes_cached == 0);
    pool.allocate(2500).release();  // fits the 3000 B cap
    const auto s = pool.stats();
    CHECK(s.evictions == 0);
    CHECK(s.bytes_cached == 2500);
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
}

// The same for release_after with an event still running (pending buffers
// always take the shared lists): kept pending, not evicted.
TEST_CASE_TEMPLATE("a capped pool keeps a pending release that fits while nothing is idle", L, SingleMutex,
                   ThreadCached<4>) {
    using P = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, L, CappedEventMockBackend>;
    P pool(CappedEventMockBackend(), Capped(4096, 16));
    pool.allocate(1000).release();  // 1024 B idle
    auto h = pool.allocate(1000);  // a hit: nothing idle now
    std::atomic<bool> done{false};
    const CappedEventMockBackend::Event ev{&done};
    auto p = pool.allocate(4000);  // 4096 B: the whole cap
    p.release_after(&ev, 1);
    auto s = pool.stats();
    CHECK(s.evictions == 0);
    CHECK(s.bytes_pending == 4096);
    done = true;
    s = pool.stats();
    CHECK(s.bytes_cached == 4096);
    CHECK(s.bytes_pending == 0);
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
}
