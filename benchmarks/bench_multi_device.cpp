// Host-to-device bandwidth to several devices at once, the staging pipeline's parameters swept, the
// host's own copy bandwidth beside it, and one context over two devices against one per device.
//
// Each iteration uploads CLPOOL_BENCH_MAX_BYTES (default 256 MiB) to each of D devices at once,
// one thread per device; bytes_per_second is the aggregate over the devices. Devices: those of
// the platform with the most GPUs (else the most devices), at most CLPOOL_BENCH_DEVICES.
//
// One context and in-order queue per device (what DeviceHandle makes):
//   h2d/pinned/D      upload() from a PinnedVector of that device's pinned pool (direct DMA)
//   h2d/staged/D      upload() from pageable memory through the staging pool, default options
//   h2d/driver/D      clEnqueueWriteBuffer from pageable memory (the driver's own path)
//   sweep/staged/D/tT/cC/bB   staged with copy_threads T, chunk_bytes C MiB, staging_buffers B
// The host alone, pageable source to pinned destination, D groups of T threads:
//   host/workers/D/tT the staging's own copy (copy_workers, streaming stores), D copies at once
//   host/memcpy/D/tT  D * T plain threads, each std::memcpy of its slice
// One context over the first two devices (D = 1 or 2), a queue per device, a thread per queue:
//   shared2/<pinned|staged>-<inorder|ooo>-<blocking|events>/D
//     inorder/ooo: in-order or out-of-order queues; blocking: upload(async = false) then
//     clFinish; events: upload(async = true), then wait on the returned event only.
// benchmarks/gpu/multi_gpu.sh runs them all in one run and multi_gpu_summary.py prints the
// tables and the scaling targets (docs/DEVICES.md, "Several devices").
//   CLPOOL_BENCH_ITERS (default 10) iterations per run, CLPOOL_BENCH_REPS (default 3) runs, medians kept;
//   CLPOOL_BENCH_SWEEP=0 leaves the sweep out.
#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/interop/detail/parallel_copy.hpp>
#include <clpool/pools/registry.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::size_t env_size(const char* name, std::size_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : fallback;
}

std::size_t transfer_bytes() { return env_size("CLPOOL_BENCH_MAX_BYTES", std::size_t{256} << 20); }

cl::CommandQueue make_queue(const cl::Context& c, cl_device_id d, cl_command_queue_properties props) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(c(), d, props, &err);
    if (err != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue: " + std::to_string(err));
    return cl::CommandQueue(q, false);
}

cl::Context make_context(const cl_device_id* ids, std::size_t n) {
    cl_int err = CL_SUCCESS;
    cl::Context c(clCreateContext(nullptr, static_cast<cl_uint>(n), ids, nullptr, nullptr, &err), false);
    if (err != CL_SUCCESS) throw std::runtime_error("clCreateContext: " + std::to_string(err));
    return c;
}

enum class layout { per_device, shared_in_order, shared_out_of_order };

// The devices and the three layouts of queues over them. Never destroyed: no OpenCL call at exit.
struct Devices {
    std::vector<cl_device_id> ids;
    std::vector<cl::CommandQueue> per_device;           // a context and in-order queue each
    std::vector<cl::CommandQueue> shared_in_order;      // one context over the first two devices
    std::vector<cl::CommandQueue> shared_out_of_order;  // the same context; empty if refused
    std::string out_of_order_error;

    static Devices& get() {
        static auto* d = new Devices(make());
        return *d;
    }

    const std::vector<cl::CommandQueue>& queues(layout l) const {
        return l == layout::per_device        ? per_device
               : l == layout::shared_in_order ? shared_in_order
                                              : shared_out_of_order;
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
        if (std::getenv("CLPOOL_BENCH_DEVICES"))
            best.resize(std::min(best.size(), env_size("CLPOOL_BENCH_DEVICES", best.size())));
        Devices d;
        d.ids = best;
        for (cl_device_id id : best) d.per_device.push_back(make_queue(make_context(&id, 1), id, 0));
        const std::size_t shared = std::min<std::size_t>(2, best.size());
        const cl::Context both = make_context(best.data(), shared);
        for (std::size_t i = 0; i < shared; ++i) d.shared_in_order.push_back(make_queue(both, best[i], 0));
        try {
            for (std::size_t i = 0; i < shared; ++i)
                d.shared_out_of_order.push_back(make_queue(both, best[i], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE));
        } catch (const std::exception& e) {
            d.shared_out_of_order.clear();
            d.out_of_order_error = e.what();
        }
        return d;
    }
};

