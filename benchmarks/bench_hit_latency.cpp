// Hit latency: allocate+release of a cached buffer, per alias and lock policy, against the raw driver.
//
// hit/<pool>/<bytes>: one allocate + release of a buffer the pool already
//   caches (a hit pair). Time per iteration = ns per pair.
// hit/<lock>+history_{off,on,stacks}/<backend>/<bytes>: the same pair on a pool
//   with Diagnostics, its history off, on (record_history(65536)) and on with call sites
//   (docs/BENCHMARKS.md, "History on the hit path");
//   hit/<lock>+history_on1k/...: a ring of 1024 events, which stays in cache.
// history/clock: one read of the history's time stamp (detail::history_clock::now(),
//   the ticker's word once a history is on).
// raw/create/<kind>/<bytes>: clCreateBuffer + clReleaseMemObject alone. Drivers
//   allocate lazily, so this is misleadingly cheap: no memory exists yet.
// raw/create_first_use/<kind>/<bytes>: clCreateBuffer, a first use that makes
//   the driver allocate (device: migrate to the device and wait; pinned: map
//   and unmap), then release: what a buffer really costs without a pool.
#include "common/setup.hpp"

#include <clpool/benchmark/register.hpp>
#include <clpool/policies/thread_cached.hpp>

#include <mutex>
#include <string>
#include <vector>

using namespace clpool;
using namespace clpool::bench;

namespace {

// The hit pair is clpool::benchmarks::register_hit, the run users register for their own pools.
template <class P>
void add_hit(const std::string& name) {
    std::vector<std::size_t> bytes;
    for (auto n : sizes()) bytes.push_back(static_cast<std::size_t>(n));
    clpool::benchmarks::register_hit<P>(name, [] { return make_pool<P>(); }, bytes);
}

// The hit pair of P with its history off, on, and on with call sites, side by side.
template <class P>
void add_hit_history(const std::string& lock, const std::string& backend) {
    std::vector<std::size_t> bytes{256, 65536};
    auto with = [](std::size_t events, CallSites sites) {
        return [events, sites] {
            auto p = make_pool<P>();
            p->record_history(events, sites);
            return p;
        };
    };
    clpool::benchmarks::register_hit<P>(lock + "+history_off/" + backend, with(0, CallSites::off), bytes);
    clpool::benchmarks::register_hit<P>(lock + "+history_on/" + backend, with(65536, CallSites::off), bytes);
    clpool::benchmarks::register_hit<P>(lock + "+history_on1k/" + backend, with(1024, CallSites::off), bytes);
    clpool::benchmarks::register_hit<P>(lock + "+history_stacks/" + backend, with(65536, CallSites::on), bytes);
}

// What one history time stamp costs on this machine, its ticker running.
void history_clock(benchmark::State& state) {
    clpool::detail::history_clock::start();
    std::uint64_t sum = 0;
    for (auto _ : state) benchmark::DoNotOptimize(sum += clpool::detail::history_clock::now());
}
BENCHMARK(history_clock)->Name("history/clock");

#ifdef CLPOOL_HAS_OPENCL
enum class raw_kind { device, pinned };

cl_mem raw_create(std::size_t n, raw_kind kind) {
    cl_int err = CL_SUCCESS;
    const cl_mem_flags flags = CL_MEM_READ_WRITE | (kind == raw_kind::pinned ? CL_MEM_ALLOC_HOST_PTR : 0);
    cl_mem m = clCreateBuffer(Device::get().context(), flags, n, nullptr, &err);
    opencl::check(err, "clCreateBuffer");
    return m;
}

void raw_first_use(cl_mem m, std::size_t n, raw_kind kind) {
    cl_command_queue q = Device::get().queue();
    cl_int err = CL_SUCCESS;
    if (kind == raw_kind::device) {
        cl_event e = nullptr;
        opencl::check(clEnqueueMigrateMemObjects(q, 1, &m, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, nullptr, &e),
                      "clEnqueueMigrateMemObjects");
        opencl::check(clWaitForEvents(1, &e), "clWaitForEvents");
        clReleaseEvent(e);
    } else {
        void* p = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0, nullptr, nullptr, &err);
        opencl::check(err, "clEnqueueMapBuffer");
        opencl::check(clEnqueueUnmapMemObject(q, m, p, 0, nullptr, nullptr), "clEnqueueUnmapMemObject");
        opencl::check(clFinish(q), "clFinish");
    }
}

void raw_create_only(benchmark::State& state, raw_kind kind) {
    const auto n = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        cl_mem m = raw_create(n, kind);
        benchmark::DoNotOptimize(m);
        clReleaseMemObject(m);
    }
    state.SetItemsProcessed(state.iterations());
}

void raw_create_first_use(benchmark::State& state, raw_kind kind) {
    const auto n = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        cl_mem m = raw_create(n, kind);
        raw_first_use(m, n, kind);
        clReleaseMemObject(m);
    }
    clFinish(Device::get().queue());
    state.SetItemsProcessed(state.iterations());
}
#endif

void register_all() {
    // Every lock policy on one configuration (power-of-two buckets, keep everything).
#ifdef CLPOOL_HAS_OPENCL
    using Bk = OpenCLBackend;
    const std::string bk = "opencl";
#else
    using Bk = HostBackend;
    const std::string bk = "host";
#endif
    add_hit<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, Bk>>("NoLock/" + bk);
    add_hit<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, Bk>>("SingleMutex/" + bk);
    // The same pool over std::mutex: what SingleMutex cost before SpinMutex.
    add_hit<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, LockedBy<std::mutex>, Bk>>("StdMutex/" + bk);
    add_hit<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<16>, Bk>>("Striped16/" + bk);
    add_hit<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<>, Bk>>("ThreadCached/" + bk);
    // The history's cost on the same hit pair (hit/<lock>/<backend> above: the pool without diagnostics).
    add_hit_history<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, Bk, Diagnostics>>("NoLock", bk);
    add_hit_history<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, Bk, Diagnostics>>("SingleMutex", bk);
    add_hit_history<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<16>, Bk, Diagnostics>>("Striped16", bk);
    add_hit_history<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<>, Bk, Diagnostics>>("ThreadCached",
                                                                                                      bk);
    // Every alias.
#ifdef CLPOOL_HAS_OPENCL
    add_hit<BufferPool>("BufferPool/opencl");
    add_hit<PinnedBufferPool>("PinnedBufferPool/opencl");
    add_hit<PersistentBufferPool>("PersistentBufferPool/opencl");
    add_hit<ArenaPool>("ArenaPool/opencl");
#endif
    add_hit<host::BufferPool>("BufferPool/host");
    add_hit<host::PinnedBufferPool>("PinnedBufferPool/host");
    add_hit<host::PersistentBufferPool>("PersistentBufferPool/host");
    add_hit<host::ArenaPool>("ArenaPool/host");
#ifdef CLPOOL_HAS_OPENCL
    for (auto [kind, name] : {std::pair{raw_kind::device, "device"}, std::pair{raw_kind::pinned, "pinned"}}) {
        const auto k = kind;
        benchmark::RegisterBenchmark((std::string("raw/create/") + name).c_str(),
                                     [k](benchmark::State& s) { raw_create_only(s, k); })
            ->Apply(size_args)
            ->Unit(benchmark::kNanosecond);
        benchmark::RegisterBenchmark((std::string("raw/create_first_use/") + name).c_str(),
                                     [k](benchmark::State& s) { raw_create_first_use(s, k); })
            ->Apply(size_args)
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
