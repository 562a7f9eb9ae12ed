// Caps: bytes and buffers per bucket are never exceeded; what does not fit is evicted.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

using namespace clpool;
using namespace clpool::test;

template <class Locks>
using CappedMock = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, Locks, MockBackend>;

TEST_CASE_TEMPLATE("the per-bucket cap sends extra buffers back to the driver", Locks, NoLock, SingleMutex,
                   Striped<4>) {
    auto ledger = std::make_shared<Ledger>();
    CappedMock<Locks> pool(MockBackend(ledger), Capped(1 << 30, 3));
    std::vector<typename CappedMock<Locks>::handle> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool.allocate(1000));
    held.clear();
    const auto s = pool.stats();
    CHECK(s.evictions == 2);
    CHECK(s.buckets.at(0).cached_buffers == 3);
    CHECK(s.buckets.at(0).evictions == 2);
    CHECK(ledger->live == 3);
    CHECK(s.bytes_allocated == 3 * 1024);
}

TEST_CASE_TEMPLATE("the byte cap is never exceeded", Locks, NoLock, SingleMutex, Striped<4>) {
    auto ledger = std::make_shared<Ledger>();
    CappedMock<Locks> pool(MockBackend(ledger), Capped(10'000, 100));
    std::vector<typename CappedMock<Locks>::handle> held;
    for (std::size_t n : {4096u, 4096u, 2048u, 1024u, 1024u, 512u, 8192u}) held.push_back(pool.allocate(n));
    held.clear();  // released in order: 4096, 4096 (8192 cached), 2048 would make 10240 > 10000: evicted ...
    const auto s = pool.stats();
    CHECK(s.bytes_cached <= 10'000);
    CHECK(s.bytes_cached == 4096 + 4096 + 1024 + 512);
    CHECK(s.evictions == 3);  // 2048, the second 1024, 8192
    CHECK(ledger->live == 4);
}

TEST_CASE("a buffer larger than the whole byte cap is never cached") {
    CappedMock<SingleMutex> pool(MockBackend(), Capped(1000, 16));
    pool.allocate(4096).release();
    CHECK(pool.stats().bytes_cached == 0);
    CHECK(pool.stats().evictions == 1);
}

TEST_CASE("CLPOOL_MAX_CACHED_GB values are parsed and invalid ones are named in the error") {
    CHECK(config::parse_gib("CLPOOL_MAX_CACHED_GB", "4") == (std::uint64_t{4} << 30));
    CHECK(config::parse_gib("CLPOOL_MAX_CACHED_GB", "0.5") == (std::uint64_t{1} << 29));
    CHECK(config::parse_gib("CLPOOL_MAX_CACHED_GB", "0") == 0);
    for (const char* bad : {"", "abc", "4GB", "-1", "nan", "inf", "1e30", " 4", "+4", "0x10"}) {
        const std::string shown = bad;
        CAPTURE(shown);
        try {
            (void)config::parse_gib("CLPOOL_MAX_CACHED_GB", bad);
            FAIL("expected config_error");
        } catch (const config_error& e) {
            const std::string what = e.what();
            CHECK(what.find("CLPOOL_MAX_CACHED_GB") != std::string::npos);
            CHECK(what.find(std::string("'") + bad + "'") != std::string::npos);
        }
    }
}

TEST_CASE("the named pools' caps: CLPOOL_MAX_CACHED_GB (4 GiB when unset) and 16 per bucket") {
    const EnvironmentCapped c;
    const char* env = std::getenv("CLPOOL_MAX_CACHED_GB");
    CHECK(c.max_bytes == (env ? config::parse_gib("CLPOOL_MAX_CACHED_GB", env) : std::size_t{4} << 30));
    CHECK(c.max_per_bucket == 16);
}

namespace {

// Capped, with a hook run once inside admit(), so while the pool asks the caps.
std::function<void()> capped_admit_hook;
struct HookedCapped : Capped {
    using Capped::Capped;
    bool admit(std::size_t bytes, std::size_t cached_total, std::size_t cached_in_bucket) const noexcept {
        if (auto hook = std::exchange(capped_admit_hook, nullptr)) hook();
        return Capped::admit(bytes, cached_total, cached_in_bucket);
    }
};

}  // namespace

// Striped<N> reserves a release's bytes in the total before the caps judge it and rolls them back
// on refusal. A release on another stripe judged in between must not count the refused buffer's
// bytes as cached: it fits, so it is kept, and only the refused one is evicted.
TEST_CASE("Striped + Capped: a release that fits is kept while another stripe's refused release rolls back") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, HookedCapped, Striped<4>>;
    P pool(MockBackend{}, HookedCapped(16 << 10, 16));
    auto idle = pool.allocate(8 << 10);
    auto big = pool.allocate(16 << 10);
    auto small = pool.allocate(4 << 10);
    idle.release();  // 8 KiB idle: room for 8 KiB more
    REQUIRE(pool.stats().bytes_cached == 8 << 10);
    // While the caps judge the 16 KiB release (refused: it does not fit),
    // a 4 KiB release on another stripe (it fits) asks them.
    capped_admit_hook = [&] { std::thread([&] { small.release(); }).join(); };
    big.release();
    const auto s = pool.stats();
    CHECK(s.evictions == 1);                               // the 16 KiB buffer only
    CHECK(s.bytes_cached == (8 << 10) + (4 << 10));        // the 4 KiB buffer was kept
    CHECK(s.bytes_cached <= pool.limits().max_cached_bytes());
}
