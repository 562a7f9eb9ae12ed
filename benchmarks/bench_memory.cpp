// Memory: bytes requested vs bytes held for realistic size mixes, per bucket scheme.
//
// memory/<scheme>/<mix>: allocates every size of the mix at once (the live
// working set), then releases them all. Counters (not timings are the point):
//   requested      bytes asked for by the live handles
//   held           bytes of the buffers handed out (bucket rounding included)
//   waste_pct      (held - requested) / requested, in percent
//   cached_after   bytes the pool still holds once the churn phase is over
//   peak_ratio     peak bytes held from the driver / peak bytes requested,
//                  over the churn: a loop of 40 iterations, each the same 256
//                  sizes of the mix in a new order, each replacing a random one
//                  of 64 live handles (an engine's step loop);
//                  for the arena pools the driver holds segments: peak segment bytes
//   held_ratio     bytes held from the driver / requested, with the whole mix live
//   churn_driver_free_pct  allocations of the churn that made no driver allocation, in percent
//   churn_driver_free_after_first_pct  the same after the loop's first iteration
//   peak_ratio_seeds_mean, _max, churn_driver_free_after_first_seeds_min
//                  the churn again with its generator seeded 7 and 1..15: one seed's
//                  peak moves by a tenth with the draw, so compare policies on these
// The pool runs on a backend that allocates nothing, so the mixes can reach
// gigabytes on any machine.
// `bench_memory --write-churn-traces DIR` writes each mix's churn, every seed, as a clpool trace
// (churn_<mix>_seed<S>.trace) instead, for a replay through other allocators.
#include "common/phantom_backend.hpp"
#include "common/setup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace clpool;
using namespace clpool::bench;

