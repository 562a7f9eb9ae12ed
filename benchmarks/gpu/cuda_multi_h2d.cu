// The hardware's answer for the multi-GPU targets: aggregate host-to-device bandwidth from
// pinned host memory to 1..N GPUs at once through CUDA (one host thread and stream per GPU), the
// baseline for bench_multi_device's OpenCL figures on the same machine.
//   nvcc -O2 -o cuda_multi_h2d benchmarks/gpu/cuda_multi_h2d.cu && ./cuda_multi_h2d [MiB=256] [reps=10]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e = (x);                                                                  \
        if (e != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

int main(int argc, char** argv) {
    const size_t bytes = (argc > 1 ? std::atoll(argv[1]) : 256) << 20;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    std::vector<void*> host(n), dev(n);
    std::vector<cudaStream_t> streams(n);
    for (int d = 0; d < n; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaHostAlloc(&host[d], bytes, cudaHostAllocPortable));
        std::memset(host[d], 1, bytes);
        CHECK(cudaMalloc(&dev[d], bytes));
        CHECK(cudaStreamCreate(&streams[d]));
        CHECK(cudaMemcpy(dev[d], host[d], bytes, cudaMemcpyHostToDevice));  // warm up
    }
    std::printf("devices  GB/s   x one\n");
    double one = 0;
    for (int k = 1; k <= n; k *= 2) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> threads;
        for (int d = 0; d < k; ++d)
            threads.emplace_back([&, d] {
                CHECK(cudaSetDevice(d));
                for (int r = 0; r < reps; ++r)
                    CHECK(cudaMemcpyAsync(dev[d], host[d], bytes, cudaMemcpyHostToDevice, streams[d]));
                CHECK(cudaStreamSynchronize(streams[d]));
            });
        for (auto& t : threads) t.join();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double gbs = double(bytes) * reps * k / s / 1e9;
        if (k == 1) one = gbs;
        std::printf("%7d %6.2f %6.2f\n", k, gbs, gbs / one);
    }
    return 0;
}
