// The CUDA runtime's own host<->device bandwidth, the yardstick for bench_transfer: cudaMemcpy pinned and pageable.
//
// Same sizes (4 KiB .. CLPOOL_BENCH_MAX_BYTES) and the same shape as bench_transfer,
// every iteration one whole synchronous cudaMemcpy:
//   h2d|d2h/cuda_pinned    host memory from cudaHostAlloc
//   h2d|d2h/cuda_pageable  a std::vector (the runtime stages it itself)
// Built only where CMake finds the CUDA toolkit and a working CUDA compiler;
// with no CUDA device at run time every benchmark reports an error instead.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::size_t max_bytes() {
    const char* v = std::getenv("CLPOOL_BENCH_MAX_BYTES");
    if (!v) return std::size_t{256} << 20;
    char* end = nullptr;
    const auto n = std::strtoull(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 256) {
        std::fprintf(stderr, "clpool: CLPOOL_BENCH_MAX_BYTES='%s' is not a byte count of at least 256\n", v);
        std::exit(2);
    }
    return n;
}

void sizes(benchmark::internal::Benchmark* b) {
    b->Arg(4096);
    for (std::size_t n = 16384; n <= max_bytes(); n *= 4) b->Arg(static_cast<std::int64_t>(n));
    b->UseRealTime();
}

template <bool H2D, bool Pinned>
void copy(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    void* dev = nullptr;
    if (cudaMalloc(&dev, n) != cudaSuccess) {
        state.SkipWithError("cudaMalloc failed (no CUDA device?)");
        return;
    }
    cudaMemset(dev, 0, n);
    void* pinned = nullptr;
    std::vector<unsigned char> pageable;
    if (Pinned) {
        if (cudaHostAlloc(&pinned, n, cudaHostAllocDefault) != cudaSuccess) {
            cudaFree(dev);
            state.SkipWithError("cudaHostAlloc failed");
            return;
        }
        std::memset(pinned, 0x5A, n);
    } else {
        pageable.assign(n, 0x5A);
    }
    void* host = Pinned ? pinned : pageable.data();
    cudaDeviceSynchronize();
    for (auto _ : state) {
        const auto err =
            H2D ? cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice) : cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost);
        if (err != cudaSuccess) {
            state.SkipWithError(cudaGetErrorString(err));
            break;
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
    if (pinned) cudaFreeHost(pinned);
    cudaFree(dev);
}

BENCHMARK(copy<true, true>)->Name("h2d/cuda_pinned")->Apply(sizes);
BENCHMARK(copy<true, false>)->Name("h2d/cuda_pageable")->Apply(sizes);
BENCHMARK(copy<false, true>)->Name("d2h/cuda_pinned")->Apply(sizes);
BENCHMARK(copy<false, false>)->Name("d2h/cuda_pageable")->Apply(sizes);

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    int count = 0;
    const auto err = cudaGetDeviceCount(&count);
    benchmark::AddCustomContext("cuda_devices", err == cudaSuccess ? std::to_string(count) : cudaGetErrorString(err));
    if (err == cudaSuccess && count > 0) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) benchmark::AddCustomContext("cuda_device", prop.name);
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
