// ns per hit pair (allocate + release of a cached 4 KiB buffer) in a plain loop: host and OpenCL
// backends, NoLock / SingleMutex / ThreadCached<8>; best of 15 runs of 2,000,000 pairs each.
// `hit_pair_loop NAME [EVENTS]`: with EVENTS > 0, each pool records a history of EVENTS events per
// ring (record_history) while it loops: the history's cost on the hit pair.
// No Google Benchmark around it, so it builds from any tree's headers alone (hit_pair_loop.sh).
#include <clpool/backends/opencl.hpp>
#include <clpool/policies/thread_cached.hpp>
#include <clpool/pools/aliases.hpp>

#include "hit_pair_body.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace clpool;
template <class Lock, class B>
using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, B>;
// With EVENTS > 0: the pool with diagnostics, where the tree has them apart from the core.
#if __has_include(<clpool/diagnostics/diagnostics.hpp>)
template <class Lock, class B>
using PH = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, B, Diagnostics>;
#else
template <class Lock, class B>
using PH = P<Lock, B>;
#endif

const cl::Context* context = nullptr;
std::size_t history_events = 0;

template <class Pl>
double best_ns(long n, int runs) {
    std::unique_ptr<Pl> p;
    if constexpr (std::is_same_v<typename Pl::backend_type, OpenCLBackend>)
        p = std::make_unique<Pl>(OpenCLBackend(*context));
    else p = std::make_unique<Pl>(HostBackend{});
    if constexpr (requires { p->record_history(history_events); })
        if (history_events != 0) p->record_history(history_events);
    p->allocate(4096).release();
    double best = 1e9;
    for (int k = 0; k < runs; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        hit_pair_body(*p, n);
        const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
        if (ns < best) best = ns;
    }
    return best;
}

template <template <class, class> class Q>
void print(const std::string& name) {
    const long n = 2000000;
    const int runs = 15;
    std::printf("%-14s host   nolock %6.2f single %6.2f tc %6.2f\n", name.c_str(),
                best_ns<Q<NoLock, HostBackend>>(n, runs), best_ns<Q<SingleMutex, HostBackend>>(n, runs),
                best_ns<Q<ThreadCached<8>, HostBackend>>(n, runs));
    std::printf("%-14s opencl nolock %6.2f single %6.2f tc %6.2f\n", name.c_str(),
                best_ns<Q<NoLock, OpenCLBackend>>(n, runs), best_ns<Q<SingleMutex, OpenCLBackend>>(n, runs),
                best_ns<Q<ThreadCached<8>, OpenCLBackend>>(n, runs));
}

int main(int argc, char** argv) {
    history_events = argc > 2 ? std::stoul(argv[2]) : 0;
    const std::string name =
        std::string(argc > 1 ? argv[1] : "tree") + (history_events != 0 ? "/h" + std::to_string(history_events) : "");
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    cl::Platform platform = platforms.at(0);
    for (auto& p : platforms)
        if (p.getInfo<CL_PLATFORM_NAME>().find("NVIDIA") != std::string::npos) platform = p;
    std::vector<cl::Device> devices;
    platform.getDevices(CL_DEVICE_TYPE_ALL, &devices);
    const cl::Context c(devices.at(0));
    context = &c;
    if (history_events != 0) print<PH>(name);
    else print<P>(name);
}
