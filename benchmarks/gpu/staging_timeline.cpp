// staging_timeline: where a 16 MiB staged upload spends its time on a GPU driver (a diagnostic, not a benchmark).
//
// Variants of the staged H2D loop over one pageable 16 MiB source, each timed
// as the median of 40 whole transfers (wall, waited): the library's upload(),
// then hand-written loops that change one thing each (no flush per chunk, one
// staging buffer per chunk so nothing waits, copy everything then one DMA).
// Then one profiled run of the chunked loop prints, per chunk, when the host
// copy ended, when the enqueue returned, and the DMA's queued/start/end times
// from CL_QUEUE_PROFILING_ENABLE, all relative to the transfer's start.
// Build: g++ -std=c++20 -O2 -Iinclude -Ipolicies -Ibackends benchmarks/gpu/staging_timeline.cpp -lOpenCL -pthread
#include <clpool/interop/transfer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

using clock_type = std::chrono::steady_clock;

static double us_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{16} << 20);
    const std::size_t chunk = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (std::size_t{4} << 20);
    cl_platform_id plats[8];
    cl_uint np = 0;
    clGetPlatformIDs(8, plats, &np);
    cl_device_id dev = nullptr;
    for (cl_uint i = 0; i < np && !dev; ++i)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_GPU, 1, &dev, nullptr) != CL_SUCCESS) dev = nullptr;
    if (!dev) {
        std::puts("no GPU");
        return 1;
    }
    cl_int err = 0;
    cl::Context ctx(clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err), false);
    cl::CommandQueue q(clCreateCommandQueue(ctx(), dev, CL_QUEUE_PROFILING_ENABLE, &err), false);
    clpool::BufferPool devpool(ctx);
    clpool::MappedPinnedPool staging(ctx);
    auto d = devpool.allocate(n);
    std::vector<unsigned char> src(n, 0x5A);
    const unsigned threads = clpool::detail::copy_workers::default_parts();

    auto time = [&](const char* name, const std::function<void()>& body) {
        std::vector<double> t;
        for (int i = 0; i < 45; ++i) {
            const auto t0 = clock_type::now();
            body();
            if (i >= 5) t.push_back(us_since(t0));
        }
        std::sort(t.begin(), t.end());
        const double med = t[t.size() / 2];
        std::printf("%-44s %8.1f us  %6.2f GB/s\n", name, med, n / med / 1e3);
    };
    auto write = [&](const void* p, std::size_t off, std::size_t len, cl_event* ev) {
        clpool::opencl::check(clEnqueueWriteBuffer(q(), d.buffer()(), CL_FALSE, off, len, p, 0, nullptr, ev), "write");
    };
    time("driver pageable (blocking write)",
         [&] { clEnqueueWriteBuffer(q(), d.buffer()(), CL_TRUE, 0, n, src.data(), 0, nullptr, nullptr); });
    clpool::TransferOptions o;
    o.staging_pool = &staging;
    o.stage = true;
    time("clpool::upload (library)", [&] { clpool::upload(q, d, 0, src.data(), n, o).wait(); });
    auto whole = staging.allocate(n);
    auto* w = static_cast<unsigned char*>(whole.buffer().host());
    time("host copy only, whole", [&] { clpool::detail::copy_workers::instance().copy(w, src.data(), n, threads); });
    time("copy all, then one DMA", [&] {
        clpool::detail::copy_workers::instance().copy(w, src.data(), n, threads);
        clEnqueueWriteBuffer(q(), d.buffer()(), CL_TRUE, 0, n, w, 0, nullptr, nullptr);
    });
    time("copy all (streaming stores), then one DMA", [&] {
        clpool::detail::copy_workers::instance().copy(w, src.data(), n, threads, true);
        clEnqueueWriteBuffer(q(), d.buffer()(), CL_TRUE, 0, n, w, 0, nullptr, nullptr);
    });
    time("host copy only, whole, streaming stores",
         [&] { clpool::detail::copy_workers::instance().copy(w, src.data(), n, threads, true); });
    for (int variant = 0; variant < 3; ++variant) {
        const bool flush = variant != 1, stream = variant == 2;
        time(variant == 0   ? "chunks in one buffer, flush each"
             : variant == 1 ? "chunks in one buffer, no flush"
                            : "chunks in one buffer, streaming stores",
             [&] {
                 cl_event last = nullptr;
                 for (std::size_t off = 0; off < n; off += chunk) {
                     const std::size_t len = std::min(chunk, n - off);
                     clpool::detail::copy_workers::instance().copy(w + off, src.data() + off, len, threads, stream);
                     if (last) clReleaseEvent(last);
                     write(w + off, off, len, &last);
                     if (flush) clFlush(q());
                 }
                 clWaitForEvents(1, &last);
                 clReleaseEvent(last);
             });
    }
    // One profiled run of the chunked loop, streaming stores.
    std::vector<cl_event> evs;
    std::vector<double> copied, enqueued;
    const auto t0 = clock_type::now();
    for (std::size_t off = 0; off < n; off += chunk) {
        const std::size_t len = std::min(chunk, n - off);
        clpool::detail::copy_workers::instance().copy(w + off, src.data() + off, len, threads, true);
        copied.push_back(us_since(t0));
        cl_event e = nullptr;
        write(w + off, off, len, &e);
        clFlush(q());
        enqueued.push_back(us_since(t0));
        evs.push_back(e);
    }
    clWaitForEvents(1, &evs.back());
    const double waited = us_since(t0);
    cl_ulong base = 0;
    clGetEventProfilingInfo(evs[0], CL_PROFILING_COMMAND_QUEUED, sizeof base, &base, nullptr);
    std::printf(
        "\nprofiled chunked upload: host wait returned at %.1f us (copy end, enqueue return; device "
        "queued/submit/start/end, us from the first queued)\n",
        waited);
    for (std::size_t i = 0; i < evs.size(); ++i) {
        cl_ulong qd = 0, sb = 0, st = 0, en = 0;
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_QUEUED, sizeof qd, &qd, nullptr);
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_SUBMIT, sizeof sb, &sb, nullptr);
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_START, sizeof st, &st, nullptr);
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_END, sizeof en, &en, nullptr);
        std::printf(
            "  chunk %zu: copy %7.1f  enq %7.1f | queued %7.1f submit %7.1f start %7.1f end %7.1f (dma %6.1f us)\n", i,
            copied[i], enqueued[i], (qd - base) / 1e3, (sb - base) / 1e3, (st - base) / 1e3, (en - base) / 1e3,
            (en - st) / 1e3);
        clReleaseEvent(evs[i]);
    }
    return 0;
}
