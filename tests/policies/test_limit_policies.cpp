// Caps: bytes and buffers per bucket are never exceeded; what does not fit is evicted.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
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
