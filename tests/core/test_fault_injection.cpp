// Fault injection: a driver that fails the k-th or every n-th allocation; the pool stays consistent and leaks nothing.
//
// Every scenario checks the same books after every step: the pool's stats add
// up (allocated == in use + cached + pending; hits + misses == calls that got
// past size checks; misses == driver successes + failures for good; driver
// attempts == misses + retries), the mock's ledger holds exactly what the pool
// says, and once the pool is gone the ledger holds nothing.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

template <class Locks>
using FaultPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Locks, MockBackend>;

struct Tally {
    std::uint64_t calls = 0;     // allocate() calls that reached the cache (not size errors)
    std::uint64_t oom = 0;       // out_of_memory thrown
    std::uint64_t driver = 0;    // driver_error thrown
};

template <class P>
void check_books(const P& pool, const Ledger& ledger, const Tally& t) {
    const auto s = pool.stats();
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
    CHECK(s.hits + s.misses == t.calls);
    CHECK(s.failed_allocations == t.oom + t.driver);
    CHECK(s.misses == static_cast<std::uint64_t>(ledger.allocations.load()) + s.failed_allocations);
    CHECK(static_cast<std::uint64_t>(ledger.attempts.load()) == s.misses + s.oom_retries);
    CHECK(s.bytes_allocated == static_cast<std::size_t>(ledger.live_bytes.load()));
    CHECK(s.bytes_allocated <= s.peak_bytes_allocated);
}

std::uint64_t token_of(const MockMemory& m) {
    std::uint64_t v = 0;
    std::memcpy(&v, m.data(), sizeof v);
    return v;
}

// A fixed script of allocations, holds, releases and a trim: the same driver
// calls every run, so a failure can be placed at each of them in turn.
// Returns the tally; handles it still holds carry a token that must survive
// whatever failures happen around them.
template <class P>
Tally run_script(P& pool, Ledger& ledger, std::vector<std::pair<typename P::handle, std::uint64_t>>& held) {
    static constexpr std::size_t sizes[] = {100, 3000, 70000, 256, 257, 3000, 100, 1 << 20, 70000, 5};
    Tally t;
    std::uint64_t serial = 0;
    for (int round = 0; round < 6; ++round) {
        for (std::size_t i = 0; i < std::size(sizes); ++i) {
            ++t.calls;
            try {
                auto h = pool.allocate(sizes[i] + static_cast<std::size_t>(round));
                const std::uint64_t token = ++serial;
                std::memcpy(h.buffer().data(), &token, sizeof token);
                held.emplace_back(std::move(h), token);
            } catch (const out_of_memory& e) {
                ++t.oom;
                CHECK(e.requested() == sizes[i] + static_cast<std::size_t>(round));
                CHECK(e.native_code() == MockBackend::oom_code);
            } catch (const driver_error& e) {
                ++t.driver;
                CHECK(e.native_code() == MockBackend::failed_code);
            }
            // Release every third buffer held, oldest first, so the cache fills.
            if (held.size() > 3 && (i % 3 == 0)) {
                auto& [h, token] = held.front();
                CHECK(token_of(h.buffer()) == token);
                held.erase(held.begin());
            }
        }
        if (round == 3) pool.trim();
        check_books(pool, ledger, t);
    }
    for (auto& [h, token] : held) CHECK(token_of(h.buffer()) == token);
    return t;
}

long reference_attempts() {
    auto ledger = std::make_shared<Ledger>();
    FaultPool<SingleMutex> pool{MockBackend(ledger)};
    std::vector<std::pair<FaultPool<SingleMutex>::handle, std::uint64_t>> held;
    const Tally t = run_script(pool, *ledger, held);
    REQUIRE(t.oom + t.driver == 0);
    return ledger->attempts.load();
}

}  // namespace

TEST_CASE("fault injection: the k-th driver allocation fails once, for every k: trim, retry, success") {
    const long attempts = reference_attempts();
    REQUIRE(attempts > 20);
    for (long k = 0; k < attempts; ++k) {
        CAPTURE(k);
        auto ledger = std::make_shared<Ledger>();
        ledger->fail_from = k;
        ledger->fail_count = 1;
        {
            FaultPool<SingleMutex> pool{MockBackend(ledger)};
            std::vector<std::pair<FaultPool<SingleMutex>::handle, std::uint64_t>> held;
            const Tally t = run_script(pool, *ledger, held);
            CHECK(t.oom == 0);  // the retry succeeded every time
            const auto s = pool.stats();
            CHECK(s.oom_retries == 1);
            CHECK(s.failed_allocations == 0);
            check_books(pool, *ledger, t);
        }
        CHECK(ledger->live == 0);
        CHECK(ledger->live_bytes == 0);
    }
}

TEST_CASE("fault injection: the k-th and the retry fail, for every k: one out_of_memory, nothing lost") {
    const long attempts = reference_attempts();
    for (long k = 0; k < attempts; ++k) {
        CAPTURE(k);
        auto ledger = std::make_shared<Ledger>();
        ledger->fail_from = k;
        ledger->fail_count = 2;
        {
            FaultPool<Striped<4>> pool{MockBackend(ledger)};
            std::vector<std::pair<FaultPool<Striped<4>>::handle, std::uint64_t>> held;
            const Tally t = run_script(pool, *ledger, held);
            CHECK(t.oom == 1);
            const auto s = pool.stats();
            CHECK(s.oom_retries == 1);
            CHECK(s.failed_allocations == 1);
            // The failed call gave the whole cache back before its retry.
            CHECK(s.driver_frees > 0);
            check_books(pool, *ledger, t);
            // And the pool still works.
            CHECK(pool.allocate(12345).nbytes() == 12345);
        }
        CHECK(ledger->live == 0);
        CHECK(ledger->live_bytes == 0);
    }
}

