// SpinMutex: mutual exclusion under many threads, try_lock, and use as a pool's lock.
#include <clpool/policies/spin_mutex.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

TEST_CASE("SpinMutex: try_lock fails while held and succeeds after unlock") {
    clpool::SpinMutex m;
    CHECK(m.try_lock());
    CHECK_FALSE(m.try_lock());
    m.unlock();
    CHECK(m.try_lock());
    m.unlock();
}

TEST_CASE("SpinMutex: no increment of a plain counter is lost across threads") {
    // More threads than this machine's cores, so waiters reach the yield phase
    // while a preempted holder keeps the lock.
    clpool::SpinMutex m;
    long counter = 0;           // deliberately not atomic: the lock is the only guard
    std::atomic<int> inside{0};  // detects two holders at once
    std::atomic<int> overlaps{0};
    constexpr int threads = 12, rounds = 20000;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                std::lock_guard g(m);
                if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
                ++counter;
                inside.fetch_sub(1, std::memory_order_relaxed);
            }
        });
    for (auto& t : pool) t.join();
    CHECK(overlaps == 0);
    CHECK(counter == long{threads} * rounds);
}
