// Many threads, mixed sizes: every owner's pattern survives, so no buffer has two owners.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

template <class P>
void hammer(P& pool, int threads, int iterations, std::atomic<int>& corrupted) {
    static constexpr std::size_t sizes[] = {1, 200, 1000, 4096, 5000, 65536, 100000};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            std::minstd_rand rng(static_cast<unsigned>(t) + 1);
            std::vector<std::pair<typename P::handle, unsigned>> held;
            for (int i = 0; i < iterations; ++i) {
                const std::size_t n = sizes[rng() % std::size(sizes)];
                const unsigned seed = static_cast<unsigned>(t * 100000 + i);
                auto h = pool.allocate(n);
                write_bytes(h.buffer(), pattern(n, seed));
                held.emplace_back(std::move(h), seed);
                if (held.size() > 4 || rng() % 2) {
                    auto& [victim, vseed] = held[rng() % held.size()];
                    if (read_bytes(victim.buffer(), victim.nbytes()) != pattern(victim.nbytes(), vseed)) ++corrupted;
                    victim.release();
                    std::erase_if(held, [](const auto& p) { return !p.first; });
                }
            }
            for (auto& [h, seed] : held)
                if (read_bytes(h.buffer(), h.nbytes()) != pattern(h.nbytes(), seed)) ++corrupted;
        });
    }
    for (auto& t : ts) t.join();
}

}  // namespace

#ifdef CLPOOL_HAS_OPENCL
#define CLPOOL_THREAD_OPENCL_POOLS , clpool::BufferPool
#else
#define CLPOOL_THREAD_OPENCL_POOLS
#endif

TEST_CASE_TEMPLATE("threads with mixed sizes never share a buffer", P, host::BufferPool,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, Striped<4>>,
                   MockPool<FixedSetBuckets, HostPinned, Unlimited, Striped<16>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, LockedBy<std::mutex>>,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4, std::mutex>>,
                   host::PersistentBufferPool CLPOOL_THREAD_OPENCL_POOLS) {
    auto pool = make_pool<P>();
    std::atomic<int> corrupted{0};
#ifdef CLPOOL_HAS_OPENCL
    const bool device = std::is_same_v<typename P::backend_type, OpenCLBackend>;
#else
    const bool device = false;  // no OpenCL pools in this build
#endif
    hammer(*pool, 8, device ? 150 : 2000, corrupted);
    CHECK(corrupted == 0);
    const auto s = pool->stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_allocated == s.bytes_cached);
    CHECK(s.hits + s.misses == static_cast<std::uint64_t>(8 * (device ? 150 : 2000)));
    CHECK(s.hits > s.misses);
}

TEST_CASE("stats snapshots under concurrent use are consistent") {
    MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<4>> pool{MockBackend()};
    std::atomic<bool> stop{false};
    std::atomic<int> corrupted{0};
    std::thread worker([&] {
        hammer(pool, 4, 3000, corrupted);
        stop = true;
    });
    int inconsistent = 0, snapshots = 0;
    while (!stop) {
        const auto s = pool.stats();
        ++snapshots;
        if (s.bytes_allocated != s.bytes_in_use + s.bytes_cached + s.bytes_pending) ++inconsistent;
    }
    worker.join();
    CHECK(snapshots > 0);
    CHECK(inconsistent == 0);
    CHECK(corrupted == 0);
}
