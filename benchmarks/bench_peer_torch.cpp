// Peers, side by side in one run: clpool's hit pair against PyTorch's CUDA caching
// allocators and the CUDA runtime's own calls, for device and pinned host memory.
//
// clpool/<pool>/<bytes>        allocate+release of a cached buffer (OpenCL on the GPU)
// torch/device/<bytes>         c10::cuda::CUDACachingAllocator::raw_alloc + raw_delete, a cache hit
// torch/pinned/<bytes>         Torch's CUDA pinned host allocator: allocate + free, a cache hit
// cuda/cudaMalloc/<bytes>      cudaMalloc + cudaFree: the driver baseline, no cache
// cuda/cudaHostAlloc/<bytes>   cudaHostAlloc + cudaFreeHost
// clpool/<pool>+history_on/..., torch/device+history_on/<bytes>: the same hit pairs with
//   each allocator's history of its last 65536 events on, no call sites:
//   record_history(65536) against _record_memory_history(context=None)
// Torch is called through a plain C shim (one extra non-inlined call, ~1 ns),
// so its C++ ABI flags do not reach this file.
#include "common/setup.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <cuda_runtime_api.h>

#ifdef CLPOOL_BENCH_HAVE_TORCH
#include "peer/torch_shim.h"
#endif

#include <string>

using namespace clpool;
using namespace clpool::bench;

namespace {

constexpr std::size_t history_events = 65536;

template <class P, bool History = false>
void clpool_pair(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<P>();
    if constexpr (History) pool->record_history(history_events);
    pool->allocate(n).release();
    for (auto _ : state) {
        auto h = pool->allocate(n);
        benchmark::DoNotOptimize(h);
        h.release();
    }
    if (pool->stats().misses != 1) state.SkipWithError("a timed allocation missed the cache");
    state.SetItemsProcessed(state.iterations());
}

void check(cudaError_t e, benchmark::State& state, const char* what) {
    if (e != cudaSuccess) state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
}

void cuda_malloc_pair(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        void* p = nullptr;
        check(cudaMalloc(&p, n), state, "cudaMalloc");
        benchmark::DoNotOptimize(p);
        check(cudaFree(p), state, "cudaFree");
    }
    state.SetItemsProcessed(state.iterations());
}

void cuda_host_alloc_pair(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        void* p = nullptr;
        check(cudaHostAlloc(&p, n, cudaHostAllocDefault), state, "cudaHostAlloc");
        benchmark::DoNotOptimize(p);
        check(cudaFreeHost(p), state, "cudaFreeHost");
    }
    state.SetItemsProcessed(state.iterations());
}

#ifdef CLPOOL_BENCH_HAVE_TORCH
template <void (*Pair)(std::size_t)>
void torch_pair(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    Pair(n);  // the one miss
    for (auto _ : state) Pair(n);
    state.SetItemsProcessed(state.iterations());
}

void torch_device_pair_history(benchmark::State& state) {
    if (const char* err = clpool_torch_record_history(history_events)) {
        state.SkipWithError(err);
        return;
    }
    torch_pair<clpool_torch_device_pair>(state);
    clpool_torch_record_history(0);
}
#endif

template <class F>
void add(const std::string& name, F f, benchmark::TimeUnit unit = benchmark::kNanosecond) {
    benchmark::RegisterBenchmark(name.c_str(), f)->Apply(size_args)->Unit(unit);
}

}  // namespace

int main(int argc, char** argv) {
    describe_context();
    int devices = 0;
    const bool have_cuda = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    benchmark::AddCustomContext("cuda_devices", std::to_string(devices));

#ifdef CLPOOL_HAS_OPENCL
    add("clpool/BufferPool/opencl", clpool_pair<BufferPool>);
    add("clpool/PinnedBufferPool/opencl", clpool_pair<PinnedBufferPool>);
    add("clpool/NoLock/opencl", clpool_pair<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, OpenCLBackend>>);
    add("clpool/ThreadCached/opencl",
        clpool_pair<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<>, OpenCLBackend>>);
    // Pinned pools with the thread-safe ThreadCached policy: the like-for-like peer of
    // Torch's (thread-safe) pinned host allocator.
    add("clpool/PinnedThreadCached/opencl",
        clpool_pair<Pool<PowerOfTwoBuckets, HostPinned, Unlimited, ThreadCached<>, OpenCLBackend>>);
    add("clpool/PinnedNoLock/opencl",
        clpool_pair<Pool<PowerOfTwoBuckets, HostPinned, Unlimited, NoLock, OpenCLBackend>>);
    add("clpool/BufferPool+history_on/opencl", clpool_pair<BufferPool, true>);
    add("clpool/NoLock+history_on/opencl",
        clpool_pair<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, OpenCLBackend, Diagnostics>, true>);
    add("clpool/ThreadCached+history_on/opencl",
        clpool_pair<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<>, OpenCLBackend, Diagnostics>, true>);
#endif
    add("clpool/BufferPool/host", clpool_pair<host::BufferPool>);
#ifdef CLPOOL_BENCH_HAVE_TORCH
    if (have_cuda) {
        if (const char* err = clpool_torch_init()) {
            benchmark::AddCustomContext("torch", std::string("unusable: ") + err);
        } else {
            benchmark::AddCustomContext("torch", clpool_torch_version());
            add("torch/device", torch_pair<clpool_torch_device_pair>);
            add("torch/pinned", torch_pair<clpool_torch_pinned_pair>);
            add("torch/device+history_on", torch_device_pair_history);
        }
    }
#else
    benchmark::AddCustomContext("torch", "not built (no usable Torch at configure time)");
#endif
    if (have_cuda) {
        add("cuda/cudaMalloc", cuda_malloc_pair, benchmark::kMicrosecond);
        add("cuda/cudaHostAlloc", cuda_host_alloc_pair, benchmark::kMicrosecond);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
