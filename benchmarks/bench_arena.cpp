// The sub-allocating pools (docs/ARENA.md): hit pair, a miss served by splitting a held segment, and a
// kernel streaming through a sub-allocated buffer against the same kernel on a whole buffer.
//
// arena/hit/<pool>/<bytes>: allocate + release of a cached block; BufferPool beside it (the baseline).
// arena/split_miss/<pool>/<bytes>: a miss carved from a held segment (the pool caches nothing:
//   Capped at 0), then its release (the block's range merges back). Time per iteration = one
//   carve + one merge. The carve lands where the last one did, so on OpenCL it takes back the
//   sub-buffer the last release kept (ArenaOptions::cached_views).
// arena/split_miss_new_view/<pool>/<bytes>: the same with no kept sub-buffers (cached_views 0):
//   every carve also makes a clCreateSubBuffer and every release a clReleaseMemObject, the
//   split miss of a range no view was kept for.
// raw/sub_buffer/opencl/<bytes>: clCreateSubBuffer + clReleaseMemObject of one region of a held
//   buffer, no pool: the driver's share of split_miss_new_view, in the same run.
// arena/stream/<whole|sub>/<bytes>: y[i] = 2 * x[i] + 1 over two buffers, once whole buffers
//   (BufferPool), once blocks of an ArenaPool at a non-zero offset in their segments; real time
//   per kernel (clFinish). Compare the two in the same run; bytes_per_second is read + write.
// arena/stream/svm_arena/<bytes>: the same kernel through SVM pointers (clSetKernelArgSVMPointer)
//   to two SVMArenaPool blocks at non-zero offsets in one segment (made large enough to hold both); svm_whole: through two whole
//   SVMPool allocations.
// arena/stream/offsets/<bytes>: y[yo + i] = 2 * x[xo + i] + 1, given OffsetArenaPool's (segment,
//   offset) pairs at non-zero offsets; offsets_whole: the same kernel on whole buffers, offsets 0.
// raw/svm_alloc/<bytes>: clSVMAlloc, a first use (a device fill, as SVMBackend commits), clSVMFree:
//   what an SVM allocation costs without a pool.
#include "common/setup.hpp"

#include <algorithm>
#include <memory>
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
void split_miss(benchmark::State& state, std::size_t cached_views) {
    const auto n = static_cast<std::size_t>(state.range(0));
    using B = typename P::backend_type;
    ArenaOptions options;
    options.cached_views = cached_views;
    // A first segment with room for n and a split of n (a small pool's first segment is otherwise
    // only as large as its first request).
    options.min_segment = 4 * n;
    if (n <= options.small_limit) options.small_segment = std::max(options.small_segment, 4 * n);
    // Nothing cached (Capped at 0): every allocation carves.
    auto pool = std::make_unique<P>(B(natural_backend<typename B::parent_type>(), options), Capped(0, 0));
    auto keep = pool->allocate(n);  // keeps the one segment held: every timed allocation splits its free rest
    for (auto _ : state) {
        auto h = pool->allocate(n);
        benchmark::DoNotOptimize(h);
        h.release();
    }
    const auto s = pool->stats();
    if (s.segment_allocations != 1) state.SkipWithError("a timed allocation made a segment");
    if (s.hits != 0) state.SkipWithError("a timed allocation hit the cache");
    if (cached_views == 0 && s.sub_buffers_reused != 0) state.SkipWithError("a carve took a kept view back");
    state.counters["views_made"] = static_cast<double>(s.sub_buffers_made);
    state.counters["views_reused"] = static_cast<double>(s.sub_buffers_reused);
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

constexpr const char* stream_offsets_source = R"CLC(
__kernel void stream_offsets(__global const float* x, ulong xo, __global float* y, ulong yo) {
    const size_t i = get_global_id(0);
    y[yo + i] = 2.0f * x[xo + i] + 1.0f;
}
)CLC";

cl_kernel build_kernel(const char* source, const char* name) {
    auto& d = Device::get();
    cl_int err = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource(d.context(), 1, &source, nullptr, &err);
    opencl::check(err, "clCreateProgramWithSource");
    opencl::check(clBuildProgram(p, 1, &d.device, "", nullptr, nullptr), "clBuildProgram");
    cl_kernel k = clCreateKernel(p, name, &err);
    opencl::check(err, "clCreateKernel");
    return k;
}

