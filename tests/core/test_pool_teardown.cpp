// Destroying a pool while other threads still release its handles: no use after free, nothing leaked.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using namespace clpool;
using namespace clpool::test;

// A worker that drops its handles while another thread destroys their pool
// (what release_pools(ctx) does with a live worker). Each release either
// reaches the pool before its destructor has passed the buffer, or finds the
// buffer orphaned and frees it itself; it never touches a destroyed pool.
// Before the fix the release read the owner unsynchronised: a heap
// use-after-free under ASan, Boost's safe_link assertion in a debug build.
// The mock ledger (tests/ledger_check.cpp) checks that every buffer was freed.
TEST_CASE_TEMPLATE("a pool destroyed while another thread releases its handles: each buffer is freed once", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<FixedSetBuckets, DeviceLocal, Capped, Striped<4>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>,
                   MockPool<FixedSetBuckets, DeviceLocal, Capped, ThreadCached<4, Striped<4>>>) {
    constexpr int rounds = 200, handles = 512;
    static constexpr std::size_t sizes[] = {64, 1000, 4096, 70000, 300, 20000};
    auto ledger = std::make_shared<Ledger>();
    for (int round = 0; round < rounds; ++round) {
        auto pool = std::make_unique<P>(MockBackend{ledger}, default_limits<typename P::limit_policy>());
        std::vector<typename P::handle> held;
        for (int i = 0; i < handles; ++i) held.push_back(pool->allocate(sizes[i % std::size(sizes)]));
        for (int i = 0; i < handles; i += 3) held[static_cast<std::size_t>(i)].release();  // some cached
        std::atomic<int> released{0};
        std::thread worker([&] {
            for (auto& h : held) {
                h.release();
                released.fetch_add(1, std::memory_order_release);
            }
        });
        // The destructor starts while the worker is releasing, at a different
        // point each round.
        const int start_at = handles / 8 + (round * 37) % (handles / 2);
        while (released.load(std::memory_order_acquire) < start_at) std::this_thread::yield();
        pool.reset();  // races the worker's releases
        worker.join();
    }
    CHECK(ledger->allocations >= long{rounds} * handles);
    CHECK(ledger->live == 0);  // every buffer freed, by its pool or by its last release
}

TEST_CASE("a handle that outlives its pool reports no pool and frees its buffer on release") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    auto pool = std::make_unique<P>(MockBackend{ledger});
    auto h = pool->allocate(100);
    CHECK(h.pool() == pool.get());
    pool.reset();
    CHECK(h.pool() == nullptr);
    CHECK(ledger->live == 1);
    h.release();
    CHECK(ledger->live == 0);
}

// The release's slow path (core/detail/pool_teardown.hpp): ~Pool has flagged
// the block `pool_going` and is about to decide under the teardown mutex,
// which this test holds; the release sees the flag and must wait for the
// decision too. Whichever of the two then takes the mutex first, the buffer is
// freed exactly once and nothing touches the destroyed pool (ASan/TSan).
TEST_CASE_TEMPLATE("a release that finds its pool being destroyed waits for the destructor's decision", P,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>) {
    auto ledger = std::make_shared<Ledger>();
    auto pool = std::make_unique<P>(MockBackend{ledger});
    auto h = pool->allocate(1000);
    auto cached = pool->allocate(2000);
    cached.release();
    std::unique_lock hold(detail::pool_teardown::mutex());
    std::thread destroyer([&] { pool.reset(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the destructor is at the mutex now
    std::thread releaser([&] { h.release(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the release too
    hold.unlock();
    destroyer.join();
    releaser.join();
    CHECK(ledger->allocations == 2);
    CHECK(ledger->live == 0);
}
