// Host<->device bandwidth: the driver's pageable copies (baseline) vs pinned pool memory vs the staging pipeline.
//
// Families, each for H2D (h2d/...) and D2H (d2h/...), sizes 4 KiB .. CLPOOL_BENCH_MAX_BYTES
// (default 256 MiB; the GPU script sets 1 GiB), every iteration a whole blocking transfer:
//   driver_pageable  clEnqueueWrite/ReadBuffer from/to a std::vector          (the baseline)
//   pinned           upload/download from/to a PinnedVector (direct pinned path)
//   staged           upload/download from/to a std::vector, staging forced on every size
//   auto             upload/download with default options (small sizes go direct)
// plus small_ab (4-256 KiB, a direct and an auto transfer timed alternately in one loop: the
// small-size check, immune to drift between runs), map_unmap: what mapping a pinned staging buffer per use would cost (staging buffers now stay
// mapped in a MappedPinnedPool, so transfers no longer pay it), and host_copy/{to,from}_pinned/T:
// the staging memcpy alone, 16 MiB split over T copy threads (what bounds the staged paths).
// CLPOOL_BENCH_COPY_THREADS=N sets TransferOptions::copy_threads for staged and auto (default: the
// library's, half the cores up to 8); CLPOOL_BENCH_CHUNK=N sets chunk_bytes (default: automatic).
// bench_transfer_cuda (where CUDA builds) measures cudaMemcpy pinned/pageable the same way.
#include "common/setup.hpp"

#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using clpool::bench::Device;

std::vector<std::int64_t> transfer_sizes() {
    std::vector<std::int64_t> out;
    for (std::size_t n = 4096; n <= clpool::bench::max_bytes(); n *= 4) out.push_back(static_cast<std::int64_t>(n));
    if (out.empty()) out.push_back(4096);
    return out;
}
void sizes(benchmark::internal::Benchmark* b) {
    for (auto n : transfer_sizes()) b->Arg(n);
    b->UseRealTime();
}

// Pageable host memory, touched so page faults stay out of the timing.
std::vector<unsigned char> pageable(std::size_t n) {
    std::vector<unsigned char> v(n);
    std::memset(v.data(), 0x5A, n);
    return v;
}

clpool::BufferPool::handle device_buffer(std::size_t n) {
    auto h = clpool::get_buffer_pool(Device::get().queue).allocate(n);
    const unsigned char zero = 0;
    clEnqueueFillBuffer(Device::get().queue(), h.buffer()(), &zero, 1, 0, n, 0, nullptr, nullptr);
    Device::get().queue.finish();
    return h;
}

enum class path { driver_pageable, pinned, staged, automatic };

// CLPOOL_BENCH_CHUNK=N sets TransferOptions::chunk_bytes for staged and auto (default 0: automatic).
std::size_t bench_chunk() {
    const char* v = std::getenv("CLPOOL_BENCH_CHUNK");
    return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : 0u;
}
unsigned bench_copy_threads() {
    const char* v = std::getenv("CLPOOL_BENCH_COPY_THREADS");
    return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0u;
}