// Per queue, made once and kept: the destination buffer, a pageable source (touched) and a
// pinned one (from the queue's own pinned pool).
struct Memory {
    clpool::BufferPool::handle dst;
    std::vector<unsigned char> pageable;
    clpool::PinnedVector<unsigned char> pinned;
};

Memory& memory_for(const cl::CommandQueue& q) {
    static auto* all = new std::map<cl_command_queue, std::unique_ptr<Memory>>;  // never freed
    auto& m = (*all)[q()];
    if (!m) {
        const std::size_t n = transfer_bytes();
        m.reset(new Memory{clpool::get_buffer_pool(q).allocate(n), std::vector<unsigned char>(n, 0x5A),
                           clpool::PinnedVector<unsigned char>{clpool::PinnedAllocator<unsigned char>(q)}});
        m->pinned.assign(n, 0x5A);
    }
    return *m;
}

enum class source { pinned, staged, driver };

struct H2D {
    source src = source::staged;
    layout lay = layout::per_device;
    std::size_t devices = 1;
    unsigned threads = 0;   // TransferOptions::copy_threads (0: default)
    std::size_t chunk = 0;  // TransferOptions::chunk_bytes (0: automatic)
    unsigned buffers = 3;   // TransferOptions::staging_buffers
    bool events = false;    // async upload, then wait on its event (else blocking, then clFinish)
};

void h2d(benchmark::State& state, H2D c) {
    auto& devs = Devices::get();
    const auto& queues = devs.queues(c.lay);
    if (c.lay == layout::shared_out_of_order && queues.empty()) {
        state.SkipWithError(("out-of-order queue refused: " + devs.out_of_order_error).c_str());
        return;
    }
    if (c.devices > queues.size()) {
        state.SkipWithError(("only " + std::to_string(queues.size()) + " device(s) in this layout").c_str());
        return;
    }
    const std::size_t n = transfer_bytes();
    clpool::TransferOptions o;
    o.async = c.events;
    o.stage = c.src == source::staged;
    o.copy_threads = c.threads;
    o.chunk_bytes = c.chunk;
    o.staging_buffers = c.buffers;
    std::vector<Memory*> mem;
    for (std::size_t d = 0; d < c.devices; ++d) mem.push_back(&memory_for(queues[d]));
    auto one = [&](std::size_t d) {
        const auto& q = queues[d];
        Memory& m = *mem[d];
        if (c.src == source::driver) {
            clEnqueueWriteBuffer(q(), m.dst.buffer()(), CL_TRUE, 0, n, m.pageable.data(), 0, nullptr, nullptr);
            return;
        }
        const void* from = c.src == source::pinned ? static_cast<const void*>(m.pinned.data()) : m.pageable.data();
        cl::Event done = clpool::upload(q, m.dst, 0, from, n, o);
        if (c.events) {
            cl_event e = done();
            if (e) clWaitForEvents(1, &e);
        } else {
            q.finish();
        }
    };
    for (std::size_t d = 0; d < c.devices; ++d) one(d);  // warm: staging buffers, first use
    for (auto _ : state) {
        std::vector<std::thread> threads;
        for (std::size_t d = 1; d < c.devices; ++d) threads.emplace_back(one, d);
        one(0);
        for (auto& t : threads) t.join();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.devices * n));
    state.counters["devices"] = static_cast<double>(c.devices);
}