TEST_CASE("fault injection: every n-th driver allocation fails") {
    for (long n : {1, 2, 3, 7}) {
        CAPTURE(n);
        auto ledger = std::make_shared<Ledger>();
        ledger->fail_every = n;
        {
            FaultPool<NoLock> pool{MockBackend(ledger)};
            std::vector<std::pair<FaultPool<NoLock>::handle, std::uint64_t>> held;
            const Tally t = run_script(pool, *ledger, held);
            const auto s = pool.stats();
            // Attempt a (0-based) fails when (a + 1) % n == 0; a failure's retry is the next attempt.
            if (n == 1) {
                // Nothing ever succeeds: every call misses, fails twice, throws.
                CHECK(t.oom == t.calls);
                CHECK(s.misses == t.calls);
                CHECK(s.oom_retries == t.calls);
                CHECK(ledger->allocations == 0);
                CHECK(held.empty());
            } else {
                // The retry lands on an attempt that does not fail: nothing is thrown.
                CHECK(t.oom == 0);
                CHECK(s.oom_retries == static_cast<std::uint64_t>(ledger->attempts.load() / n));
            }
            check_books(pool, *ledger, t);
        }
        CHECK(ledger->live == 0);
    }
}

TEST_CASE("fault injection: driver failures that are not out-of-memory: driver_error, cache kept, no retry") {
    auto ledger = std::make_shared<Ledger>();
    {
        FaultPool<SingleMutex> pool{MockBackend(ledger)};
        pool.allocate(4096).release();
        const auto cached = pool.stats().bytes_cached;
        REQUIRE(cached == 4096);
        ledger->fail_as_driver_error = true;
        ledger->fail_every = 2;
        Tally t{1, 0, 0};
        std::vector<FaultPool<SingleMutex>::handle> held;
        for (int i = 0; i < 40; ++i) {
            ++t.calls;
            try {
                held.push_back(pool.allocate(100000 + static_cast<std::size_t>(i)));
            } catch (const driver_error& e) {
                ++t.driver;
                CHECK(e.native_code() == MockBackend::failed_code);
                CHECK(std::string(e.what()).find(std::to_string(MockBackend::failed_code)) != std::string::npos);
            }
        }
        const auto s = pool.stats();
        CHECK(t.driver == 20);
        CHECK(s.oom_retries == 0);
        CHECK(s.bytes_cached == cached);  // not given back: it was not a memory shortage
        CHECK(s.driver_frees == 0);
        check_books(pool, *ledger, t);
    }
    CHECK(ledger->live == 0);
}

// A device with a fixed capacity shared by 8 threads: allocations that do not
// fit fail with out_of_memory after the pool gave back its cache; every other
// failure kind would be a bug; the books balance and nothing leaks.
TEST_CASE_TEMPLATE("fault injection: a full device under 8 threads", Locks, SingleMutex, Striped<4>) {
    auto ledger = std::make_shared<Ledger>();
    constexpr long capacity = 2 << 20;
    ledger->capacity = capacity;
    std::atomic<std::uint64_t> calls{0}, ooms{0}, others{0}, broken{0};
    {
        FaultPool<Locks> pool{MockBackend(ledger)};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&, t] {
                std::minstd_rand rng(static_cast<unsigned>(t) + 11u);
                std::vector<std::pair<typename FaultPool<Locks>::handle, std::uint64_t>> held;
                for (int i = 0; i < 3000; ++i) {
                    const std::size_t n = std::size_t{256} << (rng() % 12);  // 256 B .. 512 KiB
                    ++calls;
                    try {
                        auto h = pool.allocate(n);
                        const std::uint64_t token = (std::uint64_t(t) << 32) | static_cast<unsigned>(i);
                        std::memcpy(h.buffer().data(), &token, sizeof token);
                        held.emplace_back(std::move(h), token);
                    } catch (const out_of_memory&) {
                        ++ooms;
                    } catch (...) {
                        ++others;
                    }
                    if (held.size() > 6) {
                        const std::size_t k = rng() % held.size();
                        if (token_of(held[k].first.buffer()) != held[k].second) ++broken;
                        held.erase(held.begin() + static_cast<long>(k));
                    }
                }
            });
        }
        for (auto& th : threads) th.join();
        CHECK(others == 0);
        CHECK(broken == 0);
        CHECK(ooms > 0);  // the device really was full at times
        const auto s = pool.stats();
        CHECK(s.oom_retries >= ooms.load());
        CHECK(s.driver_frees > 0);
        CHECK(s.peak_bytes_allocated <= static_cast<std::size_t>(capacity));
        check_books(pool, *ledger, Tally{calls.load(), ooms.load(), 0});
        CHECK(s.bytes_in_use == 0);
    }
    CHECK(ledger->live == 0);
    CHECK(ledger->live_bytes == 0);
}
