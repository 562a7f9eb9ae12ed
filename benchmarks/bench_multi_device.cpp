// Host-to-device bandwidth to several devices at once: one context over the devices of one
// platform (the GPUs if it has any), one in-order queue and one uploading thread per device.
//
// Families, Args(devices), each iteration one blocking upload of CLPOOL_BENCH_MAX_BYTES (default
// 256 MiB) to every device at once; bytes_per_second is the aggregate over the devices:
//   h2d/pinned/D   upload() from a PinnedVector made by that device's pinned pool (direct DMA)
//   h2d/staged/D   upload() from pageable memory, staged through that device's staging pool
//   h2d/driver/D   clEnqueueWriteBuffer from pageable memory (the driver's own path, the baseline)
// The scaling targets (docs/DEVICES.md, "Several devices") compare D = 2 with D = 1 of the same
// family in the same run: benchmarks/gpu/multi_gpu.sh prints the ratios.
// CLPOOL_BENCH_DEVICES=N caps the devices used (default: every device of the platform).
#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/pools/registry.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::size_t transfer_bytes() {
    const char* v = std::getenv("CLPOOL_BENCH_MAX_BYTES");
    return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : std::size_t{256} << 20;
}

// The platform with the most GPUs, else the one with the most devices; a context over its devices,
// or with CLPOOL_BENCH_CONTEXTS=per-device one context per device (the DeviceHandle layout).
struct Devices {
    std::vector<cl_device_id> ids;
    std::vector<cl::Context> contexts;
    std::vector<cl::CommandQueue> queues;

    static Devices& get() {
        static auto* d = new Devices(make());  // never destroyed: no OpenCL call at exit
        return *d;
    }

private:
    static std::vector<cl_device_id> devices_of(cl_platform_id p, cl_device_type type) {
        cl_uint n = 0;
        if (clGetDeviceIDs(p, type, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
        std::vector<cl_device_id> out(n);
        clGetDeviceIDs(p, type, n, out.data(), nullptr);
        return out;
    }

    static Devices make() {
        cl_uint np = 0;
        clGetPlatformIDs(0, nullptr, &np);
        std::vector<cl_platform_id> platforms(np);
        if (np) clGetPlatformIDs(np, platforms.data(), nullptr);
        std::vector<cl_device_id> best;
        bool best_gpu = false;
        for (cl_platform_id p : platforms) {
            auto gpus = devices_of(p, CL_DEVICE_TYPE_GPU);
            auto all = devices_of(p, CL_DEVICE_TYPE_ALL);
            if (!gpus.empty() && (!best_gpu || gpus.size() > best.size())) best = gpus, best_gpu = true;
            else if (!best_gpu && all.size() > best.size()) best = all;
        }
        if (best.empty()) throw std::runtime_error("no OpenCL device");
        if (const char* cap = std::getenv("CLPOOL_BENCH_DEVICES"))
            best.resize(std::min<std::size_t>(best.size(), std::strtoul(cap, nullptr, 10)));
        Devices d;
        d.ids = best;
        cl_int err = CL_SUCCESS;
        const char* layout = std::getenv("CLPOOL_BENCH_CONTEXTS");
        const bool per_device = layout && std::string(layout) == "per-device";
        auto make_context = [&](const cl_device_id* ids, std::size_t n) {
            cl::Context c(clCreateContext(nullptr, static_cast<cl_uint>(n), ids, nullptr, nullptr, &err), false);
            if (err != CL_SUCCESS) throw std::runtime_error("clCreateContext: " + std::to_string(err));
            d.contexts.push_back(c);
        };
        if (per_device)
            for (cl_device_id id : best) make_context(&id, 1);
        else make_context(best.data(), best.size());
        for (std::size_t i = 0; i < best.size(); ++i) {
            const cl::Context& c = d.contexts[per_device ? i : 0];
            cl_command_queue q = clCreateCommandQueue(c(), best[i], 0, &err);
            if (err != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue: " + std::to_string(err));
            d.queues.emplace_back(q, false);
        }
        return d;
    }
};

enum class source { pinned, staged, driver };

template <source S>
void h2d(benchmark::State& state) {
    auto& devs = Devices::get();
    const auto count = static_cast<std::size_t>(state.range(0));
    if (count > devs.ids.size()) {
        state.SkipWithError(("only " + std::to_string(devs.ids.size()) + " device(s) on the platform").c_str());
        return;
    }
    const std::size_t n = transfer_bytes();
    struct PerDevice {
        clpool::BufferPool::handle dst;
        std::vector<unsigned char> pageable;
        clpool::PinnedVector<unsigned char> pinned;
    };
    std::vector<PerDevice> per;
    per.reserve(count);
    for (std::size_t d = 0; d < count; ++d) {
        const auto& q = devs.queues[d];
        PerDevice p{clpool::get_buffer_pool(q).allocate(n),
                    {},
                    clpool::PinnedVector<unsigned char>{clpool::PinnedAllocator<unsigned char>(q)}};
        if (S == source::pinned) p.pinned.assign(n, 0x5A);
        else p.pageable.assign(n, 0x5A);
        per.push_back(std::move(p));
    }
    clpool::TransferOptions o;
    o.async = false;
    o.stage = S == source::staged;
    auto one = [&](std::size_t d) {
        const auto& q = devs.queues[d];
        auto& p = per[d];
        if (S == source::driver) {
            clEnqueueWriteBuffer(q(), p.dst.buffer()(), CL_TRUE, 0, n, p.pageable.data(), 0, nullptr, nullptr);
        } else {
            const void* src = S == source::pinned ? static_cast<const void*>(p.pinned.data()) : p.pageable.data();
            clpool::upload(q, p.dst, 0, src, n, o);
        }
        q.finish();
    };
    for (std::size_t d = 0; d < count; ++d) one(d);  // warm: staging buffers, first-touch
    for (auto _ : state) {
        std::vector<std::thread> threads;
        for (std::size_t d = 1; d < count; ++d) threads.emplace_back(one, d);
        one(0);
        for (auto& t : threads) t.join();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count * n));
    state.counters["devices"] = static_cast<double>(count);
}

void device_counts(benchmark::internal::Benchmark* b) {
    for (int d : {1, 2, 4, 8}) b->Arg(d);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(h2d<source::pinned>)->Name("h2d/pinned")->Apply(device_counts);
BENCHMARK(h2d<source::staged>)->Name("h2d/staged")->Apply(device_counts);
BENCHMARK(h2d<source::driver>)->Name("h2d/driver")->Apply(device_counts);

}  // namespace

BENCHMARK_MAIN();
