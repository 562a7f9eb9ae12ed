// Contention: 1..16 threads allocating and releasing mixed sizes on one shared pool, per lock policy.
//
// Each thread keeps a ring of 4 live handles: every iteration allocates the
// next size of a mix (256 B .. 1 MiB) and releases the oldest handle, one
// allocate+release pair. Reported: items_per_second (pairs per second, all
// threads together: the aggregate throughput) and ns_per_pair (each thread's
// wall time per pair, averaged over threads: the per-op latency under load).
// The pools sit on host memory: a hit never reaches a driver, so this
// measures the pool's locking alone.
#include "common/setup.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <array>
#include <barrier>
#include <mutex>
#include <chrono>
#include <memory>
#include <string>

using namespace clpool;
using namespace clpool::bench;

namespace {

constexpr std::array<std::size_t, 8> mix = {256, 4096, 1000, 65536, 3000, 262144, 16384, 1 << 20};
constexpr std::size_t ring = 4;

template <class P>
struct shared_run {
    std::unique_ptr<P> pool;
    std::unique_ptr<std::barrier<>> done;
};

template <class P>
void contention(benchmark::State& state) {
    static shared_run<P> run;  // set up by thread 0 before the loop (Google Benchmark's start barrier publishes it)
    if (state.thread_index() == 0) {
        run.pool = make_pool<P>();
        run.done = std::make_unique<std::barrier<>>(state.threads());
    }
    std::array<typename P::handle, ring> held;
    std::size_t next = static_cast<std::size_t>(state.thread_index()) * 3;  // threads start at different sizes
    const auto start = std::chrono::steady_clock::now();
    for (auto _ : state) {
        auto& slot = held[next % ring];
        slot = run.pool->allocate(mix[next % mix.size()]);  // move-assign releases the oldest
        benchmark::DoNotOptimize(slot);
        ++next;
    }
    const auto elapsed = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    for (auto& h : held) h.release();
    state.SetItemsProcessed(state.iterations());
    state.counters["ns_per_pair"] =
        benchmark::Counter(elapsed / static_cast<double>(state.iterations()), benchmark::Counter::kAvgThreads);
    run.done->arrive_and_wait();  // every handle is back before the pool goes
    if (state.thread_index() == 0) {
        const auto s = run.pool->stats();
        state.counters["hit_rate"] = s.hit_rate();
        run.pool.reset();
    }
}

template <class P>
void add(const std::string& name, int max_threads = 16) {
    auto* b = benchmark::RegisterBenchmark(("contention/" + name).c_str(), contention<P>);
    for (int t = 1; t <= max_threads; t *= 2) b->Threads(t);
    b->UseRealTime()->Unit(benchmark::kNanosecond);
}

template <class Locks>
using HostPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Locks, HostBackend>;

}  // namespace

int main(int argc, char** argv) {
    add<HostPool<NoLock>>("NoLock", 1);  // one thread only: the floor every policy pays on top of
    add<HostPool<SingleMutex>>("SingleMutex");
    add<HostPool<LockedBy<std::mutex>>>("StdMutex");  // SingleMutex before SpinMutex
    add<HostPool<Striped<16>>>("Striped16");
    add<HostPool<ThreadCached<>>>("ThreadCached");
    add<HostPool<ThreadCached<8, Striped<16>>>>("ThreadCachedStriped16");
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
