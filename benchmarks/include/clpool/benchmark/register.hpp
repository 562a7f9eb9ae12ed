// register: the standard Google Benchmark runs for any pool type (hit, miss, raw driver, contention, churn), in one line.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/policies/locks.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <barrier>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// The namespace is clpool::benchmarks, not clpool::benchmark: with the latter,
// `benchmark::State` would be ambiguous in any file that says `using namespace clpool;`.
namespace clpool::benchmarks {

// What register_pool registers. The defaults are those of clpool's own
// programs (bench_hit_latency, bench_contention), so the names and numbers
// line up with docs/BENCHMARKS.md.
struct Options {
    // hit/, miss/ and raw/ run once per size.
    std::vector<std::size_t> sizes{256, 4096, 65536, std::size_t{1} << 20};
    // contention/ runs at 1, 2, 4, ... up to this many threads (1 alone for
    // a pool whose lock policy does not lock, NoLock).
    int max_threads = 16;
    // contention/ and churn/ draw their sizes from this mix.
    std::vector<std::size_t> mix{256, 4096, 1000, 65536, 3000, 262144, 16384, std::size_t{1} << 20};
    // churn/: how many handles stay live, and the seed of its size sequence.
    std::size_t churn_handles = 64;
    std::uint32_t churn_seed = 42;
    bool hit = true, miss = true, raw = true, contention = true, churn = true;
};

// Makes the pool a run measures; called once per run (a run's pool starts empty).
template <class P>
using Factory = std::function<std::unique_ptr<P>()>;

namespace detail {

template <class P>
constexpr bool locks = !std::is_same_v<typename P::lock_policy::mutex_type, NullMutex>;

inline void apply_sizes(::benchmark::internal::Benchmark* b, const std::vector<std::size_t>& sizes) {
    for (std::size_t n : sizes) b->Arg(static_cast<std::int64_t>(n));
}

// Registration checks: a bad value is std::invalid_argument naming it and its
// limit, here, instead of a division by zero or an assert once the runs start.
[[noreturn]] inline void bad_option(const std::string& what) {
    throw std::invalid_argument("clpool::benchmarks: " + what);
}
// hit/, miss/ and raw/ sizes: a run each, passed as Google Benchmark's int64 argument.
inline void check_sizes(const std::vector<std::size_t>& sizes) {
    if (sizes.empty()) bad_option("sizes is empty: at least 1 size is needed");
    constexpr auto top = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    for (std::size_t n : sizes)
        if (n > top) bad_option("sizes holds " + std::to_string(n) + ": the limit is " + std::to_string(top));
}
inline void check_mix(const std::vector<std::size_t>& mix) {
    if (mix.empty()) bad_option("mix is empty: at least 1 size is needed");
}
inline void check_threads(int max_threads) {
    if (max_threads < 1) bad_option("max_threads is " + std::to_string(max_threads) + ": at least 1 is needed");
}
inline void check_handles(std::size_t handles) {
    if (handles == 0) bad_option("churn_handles is 0: at least 1 is needed");
}

}  // namespace detail

// hit/<name>/<bytes>: allocate + release of a buffer the pool already caches
// (a hit pair; time per iteration = ns per pair). Fails the run (SkipWithError)
// if a timed allocation misses. Throws std::invalid_argument if `sizes` is
// empty or holds a size above INT64_MAX (Google Benchmark's argument).
template <class P>
void register_hit(const std::string& name, Factory<P> make, const std::vector<std::size_t>& sizes) {
    detail::check_sizes(sizes);
    auto* b = ::benchmark::RegisterBenchmark(("hit/" + name).c_str(), [make](::benchmark::State& state) {
        const auto n = static_cast<std::size_t>(state.range(0));
        auto pool = make();
        pool->allocate(n).release();  // the one miss; every timed call hits
        for (auto _ : state) {
            auto h = pool->allocate(n);
            ::benchmark::DoNotOptimize(h);
            h.release();
        }
        if (pool->stats().misses != 1) state.SkipWithError("a timed allocation missed the cache");
        state.SetItemsProcessed(state.iterations());
    });
    detail::apply_sizes(b, sizes);
    b->Unit(::benchmark::kNanosecond);
}

// miss/<name>/<bytes>: allocate from an empty pool (a miss: the backend
// makes the buffer), release, trim (the backend frees it). What the pool adds
// to raw/ is the difference. Throws as register_hit.
template <class P>
void register_miss(const std::string& name, Factory<P> make, const std::vector<std::size_t>& sizes) {
    detail::check_sizes(sizes);
    auto* b = ::benchmark::RegisterBenchmark(("miss/" + name).c_str(), [make](::benchmark::State& state) {
        const auto n = static_cast<std::size_t>(state.range(0));
        auto pool = make();
        for (auto _ : state) {
            auto h = pool->allocate(n);
            ::benchmark::DoNotOptimize(h);
            h.release();
            pool->trim();
        }
        if (pool->stats().hits != 0) state.SkipWithError("a timed allocation hit the cache");
        state.SetItemsProcessed(state.iterations());
    });
    detail::apply_sizes(b, sizes);
    b->Unit(::benchmark::kMicrosecond);
}

// raw/<name>/<bytes>: the pool's own backend making and freeing a buffer of
// the pool's memory kind, with no pool: the raw-driver baseline for hit/ and miss/.
// Throws as register_hit.
template <class P>
void register_raw(const std::string& name, Factory<P> make, const std::vector<std::size_t>& sizes) {
    detail::check_sizes(sizes);
    auto* b = ::benchmark::RegisterBenchmark(("raw/" + name).c_str(), [make](::benchmark::State& state) {
        const auto n = static_cast<std::size_t>(state.range(0));
        auto pool = make();  // for its backend and memory kind only
        auto& backend = pool->backend();
        for (auto _ : state) {
            auto a = backend.allocate(n, pool->kind());
            if (a.status != AllocStatus::ok) {
                state.SkipWithError("the backend failed to allocate");
                break;
            }
            ::benchmark::DoNotOptimize(a.memory);
        }  // a.memory frees itself
        state.SetItemsProcessed(state.iterations());
    });
    detail::apply_sizes(b, sizes);
    b->Unit(::benchmark::kMicrosecond);
}

// contention/<name>/real_time/threads:<N>: N threads on one pool, each
// allocating the next size of the mix and releasing the handle it took 4
// steps earlier. Counters: items_per_second (pairs per second, all threads),
// ns_per_pair (each thread's wall time per pair, averaged), hit_rate.
// Throws std::invalid_argument if `mix` is empty or max_threads is below 1.
template <class P>
void register_contention(const std::string& name, Factory<P> make, const std::vector<std::size_t>& mix,
                         int max_threads) {
    detail::check_mix(mix);
    detail::check_threads(max_threads);
    struct shared {
        std::unique_ptr<P> pool;
        std::unique_ptr<std::barrier<>> done;
    };
    auto run = std::make_shared<shared>();
    auto* b = ::benchmark::RegisterBenchmark(("contention/" + name).c_str(), [make, run,
                                                                              mix](::benchmark::State& state) {
        constexpr std::size_t ring = 4;
        if (state.thread_index() == 0) {  // before the loop: Google Benchmark's start barrier publishes it
            run->pool = make();
            run->done = std::make_unique<std::barrier<>>(state.threads());
        }
        std::array<typename P::handle, ring> held;
        std::size_t next = static_cast<std::size_t>(state.thread_index()) * 3;  // threads start at different sizes
        const auto start = std::chrono::steady_clock::now();
        for (auto _ : state) {
            held[next % ring] = run->pool->allocate(mix[next % mix.size()]);  // move-assign releases the oldest
            ::benchmark::DoNotOptimize(held[next % ring]);
            ++next;
        }
        const auto elapsed = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
        for (auto& h : held) h.release();
        state.SetItemsProcessed(state.iterations());
        state.counters["ns_per_pair"] =
            ::benchmark::Counter(elapsed / static_cast<double>(state.iterations()), ::benchmark::Counter::kAvgThreads);
        run->done->arrive_and_wait();  // every handle is back before the pool goes
        if (state.thread_index() == 0) {
            state.counters["hit_rate"] = run->pool->stats().hit_rate();
            run->pool.reset();
        }
    });
    const int top = detail::locks<P> ? max_threads : 1;
    for (int t = 1;; t *= 2) {  // no t * 2 past INT_MAX
        b->Threads(t);
        if (t > top / 2) break;
    }
    b->UseRealTime()->Unit(::benchmark::kNanosecond);
}

// churn/<name>: a working set of `handles` live buffers; each iteration
// releases one at random and allocates a size drawn from the mix (seeded, so
// every run asks the same sequence). Counters: hit_rate, held_bytes (bytes
// held from the backend at the end, per the pool's stats). Throws
// std::invalid_argument if `mix` is empty or `handles` is 0.
template <class P>
void register_churn(const std::string& name, Factory<P> make, const std::vector<std::size_t>& mix, std::size_t handles,
                    std::uint32_t seed) {
    detail::check_mix(mix);
    detail::check_handles(handles);
    auto* b = ::benchmark::RegisterBenchmark(
        ("churn/" + name).c_str(), [make, mix, handles, seed](::benchmark::State& state) {
            auto pool = make();
            std::vector<typename P::handle> live(handles);
            std::minstd_rand rng(seed);
            for (auto _ : state) {
                auto& slot = live[rng() % live.size()];
                slot = pool->allocate(mix[rng() % mix.size()]);  // move-assign releases the old one
                ::benchmark::DoNotOptimize(slot);
            }
            const auto s = pool->stats();
            state.counters["hit_rate"] = s.hit_rate();
            state.counters["held_bytes"] = static_cast<double>(s.bytes_allocated);
            state.SetItemsProcessed(state.iterations());
        });
    b->Unit(::benchmark::kNanosecond);
}

// Every standard run for pool type P, named <run>/<name>/...:
//
//   clpool::benchmarks::register_pool<MyPool>("MyPool", [] { return std::make_unique<MyPool>(MyBackend{}); });
//
// then Google Benchmark's usual main (BENCHMARK_MAIN, or Initialize +
// RunSpecifiedBenchmarks). `make` is called once per run. Not thread-safe:
// call it before the benchmarks run, as with any registration. Options that a
// chosen family cannot run with (empty sizes or mix, max_threads below 1,
// churn_handles 0, a size above INT64_MAX) are std::invalid_argument naming
// the field, and then nothing is registered.
template <class P>
void register_pool(const std::string& name, Factory<P> make, const Options& o = {}) {
    if (o.hit || o.miss || o.raw) detail::check_sizes(o.sizes);
    if (o.contention || o.churn) detail::check_mix(o.mix);
    if (o.contention) detail::check_threads(o.max_threads);
    if (o.churn) detail::check_handles(o.churn_handles);
    if (o.hit) register_hit<P>(name, make, o.sizes);
    if (o.miss) register_miss<P>(name, make, o.sizes);
    if (o.raw) register_raw<P>(name, make, o.sizes);
    if (o.contention) register_contention<P>(name, make, o.mix, o.max_threads);
    if (o.churn) register_churn<P>(name, make, o.mix, o.churn_handles, o.churn_seed);
}

// The same for a pool whose backend is default-constructible (HostBackend, a
// backend of one's own): register_pool<MyPool>("MyPool").
template <class P>
    requires std::default_initializable<typename P::backend_type> &&
             std::default_initializable<typename P::limit_policy>
void register_pool(const std::string& name, const Options& o = {}) {
    register_pool<P>(name, [] { return std::make_unique<P>(typename P::backend_type{}); }, o);
}

}  // namespace clpool::benchmarks
