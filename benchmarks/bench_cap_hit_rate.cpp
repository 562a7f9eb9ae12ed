// Cap hit rate: a byte-capped pool's hit rate under an engine-like batch loop, SingleMutex against ThreadCached.
//
// cap_hit_rate/<policy>/cap_kib:<KiB>/real_time/threads:<N>: N threads share
// one pool capped at <KiB> (16 buffers per bucket). One iteration is one step
// of a batch loop: allocate 1-16 buffers of 1 B to 64 KiB (buckets up to
// 64 KiB, so a 256 KiB cap is 4x the largest bucket), then release them all.
// Each thread's sizes come from its own seeded generator. Counters: hit_rate
// (the pool's, from stats(), at the end), evictions. The target:
// ThreadCached within 5 points of SingleMutex at 1 and 8 threads for any cap
// of at least 4x the largest bucket. Host memory: no driver in the way.
#include "common/setup.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <barrier>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace clpool;

namespace {

template <class P>
struct shared_run {
    std::unique_ptr<P> pool;
    std::unique_ptr<std::barrier<>> done;
};

template <class P>
void batch_loop(benchmark::State& state) {
    static shared_run<P> run;  // set up by thread 0 before the loop (Google Benchmark's start barrier publishes it)
    if (state.thread_index() == 0) {
        const auto cap = static_cast<std::size_t>(state.range(0)) << 10;
        run.pool = std::make_unique<P>(HostBackend{}, Capped{cap, Capped::default_per_bucket});
        run.done = std::make_unique<std::barrier<>>(state.threads());
    }
    std::minstd_rand rng(static_cast<unsigned>(state.thread_index()) + 7);
    std::vector<typename P::handle> live;
    for (auto _ : state) {
        const auto n = 1 + rng() % 16;
        for (unsigned j = 0; j < n; ++j) live.push_back(run.pool->allocate(1 + rng() % 65536));
        benchmark::DoNotOptimize(live.data());
        live.clear();
    }
    state.SetItemsProcessed(state.iterations());
    run.done->arrive_and_wait();
    if (state.thread_index() == 0) {
        const auto s = run.pool->stats();
        state.counters["hit_rate"] = s.hit_rate();
        state.counters["evictions"] = static_cast<double>(s.evictions);
        run.pool.reset();
    }
}

template <class Locks>
using CappedPool = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, Locks, HostBackend>;

template <class P>
void add(const std::string& name) {
    auto* b = benchmark::RegisterBenchmark(("cap_hit_rate/" + name).c_str(), batch_loop<P>);
    b->ArgName("cap_kib");
    for (std::int64_t kib : {256, 1024, 4096}) b->Arg(kib);
    for (int t : {1, 2, 4, 8}) b->Threads(t);
    b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
    add<CappedPool<SingleMutex>>("SingleMutex");
    add<CappedPool<ThreadCached<>>>("ThreadCached");
    add<CappedPool<ThreadCached<8, Striped<16>>>>("ThreadCachedStriped16");
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
