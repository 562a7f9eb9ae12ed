// The sub-allocating pools (docs/ARENA.md): hit pair, a miss served by splitting a held segment, and a
// kernel streaming through a sub-allocated buffer against the same kernel on a whole buffer.
//
// arena/hit/<pool>/<bytes>: allocate + release of a cached block; BufferPool beside it (the baseline).
// arena/split_miss/<pool>/<bytes>: a miss carved from a held segment (the pool caches nothing:
//   Capped at 0), then its release (the block's range merges back). Time per iteration = one
//   carve + one merge; on OpenCL also one clCreateSubBuffer and one clReleaseMemObject.
// arena/stream/<whole|sub>/<bytes>: y[i] = 2 * x[i] + 1 over two buffers, once whole buffers
//   (BufferPool), once blocks of an ArenaPool at a non-zero offset in their segments; real time
//   per kernel (clFinish). Compare the two in the same run; bytes_per_second is read + write.
#include "common/setup.hpp"

#include <string>
#include <vector>

using namespace clpool;
using namespace clpool::bench;

namespace {

template <class P>
void hit_pair(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<P>();
    pool->allocate(n).release();
    for (auto _ : state) {
        auto h = pool->allocate(n);
        benchmark::DoNotOptimize(h);
        h.release();
    }
    if (pool->stats().misses != 1) state.SkipWithError("a timed allocation missed the cache");
    state.SetItemsProcessed(state.iterations());
}

template <class B>
using Uncached = Pool<ArenaBuckets, DeviceLocal, Capped, SingleMutex, SubAllocated<B>>;

template <class P>
void split_miss(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<P>(Capped(0, 0));  // nothing cached: every allocation carves
    auto keep = pool->allocate(n);            // keeps the segment held
    for (auto _ : state) {
        auto h = pool->allocate(n);
        benchmark::DoNotOptimize(h);
        h.release();
    }
    const auto s = pool->stats();
    if (s.segment_allocations != 1) state.SkipWithError("a timed allocation made a segment");
    if (s.hits != 0) state.SkipWithError("a timed allocation hit the cache");
    state.SetItemsProcessed(state.iterations());
}

#ifdef CLPOOL_HAS_OPENCL
constexpr const char* stream_source = R"CLC(
__kernel void stream(__global const float* x, __global float* y) {
    const size_t i = get_global_id(0);
    y[i] = 2.0f * x[i] + 1.0f;
}
)CLC";

cl_kernel stream_kernel() {
    static cl_kernel k = [] {
        auto& d = Device::get();
        cl_int err = CL_SUCCESS;
        const char* src = stream_source;
        cl_program p = clCreateProgramWithSource(d.context(), 1, &src, nullptr, &err);
        opencl::check(err, "clCreateProgramWithSource");
        opencl::check(clBuildProgram(p, 1, &d.device, "", nullptr, nullptr), "clBuildProgram");
        cl_kernel kk = clCreateKernel(p, "stream", &err);
        opencl::check(err, "clCreateKernel");
        return kk;
    }();
    return k;
}

void run_stream(benchmark::State& state, cl_mem x, cl_mem y, std::size_t n) {
    auto& d = Device::get();
    cl_kernel k = stream_kernel();
    opencl::check(clSetKernelArg(k, 0, sizeof x, &x), "clSetKernelArg");
    opencl::check(clSetKernelArg(k, 1, sizeof y, &y), "clSetKernelArg");
    const std::size_t items = n / sizeof(float);
    const float zero = 0.0f;
    opencl::check(clEnqueueFillBuffer(d.queue(), x, &zero, sizeof zero, 0, n, 0, nullptr, nullptr), "fill");
    opencl::check(clEnqueueNDRangeKernel(d.queue(), k, 1, nullptr, &items, nullptr, 0, nullptr, nullptr), "warm-up");
    opencl::check(clFinish(d.queue()), "clFinish");
    for (auto _ : state) {
        opencl::check(clEnqueueNDRangeKernel(d.queue(), k, 1, nullptr, &items, nullptr, 0, nullptr, nullptr),
                      "clEnqueueNDRangeKernel");
        opencl::check(clFinish(d.queue()), "clFinish");
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * n));
}

void stream_whole(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<BufferPool>();
    auto x = pool->allocate(n), y = pool->allocate(n);
    run_stream(state, x.buffer()(), y.buffer()(), n);
}

void stream_sub(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<ArenaPool>();
    // 2 MiB blocks first, so 8 MiB x and y lie at non-zero offsets of one 20 MiB segment (256 MiB
    // ones get segments of their own, at offset 0, but are sub-buffers still).
    auto a = pool->allocate(std::size_t{2} << 20);
    auto x = pool->allocate(n);
    auto b = pool->allocate(std::size_t{2} << 20);
    auto y = pool->allocate(n);
    state.counters["x_offset"] = static_cast<double>(x.buffer().offset());
    state.counters["y_offset"] = static_cast<double>(y.buffer().offset());
    if (x.buffer().is_fallback() || y.buffer().is_fallback()) state.SkipWithError("a block fell back");
    run_stream(state, x.buffer()(), y.buffer()(), n);
}
#endif

void register_all() {
    for (std::int64_t n : {std::int64_t{4096}, std::int64_t{1} << 20}) {
#ifdef CLPOOL_HAS_OPENCL
        benchmark::RegisterBenchmark("arena/hit/BufferPool/opencl", hit_pair<BufferPool>)->Arg(n);
        benchmark::RegisterBenchmark("arena/hit/ArenaPool/opencl", hit_pair<ArenaPool>)->Arg(n);
#endif
        benchmark::RegisterBenchmark("arena/hit/BufferPool/host", hit_pair<host::BufferPool>)->Arg(n);
        benchmark::RegisterBenchmark("arena/hit/ArenaPool/host", hit_pair<host::ArenaPool>)->Arg(n);
    }
    for (std::int64_t n : {std::int64_t{4096}, std::int64_t{1} << 20, std::int64_t{8} << 20}) {
#ifdef CLPOOL_HAS_OPENCL
        benchmark::RegisterBenchmark("arena/split_miss/opencl", split_miss<Uncached<OpenCLBackend>>)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
#endif
        benchmark::RegisterBenchmark("arena/split_miss/host", split_miss<Uncached<HostBackend>>)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
    }
#ifdef CLPOOL_HAS_OPENCL
    for (std::int64_t n : {std::int64_t{8} << 20, std::int64_t{256} << 20}) {
        benchmark::RegisterBenchmark("arena/stream/whole", stream_whole)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/stream/sub", stream_sub)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
#endif
}

}  // namespace

int main(int argc, char** argv) {
    describe_context();
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
