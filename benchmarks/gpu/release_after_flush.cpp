// Does a pending block come back to the pool when the application never flushes the queue?
// Loop: allocate 1 MiB, fill it on the queue, release_after(h, queue), wait W us (no flush),
// allocate the same size again: a hit only if the marker has completed. Also times clFlush.
#include <clpool/clpool.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
using namespace clpool;

// Nanoseconds that f() takes.
template <class F>
double ns_of(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// The best of 5 means of 2000 calls of step(), which returns the nanoseconds it timed.
template <class Step>
double best_mean_ns(Step&& step) {
    double best = 1e9;
    for (int r = 0; r < 5; ++r) {
        double total = 0;
        for (int i = 0; i < 2000; ++i) total += step();
        best = std::min(best, total / 2000);
    }
    return best;
}

int main(int argc, char** argv) {
    const std::string want = argc > 1 ? argv[1] : "NVIDIA";
    std::vector<cl::Platform> ps;
    cl::Platform::get(&ps);
    cl::Platform plat;
    for (auto& p : ps)
        if (p.getInfo<CL_PLATFORM_NAME>().find(want) != std::string::npos) plat = p;
    if (!plat()) {
        std::printf("no platform %s\n", want.c_str());
        return 1;
    }
    std::vector<cl::Device> ds;
    plat.getDevices(CL_DEVICE_TYPE_ALL, &ds);
    cl::Context ctx(ds.at(0));
    cl::CommandQueue q(ctx, ds.at(0));
    std::printf("platform %s device %s\n", plat.getInfo<CL_PLATFORM_NAME>().c_str(),
                ds[0].getInfo<CL_DEVICE_NAME>().c_str());
    for (int flush = 0; flush <= 1; ++flush) {
        for (int wait_us : {0, 100, 1000, 10000}) {
            BufferPool pool(ctx);
            const int n = wait_us >= 10000 ? 50 : 300;
            const cl_uint pattern = 7;
            for (int i = 0; i < n; ++i) {
                auto h = pool.allocate(1 << 20);
                q.enqueueFillBuffer(h.buffer(), pattern, 0, 1 << 20);
                release_after(h, q);
                if (flush) q.flush();
                if (wait_us) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
            }
            q.finish();
            const auto s = pool.stats();
            std::printf("flush=%d wait=%5d us: allocations %d, hits %llu, misses %llu\n", flush, wait_us, n,
                        (unsigned long long)s.hits, (unsigned long long)s.misses);
        }
    }
    // clFlush's own cost: after one small enqueue, and on an idle queue; then a marker alone, for scale.
    for (const bool after_marker : {true, false}) {
        const double ns = best_mean_ns([&] {
            cl_event m = nullptr;
            if (after_marker) clEnqueueMarkerWithWaitList(q(), 0, nullptr, &m);
            const double t = ns_of([&] { clFlush(q()); });
            if (m) {
                clWaitForEvents(1, &m);
                clReleaseEvent(m);
            }
            return t;
        });
        std::printf("clFlush %s: %.0f ns (best of 5 means of 2000)\n", after_marker ? "after a marker" : "idle queue",
                    ns);
    }
    const double marker_ns = best_mean_ns([&] {
        cl_event m = nullptr;
        const double t = ns_of([&] { clEnqueueMarkerWithWaitList(q(), 0, nullptr, &m); });
        clFlush(q());
        clWaitForEvents(1, &m);
        clReleaseEvent(m);
        return t;
    });
    std::printf("clEnqueueMarkerWithWaitList: %.0f ns\n", marker_ns);
}