template <bool H2D, path P>
void transfer(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& q = Device::get().queue;
    try {
        auto dev = device_buffer(n);
        auto host = pageable(P == path::pinned ? 0 : n);
        clpool::PinnedVector<unsigned char> pinned{clpool::PinnedAllocator<unsigned char>(q)};
        if (P == path::pinned) pinned.assign(n, 0x5A);
        unsigned char* ptr = P == path::pinned ? pinned.data() : host.data();
        clpool::TransferOptions o;
        o.copy_threads = bench_copy_threads();
        o.chunk_bytes = bench_chunk();
        if (P == path::staged) {
            o.stage = true;
            o.direct_max_bytes = 0;
        }
        for (auto _ : state) {
            if constexpr (P == path::driver_pageable) {
                const cl_int err =
                    H2D ? clEnqueueWriteBuffer(q(), dev.buffer()(), CL_TRUE, 0, n, ptr, 0, nullptr, nullptr)
                        : clEnqueueReadBuffer(q(), dev.buffer()(), CL_TRUE, 0, n, ptr, 0, nullptr, nullptr);
                if (err != CL_SUCCESS) state.SkipWithError("enqueue failed");
            } else if constexpr (H2D) {
                clpool::upload(q, dev, 0, ptr, n, o).wait();
            } else {
                clpool::download(q, ptr, dev, 0, n, o).wait();
            }
        }
        state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

// Small transfers, direct vs auto, interleaved: each iteration times one
// driver write/read and one upload/download of the same bytes back to back
// (which goes first alternates),
// so drift in the driver's latency (tens of percent over a run at these
// microsecond sizes) hits both alike. Counters: direct_us and auto_us (means),
// auto_over_direct (their ratio; the target is <= 1, "no slower than direct").
template <bool H2D>
void small_ab(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& q = Device::get().queue;
    try {
        auto dev = device_buffer(n);
        auto host = pageable(n);
        const clpool::TransferOptions o;
        using clk = std::chrono::steady_clock;
        double direct_s = 0, auto_s = 0;
        auto direct = [&] {
            const cl_int err =
                H2D ? clEnqueueWriteBuffer(q(), dev.buffer()(), CL_TRUE, 0, n, host.data(), 0, nullptr, nullptr)
                    : clEnqueueReadBuffer(q(), dev.buffer()(), CL_TRUE, 0, n, host.data(), 0, nullptr, nullptr);
            if (err != CL_SUCCESS) state.SkipWithError("enqueue failed");
        };
        auto automatic = [&] {
            if (H2D) clpool::upload(q, dev, 0, host.data(), n, o).wait();
            else clpool::download(q, host.data(), dev, 0, n, o).wait();
        };
        bool direct_first = true;  // alternated, so neither side always follows the other
        for (auto _ : state) {
            const auto t0 = clk::now();
            direct_first ? direct() : automatic();
            const auto t1 = clk::now();
            direct_first ? automatic() : direct();
            const auto t2 = clk::now();
            (direct_first ? direct_s : auto_s) += std::chrono::duration<double>(t1 - t0).count();
            (direct_first ? auto_s : direct_s) += std::chrono::duration<double>(t2 - t1).count();
            direct_first = !direct_first;
        }
        const double it = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
        state.counters["direct_us"] = direct_s / it * 1e6;
        state.counters["auto_us"] = auto_s / it * 1e6;
        state.counters["auto_over_direct"] = auto_s / direct_s;
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

// Mapping and unmapping a pinned buffer around each use, on a queue of its own:
// what each staging buffer cost per transfer before staging buffers stayed
// mapped in a MappedPinnedPool.
void map_unmap(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& d = Device::get();
    try {
        auto h = clpool::get_pinned_pool(d.queue).allocate(n);
        cl_int err = CL_SUCCESS;
        const cl::CommandQueue side(clCreateCommandQueue(d.context(), d.device, 0, &err), false);
        clpool::opencl::check(err, "clCreateCommandQueue");
        for (auto _ : state) {
            void* p = clEnqueueMapBuffer(side(), h.buffer()(), CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0,
                                         nullptr, nullptr, &err);
            clpool::opencl::check(err, "clEnqueueMapBuffer");
            benchmark::DoNotOptimize(p);
            clpool::opencl::check(clEnqueueUnmapMemObject(side(), h.buffer()(), p, 0, nullptr, nullptr), "unmap");
            clpool::opencl::check(clFinish(side()), "clFinish");
        }
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

// The host copy into (to_pinned) or out of (from_pinned) a mapped pinned staging buffer, 16 MiB,
// on `threads` threads through the transfers' copy workers; both sides touched beforehand.
template <bool ToPinned>
void host_copy(benchmark::State& state) {
    const std::size_t n = std::size_t{16} << 20;
    const auto threads = static_cast<unsigned>(state.range(0));
    try {
        auto staging = clpool::get_mapped_pinned_pool(Device::get().queue).allocate(n);
        auto* pinned = static_cast<unsigned char*>(staging.buffer().host());
        std::memset(pinned, 0x33, n);
        auto host = pageable(n);
        for (auto _ : state) {
            if (ToPinned) clpool::detail::copy_workers::instance().copy(pinned, host.data(), n, threads);
            else clpool::detail::copy_workers::instance().copy(host.data(), pinned, n, threads);
            benchmark::ClobberMemory();
        }
        state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}
void thread_counts(benchmark::internal::Benchmark* b) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 1; t <= 16 && t <= hw; t *= 2) b->Arg(t);
    b->UseRealTime();
}

BENCHMARK(transfer<true, path::driver_pageable>)->Name("h2d/driver_pageable")->Apply(sizes);
BENCHMARK(transfer<true, path::pinned>)->Name("h2d/pinned")->Apply(sizes);
BENCHMARK(transfer<true, path::staged>)->Name("h2d/staged")->Apply(sizes);
BENCHMARK(transfer<true, path::automatic>)->Name("h2d/auto")->Apply(sizes);
BENCHMARK(transfer<false, path::driver_pageable>)->Name("d2h/driver_pageable")->Apply(sizes);
BENCHMARK(transfer<false, path::pinned>)->Name("d2h/pinned")->Apply(sizes);
BENCHMARK(transfer<false, path::staged>)->Name("d2h/staged")->Apply(sizes);
BENCHMARK(transfer<false, path::automatic>)->Name("d2h/auto")->Apply(sizes);
BENCHMARK(small_ab<true>)->Name("h2d/small_ab")->RangeMultiplier(4)->Range(4 << 10, 256 << 10)->UseRealTime();
BENCHMARK(small_ab<false>)->Name("d2h/small_ab")->RangeMultiplier(4)->Range(4 << 10, 256 << 10)->UseRealTime();
BENCHMARK(map_unmap)->Arg(4 << 20)->UseRealTime();
BENCHMARK(host_copy<true>)->Name("host_copy/to_pinned")->Apply(thread_counts);
BENCHMARK(host_copy<false>)->Name("host_copy/from_pinned")->Apply(thread_counts);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    clpool::bench::describe_context();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
