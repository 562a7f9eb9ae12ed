// Host<->device bandwidth: the driver's pageable copies (baseline) vs pinned pool memory vs the staging pipeline.
//
// Families, each for H2D (h2d/...) and D2H (d2h/...), sizes 4 KiB .. CLPOOL_BENCH_MAX_BYTES
// (default 256 MiB; the GPU script sets 1 GiB), every iteration a whole blocking transfer:
//   driver_pageable  clEnqueueWrite/ReadBuffer from/to a std::vector          (the baseline)
//   pinned           upload/download from/to a pinned_vector (direct pinned path)
//   staged           upload/download from/to a std::vector, staging forced on every size
//   auto             upload/download with default options (small sizes go direct)
// plus map_unmap: what mapping a pinned staging buffer per use would cost.
// bench_transfer_cuda (where CUDA builds) measures cudaMemcpy pinned/pageable the same way.
#include "common/setup.hpp"

#include <clpool/pinned_allocator.hpp>
#include <clpool/transfer.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
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

template <bool H2D, path P>
void transfer(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& q = Device::get().queue;
    try {
        auto dev = device_buffer(n);
        auto host = pageable(P == path::pinned ? 0 : n);
        clpool::pinned_vector<unsigned char> pinned{clpool::PinnedAllocator<unsigned char>(q)};
        if (P == path::pinned) pinned.assign(n, 0x5A);
        unsigned char* ptr = P == path::pinned ? pinned.data() : host.data();
        clpool::TransferOptions o;
        if (P == path::staged) {
            o.stage = true;
            o.direct_max_bytes = 0;
        }
        for (auto _ : state) {
            if constexpr (P == path::driver_pageable) {
                const cl_int err = H2D ? clEnqueueWriteBuffer(q(), dev.buffer()(), CL_TRUE, 0, n, ptr, 0, nullptr, nullptr)
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

// Mapping and unmapping a pinned buffer around each use (the alternative to
// keeping staging buffers mapped for a whole transfer), on a queue of its own.
void map_unmap(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto& d = Device::get();
    try {
        auto h = clpool::get_pinned_pool(d.queue).allocate(n);
        const auto side = clpool::detail::side_queue(d.context, d.device);
        for (auto _ : state) {
            void* p = clpool::detail::map_pinned(side, h.buffer(), n);
            benchmark::DoNotOptimize(p);
            clpool::detail::unmap_after(side, h.buffer(), p, nullptr).wait();
        }
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

BENCHMARK(transfer<true, path::driver_pageable>)->Name("h2d/driver_pageable")->Apply(sizes);
BENCHMARK(transfer<true, path::pinned>)->Name("h2d/pinned")->Apply(sizes);
BENCHMARK(transfer<true, path::staged>)->Name("h2d/staged")->Apply(sizes);
BENCHMARK(transfer<true, path::automatic>)->Name("h2d/auto")->Apply(sizes);
BENCHMARK(transfer<false, path::driver_pageable>)->Name("d2h/driver_pageable")->Apply(sizes);
BENCHMARK(transfer<false, path::pinned>)->Name("d2h/pinned")->Apply(sizes);
BENCHMARK(transfer<false, path::staged>)->Name("d2h/staged")->Apply(sizes);
BENCHMARK(transfer<false, path::automatic>)->Name("d2h/auto")->Apply(sizes);
BENCHMARK(map_unmap)->Arg(4 << 20)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    clpool::bench::describe_context();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