// The stream kernel's loop, its arguments already set; x (n bytes) is filled by `fill` first.
template <class Fill>
void time_stream(benchmark::State& state, cl_kernel k, std::size_t n, Fill&& fill) {
    auto& d = Device::get();
    const std::size_t items = n / sizeof(float);
    fill();
    opencl::check(clEnqueueNDRangeKernel(d.queue(), k, 1, nullptr, &items, nullptr, 0, nullptr, nullptr), "warm-up");
    opencl::check(clFinish(d.queue()), "clFinish");
    for (auto _ : state) {
        opencl::check(clEnqueueNDRangeKernel(d.queue(), k, 1, nullptr, &items, nullptr, 0, nullptr, nullptr),
                      "clEnqueueNDRangeKernel");
        opencl::check(clFinish(d.queue()), "clFinish");
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * n));
}

void run_stream_svm(benchmark::State& state, const SVMSpan& x, const SVMSpan& y, std::size_t n) {
    static cl_kernel k = build_kernel(stream_source, "stream");
    const cl::Kernel kernel(k, true);
    set_kernel_arg(kernel, 0, x);
    set_kernel_arg(kernel, 1, y);
    time_stream(state, k, n, [&] {
        const float zero = 0.0f;
        opencl::check(clEnqueueSVMMemFill(Device::get().queue(), x.get(), &zero, sizeof zero, n, 0, nullptr, nullptr),
                      "clEnqueueSVMMemFill");
    });
}

void run_stream_offsets(benchmark::State& state, cl_mem x, cl_ulong xo, cl_mem y, cl_ulong yo, std::size_t n) {
    static cl_kernel k = build_kernel(stream_offsets_source, "stream_offsets");
    opencl::check(clSetKernelArg(k, 0, sizeof x, &x), "clSetKernelArg");
    opencl::check(clSetKernelArg(k, 1, sizeof xo, &xo), "clSetKernelArg");
    opencl::check(clSetKernelArg(k, 2, sizeof y, &y), "clSetKernelArg");
    opencl::check(clSetKernelArg(k, 3, sizeof yo, &yo), "clSetKernelArg");
    time_stream(state, k, n, [&] {
        const float zero = 0.0f;
        opencl::check(clEnqueueFillBuffer(Device::get().queue(), x, &zero, sizeof zero, xo * sizeof(float), n, 0,
                                          nullptr, nullptr),
                      "clEnqueueFillBuffer");
    });
}

// Options that put two 2 MiB blocks and two of n bytes in one segment, x and y at non-zero offsets
// (by default a request above large_limit gets a segment of its own, at offset 0).
ArenaOptions one_segment_for(std::size_t n) {
    ArenaOptions o;
    o.large_segment = o.large_limit = o.min_segment = 2 * n + (std::size_t{8} << 20);
    return o;
}

template <class P>
std::unique_ptr<P> one_segment_pool(std::size_t n) {
    using B = typename P::backend_type;
    return std::make_unique<P>(B(natural_backend<typename B::parent_type>(), one_segment_for(n)));
}

void stream_svm_arena(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = one_segment_pool<SVMArenaPool>(n);
    auto a = pool->allocate(std::size_t{2} << 20);  // as stream_sub: x and y at non-zero offsets
    auto x = pool->allocate(n);
    auto b = pool->allocate(std::size_t{2} << 20);
    auto y = pool->allocate(n);
    state.counters["x_offset"] = static_cast<double>(x.buffer().offset());
    state.counters["y_offset"] = static_cast<double>(y.buffer().offset());
    if (x.buffer().offset() == 0 || y.buffer().offset() == 0) state.SkipWithError("a block at offset 0");
    run_stream_svm(state, x.buffer(), y.buffer(), n);
}

void stream_svm_whole(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<SVMPool>();
    auto x = pool->allocate(n), y = pool->allocate(n);
    run_stream_svm(state, x.buffer(), y.buffer(), n);
}

