// CUDA's answer for the multi-GPU targets: aggregate host-to-device bandwidth to 1, 2, 4, ... GPUs
// at once (one host thread per GPU), from pinned memory (cudaHostAlloc, cudaMemcpyAsync on the
// thread's stream) and from pageable memory (malloc, touched; cudaMemcpy, the call an engine makes
// for memory it did not allocate pinned). The baseline for bench_multi_device's OpenCL figures on
// the same machine (benchmarks/gpu/multi_gpu.sh runs both).
//   nvcc -O2 -o cuda_multi_h2d benchmarks/gpu/cuda_multi_h2d.cu && ./cuda_multi_h2d [MiB=256] [reps=10] [rounds=3]
// Prints one line per measurement, "cuda <pinned|pageable> <gpus> <GB/s, median of rounds> <x one GPU>".
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(x)                                                                                    \
    do {                                                                                            \
        cudaError_t e = (x);                                                                        \
        if (e != cudaSuccess) {                                                                     \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

int main(int argc, char** argv) {
    const size_t bytes = size_t(argc > 1 ? std::atoll(argv[1]) : 256) << 20;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    std::vector<void*> pinned(n), dev(n);
    std::vector<char*> pageable(n);
    std::vector<cudaStream_t> streams(n);
    for (int d = 0; d < n; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaHostAlloc(&pinned[d], bytes, cudaHostAllocPortable));
        std::memset(pinned[d], 1, bytes);
        pageable[d] = static_cast<char*>(std::malloc(bytes));
        if (!pageable[d]) return 1;
        std::memset(pageable[d], 1, bytes);  // touched: no page faults in the timing
        CHECK(cudaMalloc(&dev[d], bytes));
        CHECK(cudaStreamCreate(&streams[d]));
        CHECK(cudaMemcpy(dev[d], pinned[d], bytes, cudaMemcpyHostToDevice));  // warm up both paths
        CHECK(cudaMemcpy(dev[d], pageable[d], bytes, cudaMemcpyHostToDevice));
    }
    std::printf("# %d GPU(s), %zu MiB per GPU, %d copies per round, median of %d rounds\n", n, bytes >> 20, reps,
                rounds);
    for (const bool use_pinned : {true, false}) {
        double one = 0;
        for (int k = 1; k <= n; k *= 2) {
            std::vector<double> gbs;
            for (int r = 0; r < rounds; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                std::vector<std::thread> threads;
                for (int d = 0; d < k; ++d)
                    threads.emplace_back([&, d] {
                        CHECK(cudaSetDevice(d));
                        for (int i = 0; i < reps; ++i) {
                            if (use_pinned)
                                CHECK(cudaMemcpyAsync(dev[d], pinned[d], bytes, cudaMemcpyHostToDevice, streams[d]));
                            else CHECK(cudaMemcpy(dev[d], pageable[d], bytes, cudaMemcpyHostToDevice));
                        }
                        CHECK(cudaStreamSynchronize(streams[d]));
                    });
                for (auto& t : threads) t.join();
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                gbs.push_back(double(bytes) * reps * k / s / 1e9);
            }
            std::sort(gbs.begin(), gbs.end());
            const double median = gbs[gbs.size() / 2];
            if (k == 1) one = median;
            std::printf("cuda %s %d %.2f %.2f\n", use_pinned ? "pinned" : "pageable", k, median, median / one);
        }
    }
    return 0;
}