namespace {

// float32 activations and weights of a transformer block and a small CNN:
// batch 8, sequence 512, width 768/3072, heads 12; images 224x224 and below.
std::vector<std::size_t> tensor_mix() {
    std::vector<std::size_t> out;
    const std::size_t f = 4;
    for (std::size_t layer = 0; layer < 6; ++layer) {
        out.push_back(8 * 512 * 768 * f);        // hidden states
        out.push_back(8 * 512 * 3072 * f);       // MLP activations
        out.push_back(8 * 12 * 512 * 512 * f);   // attention scores
        out.push_back(768 * 768 * f);            // projection weights
        out.push_back(768 * 3072 * f);           // MLP weights
        out.push_back(3072 * f);                 // biases
        out.push_back(768 * f);
    }
    for (std::size_t c : {64, 128, 256, 512}) {
        const std::size_t hw = 224 * 64 / c;
        out.push_back(8 * c * hw * hw * f);  // feature maps
        out.push_back(c * c * 9 * f);        // 3x3 kernels
        out.push_back(c * f);
    }
    for (std::size_t n : {1, 7, 100, 1000, 12345}) out.push_back(n * f);  // scalars, small tables
    return out;
}

// 400 sizes drawn log-uniformly between 1 KiB and 64 MiB (fixed seed).
std::vector<std::size_t> loguniform_mix() {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> e(10.0, 26.0);
    std::vector<std::size_t> out;
    for (int i = 0; i < 400; ++i) out.push_back(static_cast<std::size_t>(std::exp2(e(rng))));
    return out;
}

// Bytes held from the driver: segments for a sub-allocating pool.
std::size_t driver_held(const PoolStats& s) { return s.segments ? s.segment_bytes : s.bytes_allocated; }
std::size_t driver_peak(const PoolStats& s) {
    return s.peak_segment_bytes ? s.peak_segment_bytes : s.peak_bytes_allocated;
}

// Driver calls: segments (and fallbacks) and the sub-buffers made (each a
// clCreateSubBuffer) for a sub-allocating pool, misses for the others.
std::uint64_t driver_allocations_of(const PoolStats& s) {
    return s.segments || s.peak_segment_bytes ? s.segment_allocations + s.sub_buffers_made : s.misses;
}

template <class Buckets>
using Bucketed = Pool<Buckets, DeviceLocal, Unlimited, SingleMutex, PhantomBackend>;
using Arena = BasicArenaPool<PhantomBackend>;

struct ChurnResult {
    double peak_ratio = 0;
    double driver_free_pct = 0;
    double driver_free_after_first_pct = 0;
    double hit_rate = 0;
    std::size_t cached_after = 0;
};

// Churn, as an engine's step loop: each of 40 iterations makes the same
// 256 requests (a fixed draw from the mix), in an order shuffled anew each
// time, each replacing a random one of 64 live handles. request(slot, n) for
// each, in order; iteration_done(i) after each iteration.
constexpr std::size_t churn_slots = 64;
template <class Request, class IterationDone>
void churn_requests(const std::vector<std::size_t>& sizes, std::uint64_t seed, Request&& request,
                    IterationDone&& iteration_done) {
    std::mt19937_64 rng(seed);
    std::vector<std::size_t> step_sizes(256);
    for (auto& n : step_sizes) n = sizes[rng() % sizes.size()];
    for (int iteration = 0; iteration < 40; ++iteration) {
        std::shuffle(step_sizes.begin(), step_sizes.end(), rng);
        for (std::size_t n : step_sizes) request(static_cast<std::size_t>(rng() % churn_slots), n);
        iteration_done(iteration);
    }
}

template <class P>
ChurnResult churn(const std::vector<std::size_t>& sizes, std::uint64_t seed) {
    P pool{PhantomBackend{}};
    std::vector<typename P::handle> ws(churn_slots);
    std::size_t live_requested = 0, peak_requested = 0;
    std::uint64_t allocations = 0, first_allocations = 0, first_driver = 0;
    churn_requests(
        sizes, seed,
        [&](std::size_t slot, std::size_t n) {
            auto& h = ws[slot];
            live_requested -= h.nbytes();
            h = pool.allocate(n);
            ++allocations;
            live_requested += h.nbytes();
            peak_requested = std::max(peak_requested, live_requested);
        },
        [&](int iteration) {
            if (iteration == 0) {
                first_allocations = allocations;
                first_driver = driver_allocations_of(pool.stats());
            }
        });
    ws.clear();
    const auto cs = pool.stats();
    const std::uint64_t driver_allocations = driver_allocations_of(cs);
    ChurnResult r;
    r.peak_ratio = static_cast<double>(driver_peak(cs)) / static_cast<double>(peak_requested);
    r.driver_free_pct =
        100.0 * static_cast<double>(allocations - driver_allocations) / static_cast<double>(allocations);
    r.driver_free_after_first_pct = 100.0 * (1.0 - static_cast<double>(driver_allocations - first_driver) /
                                                       static_cast<double>(allocations - first_allocations));
    r.hit_rate = cs.hit_rate();
    r.cached_after = cs.bytes_cached;
    return r;
}

template <class P>
void memory(benchmark::State& state, std::vector<std::size_t> (*make_mix)()) {
    const auto sizes = make_mix();
    P pool{PhantomBackend{}};
    std::size_t requested = 0, held = 0, driver = 0;
    for (auto _ : state) {
        std::vector<typename P::handle> live;
        live.reserve(sizes.size());
        for (auto n : sizes) live.push_back(pool.allocate(n));
        const auto s = pool.stats();
        requested = s.bytes_requested;
        held = s.bytes_in_use;
        driver = driver_held(s);
    }
    const ChurnResult c = churn<P>(sizes, 7);
    double seeds_sum = 0, seeds_max = 0, seeds_min_free = 100;
    for (const std::uint64_t seed : {7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
        const ChurnResult r = seed == 7 ? c : churn<P>(sizes, seed);
        seeds_sum += r.peak_ratio;
        seeds_max = std::max(seeds_max, r.peak_ratio);
        seeds_min_free = std::min(seeds_min_free, r.driver_free_after_first_pct);
    }
    state.counters["requested"] = static_cast<double>(requested);
    state.counters["held"] = static_cast<double>(held);
    state.counters["waste_pct"] = 100.0 * static_cast<double>(held - requested) / static_cast<double>(requested);
    state.counters["cached_after"] = static_cast<double>(c.cached_after);
    state.counters["peak_ratio"] = c.peak_ratio;
    state.counters["held_ratio"] = static_cast<double>(driver) / static_cast<double>(requested);
    state.counters["churn_driver_free_pct"] = c.driver_free_pct;
    state.counters["churn_driver_free_after_first_pct"] = c.driver_free_after_first_pct;
    state.counters["churn_hit_rate"] = c.hit_rate;
    state.counters["peak_ratio_seeds_mean"] = seeds_sum / 16;
    state.counters["peak_ratio_seeds_max"] = seeds_max;
    state.counters["churn_driver_free_after_first_seeds_min"] = seeds_min_free;
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(sizes.size()));
}

// The churn as a clpool trace (docs/TRACE_FORMAT.md), in the order the pool
// sees it: the new buffer is made, then the one it replaces goes. One event per
// microsecond; one context, CL_MEM_READ_WRITE. For a replay through other
// allocators (benchmarks/gpu/replay_vs_torch.py).
bool write_churn_trace(const std::string& path, const std::vector<std::size_t>& sizes, std::uint64_t seed) {
    std::ofstream out(path);
    out << "clpool-trace 1\n# bench_memory churn, seed " << seed << "\n";
    std::vector<std::uint64_t> live(churn_slots, 0);  // each slot's buffer id; 0: none
    std::uint64_t next_id = 1, t = 0;
    churn_requests(
        sizes, seed,
        [&](std::size_t slot, std::size_t n) {
            out << (t += 1000) << " alloc " << next_id << " 0x1 0x1 " << n << "\n";
            if (live[slot]) out << (t += 1000) << " free " << live[slot] << "\n";
            live[slot] = next_id++;
        },
        [](int) {});
    for (std::uint64_t id : live)
        if (id) out << (t += 1000) << " free " << id << "\n";
    return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
    // bench_memory --write-churn-traces DIR: the churn of each mix and seed as a trace, and nothing else.
    if (argc == 3 && std::string(argv[1]) == "--write-churn-traces") {
        const std::pair<const char*, std::vector<std::size_t> (*)()> mixes[] = {{"tensors", tensor_mix},
                                                                                {"loguniform", loguniform_mix}};
        for (const auto& [name, make_mix] : mixes)
            for (const std::uint64_t seed : {7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
                const std::string path =
                    std::string(argv[2]) + "/churn_" + name + "_seed" + std::to_string(seed) + ".trace";
                if (!write_churn_trace(path, make_mix(), seed)) {
                    std::fprintf(stderr, "bench_memory: cannot write %s\n", path.c_str());
                    return 1;
                }
            }
        return 0;
    }
    benchmark::RegisterBenchmark("memory/PowerOfTwo/tensors", memory<Bucketed<PowerOfTwoBuckets>>, tensor_mix);
    benchmark::RegisterBenchmark("memory/FixedSet/tensors", memory<Bucketed<FixedSetBuckets>>, tensor_mix);
    benchmark::RegisterBenchmark("memory/Arena/tensors", memory<Arena>, tensor_mix);
    benchmark::RegisterBenchmark("memory/PowerOfTwo/loguniform", memory<Bucketed<PowerOfTwoBuckets>>, loguniform_mix);
    benchmark::RegisterBenchmark("memory/FixedSet/loguniform", memory<Bucketed<FixedSetBuckets>>, loguniform_mix);
    benchmark::RegisterBenchmark("memory/Arena/loguniform", memory<Arena>, loguniform_mix);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