void stream_offsets(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = one_segment_pool<OffsetArenaPool>(n);
    auto a = pool->allocate(std::size_t{2} << 20);
    auto x = pool->allocate(n);
    auto b = pool->allocate(std::size_t{2} << 20);
    auto y = pool->allocate(n);
    state.counters["x_offset"] = static_cast<double>(x.buffer().offset());
    state.counters["y_offset"] = static_cast<double>(y.buffer().offset());
    if (x.buffer().offset() == 0 || y.buffer().offset() == 0) state.SkipWithError("a block at offset 0");
    run_stream_offsets(state, x.buffer().segment()(), x.buffer().offset() / sizeof(float), y.buffer().segment()(),
                       y.buffer().offset() / sizeof(float), n);
}

void stream_offsets_whole(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto pool = make_pool<BufferPool>();
    auto x = pool->allocate(n), y = pool->allocate(n);
    run_stream_offsets(state, x.buffer()(), 0, y.buffer()(), 0, n);
}

void raw_svm_alloc(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& d = Device::get();
    for (auto _ : state) {
        void* p = clSVMAlloc(d.context(), CL_MEM_READ_WRITE, n, 0);
        if (!p) {
            state.SkipWithError("clSVMAlloc returned nullptr");
            break;
        }
        const unsigned char zero = 0;
        opencl::check(clEnqueueSVMMemFill(d.queue(), p, &zero, 1, n, 0, nullptr, nullptr), "clEnqueueSVMMemFill");
        opencl::check(clFinish(d.queue()), "clFinish");
        clSVMFree(d.context(), p);
    }
    state.SetItemsProcessed(state.iterations());
}

void raw_sub_buffer(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& d = Device::get();
    cl_int err = CL_SUCCESS;
    cl_mem parent = clCreateBuffer(d.context(), CL_MEM_READ_WRITE, 2 * n, nullptr, &err);
    opencl::check(err, "clCreateBuffer");
    const cl_buffer_region region{n, n};  // n is a multiple of every device's base-address alignment
    for (auto _ : state) {
        cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
        opencl::check(err, "clCreateSubBuffer");
        benchmark::DoNotOptimize(sub);
        clReleaseMemObject(sub);
    }
    clReleaseMemObject(parent);
    state.SetItemsProcessed(state.iterations());
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
        benchmark::RegisterBenchmark("arena/hit/OffsetArenaPool/opencl", hit_pair<OffsetArenaPool>)->Arg(n);
        benchmark::RegisterBenchmark("arena/hit/SVMPool/svm", hit_pair<SVMPool>)->Arg(n);
        benchmark::RegisterBenchmark("arena/hit/SVMArenaPool/svm", hit_pair<SVMArenaPool>)->Arg(n);
#endif
        benchmark::RegisterBenchmark("arena/hit/BufferPool/host", hit_pair<host::BufferPool>)->Arg(n);
        benchmark::RegisterBenchmark("arena/hit/ArenaPool/host", hit_pair<host::ArenaPool>)->Arg(n);
    }
    for (std::int64_t n : {std::int64_t{4096}, std::int64_t{1} << 20, std::int64_t{8} << 20}) {
#ifdef CLPOOL_HAS_OPENCL
        benchmark::RegisterBenchmark("arena/split_miss/opencl", split_miss<Uncached<OpenCLBackend>>,
                                     ArenaOptions{}.cached_views)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/split_miss_new_view/opencl", split_miss<Uncached<OpenCLBackend>>, 0)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("raw/sub_buffer/opencl", raw_sub_buffer)->Arg(n)->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/split_miss/offsets", split_miss<Uncached<OpenCLOffsetBackend>>, 0)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/split_miss/svm", split_miss<Uncached<SVMBackend>>, 0)
            ->Arg(n)
            ->Unit(benchmark::kMicrosecond);
#endif
        benchmark::RegisterBenchmark("arena/split_miss/host", split_miss<Uncached<HostBackend>>,
                                     ArenaOptions{}.cached_views)
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
        benchmark::RegisterBenchmark("arena/stream/svm_whole", stream_svm_whole)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/stream/svm_arena", stream_svm_arena)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/stream/offsets_whole", stream_offsets_whole)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("arena/stream/offsets", stream_offsets)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
    for (std::int64_t n : {std::int64_t{4096}, std::int64_t{1} << 20, std::int64_t{64} << 20})
        benchmark::RegisterBenchmark("raw/svm_alloc", raw_svm_alloc)->Arg(n)->Unit(benchmark::kMicrosecond);
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