// The host's side alone: pageable -> pinned, as the staging copies do, for D devices at once.
void host_copy(benchmark::State& state, std::size_t devices, unsigned threads, bool workers) {
    auto& devs = Devices::get();
    if (devices > devs.per_device.size()) {
        state.SkipWithError(("only " + std::to_string(devs.per_device.size()) + " device(s)").c_str());
        return;
    }
    const std::size_t n = transfer_bytes();
    std::vector<Memory*> mem;
    for (std::size_t d = 0; d < devices; ++d) mem.push_back(&memory_for(devs.per_device[d]));
    if (workers) {
        auto one = [&](std::size_t d) {
            clpool::detail::copy_workers::instance().copy(mem[d]->pinned.data(), mem[d]->pageable.data(), n, threads,
                                                          /*stream=*/true);
        };
        for (auto _ : state) {
            std::vector<std::thread> t;
            for (std::size_t d = 1; d < devices; ++d) t.emplace_back(one, d);
            one(0);
            for (auto& x : t) x.join();
        }
    } else {
        // Threads started once; each iteration is one phase of the barrier (start, copy, done).
        const std::size_t total = devices * threads;
        std::barrier sync(static_cast<std::ptrdiff_t>(total + 1));
        std::atomic<bool> stop{false};
        std::vector<std::thread> pool;
        for (std::size_t i = 0; i < total; ++i)
            pool.emplace_back([&, i] {
                Memory& m = *mem[i / threads];
                const std::size_t part = (n + threads - 1) / threads, off = std::min(n, (i % threads) * part);
                const std::size_t len = std::min(part, n - off);
                for (;;) {
                    sync.arrive_and_wait();
                    if (stop.load()) return;
                    std::memcpy(m.pinned.data() + off, m.pageable.data() + off, len);
                    sync.arrive_and_wait();
                }
            });
        for (auto _ : state) {
            sync.arrive_and_wait();  // start
            sync.arrive_and_wait();  // all done
        }
        stop = true;
        sync.arrive_and_wait();
        for (auto& t : pool) t.join();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * devices * n));
    state.counters["devices"] = static_cast<double>(devices);
    state.counters["threads"] = static_cast<double>(threads);
}

void settle(benchmark::internal::Benchmark* b) {
    const auto iters = static_cast<benchmark::IterationCount>(env_size("CLPOOL_BENCH_ITERS", 10));
    const int reps = static_cast<int>(env_size("CLPOOL_BENCH_REPS", 3));
    b->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(iters);
    if (reps > 1) b->Repetitions(reps)->ReportAggregatesOnly(true);
}

void register_all() {
    const std::size_t counts[] = {1, 2, 4};
    const char* names[] = {"pinned", "staged", "driver"};
    for (std::size_t d : counts)
        for (source s : {source::pinned, source::staged, source::driver}) {
            H2D c;
            c.src = s;
            c.devices = d;
            settle(benchmark::RegisterBenchmark(
                ("h2d/" + std::string(names[static_cast<int>(s)]) + "/" + std::to_string(d)).c_str(), h2d, c));
        }
    if (env_size("CLPOOL_BENCH_SWEEP", 1) != 0)
        for (std::size_t d : counts)
            for (unsigned t : {2u, 4u, 8u, 12u, 16u})
                for (std::size_t mib : {4, 8, 16})
                    for (unsigned b : {3u, 4u}) {
                        H2D c;
                        c.devices = d;
                        c.threads = t;
                        c.chunk = mib << 20;
                        c.buffers = b;
                        settle(benchmark::RegisterBenchmark(
                            ("sweep/staged/" + std::to_string(d) + "/t" + std::to_string(t) + "/c" +
                             std::to_string(mib) + "/b" + std::to_string(b))
                                .c_str(),
                            h2d, c));
                    }
    for (std::size_t d : counts)
        for (unsigned t : {1u, 2u, 4u, 8u, 12u, 16u})
            for (bool workers : {true, false})
                settle(benchmark::RegisterBenchmark(("host/" + std::string(workers ? "workers" : "memcpy") + "/" +
                                                     std::to_string(d) + "/t" + std::to_string(t))
                                                        .c_str(),
                                                    host_copy, d, t, workers));
    for (source s : {source::pinned, source::staged})
        for (layout l : {layout::shared_in_order, layout::shared_out_of_order})
            for (bool events : {false, true})
                for (std::size_t d : {1, 2}) {
                    H2D c;
                    c.src = s;
                    c.lay = l;
                    c.devices = d;
                    c.events = events;
                    const std::string name = "shared2/" + std::string(names[static_cast<int>(s)]) + "-" +
                                             (l == layout::shared_in_order ? "inorder" : "ooo") + "-" +
                                             (events ? "events" : "blocking") + "/" + std::to_string(d);
                    settle(benchmark::RegisterBenchmark(name.c_str(), h2d, c));
                }
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
