// clpool-info: lists OpenCL devices, measures what pooling and pinning buy on one, and says which pool fits.
#include <nlohmann/json.hpp>

#include <clpool/clpool.hpp>
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/platform/numa_opencl.hpp>
#endif

#include <cstring>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/devices.hpp"
#include "common/table.hpp"
#include "common/timing.hpp"
#include "common/units.hpp"

namespace {

using namespace clpool;
using namespace clpool::tools;

struct Measurements {
    std::size_t bytes = 0;
    std::size_t reps = 0;
    double raw_s = 0;                    // make + first use + free, no pool
    std::vector<std::pair<std::string, double>> hit_s;  // per pool: hit + first use + release
    double pageable_write = 0, pageable_read = 0, pinned_write = 0, pinned_read = 0;  // GB/s
    std::vector<std::pair<std::string, PoolStats>> stats;
};

double gbps(std::size_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0; }

struct Advice {
    std::string pool, why;
};

Advice advise(bool host, bool unified, const Measurements& m) {
    const double pin_gain = m.pageable_write > 0 ? m.pinned_write / m.pageable_write : 1.0;
    if (host)
        return {"clpool::host::BufferPool (or host::PersistentBufferPool for long runs)",
                "no OpenCL device: the host backend pools aligned host memory with the same policies"};
    if (unified)
        return {"PersistentBufferPool",
                "the device shares host memory (unified), so its IntegratedAware flags allocate host-pinned "
                "buffers the device uses in place: map them instead of copying; pinned staging bought " +
                    fixed(pin_gain, 2) +
                    "x over pageable here, so staged copies (clpool::upload through MappedPinnedPool) add little"};
    if (pin_gain >= 1.2)
        return {"BufferPool + MappedPinnedPool (staging)",
                "a discrete device: keep buffers device-local in BufferPool and copy with clpool::upload/download, "
                "which stage through pinned buffers from a MappedPinnedPool (pinned copies ran " +
                    fixed(pin_gain, 2) + "x pageable ones here)"};
    return {"BufferPool", "a discrete device where pinned copies ran only " + fixed(pin_gain, 2) +
                              "x pageable ones: pooling device buffers pays, pinned staging does not on this machine"};
}

#ifdef CLPOOL_HAS_OPENCL
// The fast-and-frugal pool for device memory (docs/BENCHMARKS.md, "Fast and frugal"): the buffer
// arena with offset handles on any device; the SVM arena where the device has coarse-grained SVM
// and kernels take SVM pointers. The numbers: benchmarks/gpu/replay_timed.sh on an H200.
Advice fast_and_frugal(cl_device_id device) {
    cl_bitfield caps = 0;
    const bool svm =
        clGetDeviceInfo(device, opencl::device_svm_capabilities, sizeof caps, &caps, nullptr) == CL_SUCCESS &&
        (caps & opencl::svm_coarse_grain_buffer) != 0;
    std::string why =
        "blocks carved from a few segments, each its segment's cl_mem and an offset: no driver call per block "
        "and an arena's held / live (H200, GPT and KV-cache traces: held / live 1.002-1.036x, a warm alloc + "
        "free pair 66-186 ns against PyTorch's 474-1,143; BENCHMARKS.md)";
    why += svm ? "; this device has coarse-grained SVM, so clpool::SVMArenaPool gives SVM pointers the same way, "
                 "as fast once warm, but each of its segments is a clSVMAlloc (0.8-34 ms on an H200)"
               : "; this device has no coarse-grained SVM (SVMArenaPool needs OpenCL 2.0 SVM)";
    return {"clpool::OffsetArenaPool", why};
}
#endif

// ---- host backend measurements
Measurements measure_host(std::size_t bytes, std::size_t reps) {
    Measurements m;
    m.bytes = bytes;
    m.reps = reps;
    HostBackend raw_backend;
    std::vector<std::byte> data(bytes, std::byte{1});
    auto first_use = [&](std::byte* p) { std::memcpy(p, data.data(), bytes); };  // fill it, as on OpenCL
    m.raw_s = median_seconds(1, reps, [&] {
        auto a = raw_backend.allocate(bytes, MemoryKind::device_local);
        if (a.status != AllocStatus::ok) throw std::bad_alloc();
        first_use(a.memory.data());
    });
    host::BufferPool buffer_pool{HostBackend()};
    host::PinnedBufferPool pinned_pool{HostBackend()};
    host::PersistentBufferPool persistent_pool{HostBackend()};
    auto hit = [&](auto& pool) {
        return median_seconds(1, reps, [&] {
            auto h = pool.allocate(bytes);
            first_use(h.buffer().data());
        });
    };
    m.hit_s = {{"BufferPool", hit(buffer_pool)},
               {"PinnedBufferPool", hit(pinned_pool)},
               {"PersistentBufferPool", hit(persistent_pool)}};
    // Copies: plain heap memory against pooled, page-aligned memory.
    std::vector<std::byte>& pageable = data;
    auto dst = buffer_pool.allocate(bytes);
    auto pinned = pinned_pool.allocate(bytes);
    m.pageable_write =
        gbps(bytes, median_seconds(1, reps, [&] { std::memcpy(dst.buffer().data(), pageable.data(), bytes); }));
    m.pageable_read =
        gbps(bytes, median_seconds(1, reps, [&] { std::memcpy(pageable.data(), dst.buffer().data(), bytes); }));
    m.pinned_write =
        gbps(bytes, median_seconds(1, reps, [&] { std::memcpy(dst.buffer().data(), pinned.buffer().data(), bytes); }));
    m.pinned_read =
        gbps(bytes, median_seconds(1, reps, [&] { std::memcpy(pinned.buffer().data(), dst.buffer().data(), bytes); }));
    dst.release();
    pinned.release();
    m.stats = {{"BufferPool", buffer_pool.stats()},
               {"PinnedBufferPool", pinned_pool.stats()},
               {"PersistentBufferPool", persistent_pool.stats()}};
    return m;
}

#ifdef CLPOOL_HAS_OPENCL
// ---- OpenCL measurements
Measurements measure_opencl(cl_device_id device, std::size_t bytes, std::size_t reps) {
    Measurements m;
    m.bytes = bytes;
    m.reps = reps;
    DeviceSession s(device);
    cl_command_queue q = s.queue();
    std::vector<unsigned char> data(bytes, 1);
    // First use: uploading the whole buffer, as a program's first use of a
    // buffer usually is. A fresh buffer pays the driver's lazy commit and the
    // page faults here; a pool hit has paid them already.
    auto first_use = [&](cl_mem mem) {
        opencl::check(clEnqueueWriteBuffer(q, mem, CL_TRUE, 0, bytes, data.data(), 0, nullptr, nullptr),
                      "clEnqueueWriteBuffer");
    };
    m.raw_s = median_seconds(1, reps, [&] {
        cl_int err = CL_SUCCESS;
        cl_mem mem = clCreateBuffer(s.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
        opencl::check(err, "clCreateBuffer");
        const cl::Buffer owner(mem, false);
        first_use(mem);
    });
    BufferPool buffer_pool{OpenCLBackend(s.context, device, CL_MEM_READ_WRITE)};
    PinnedBufferPool pinned_pool{OpenCLBackend(s.context, device, CL_MEM_READ_WRITE)};
    PersistentBufferPool persistent_pool{OpenCLBackend(s.context, device, CL_MEM_READ_WRITE)};
    auto hit = [&](auto& pool) {
        return median_seconds(1, reps, [&] {
            auto h = pool.allocate(bytes);
            first_use(h.buffer()());
        });
    };
    m.hit_s = {{"BufferPool", hit(buffer_pool)},
               {"PinnedBufferPool", hit(pinned_pool)},
               {"PersistentBufferPool", hit(persistent_pool)}};

    auto dst = buffer_pool.allocate(bytes);
    auto staging = pinned_pool.allocate(bytes);
    cl_int err = CL_SUCCESS;
    void* pinned = clEnqueueMapBuffer(q, staging.buffer()(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, nullptr,
                                      nullptr, &err);
    opencl::check(err, "clEnqueueMapBuffer");
    std::memset(pinned, 1, bytes);
    std::vector<unsigned char>& pageable = data;
    auto write_from = [&](const void* src) {
        opencl::check(clEnqueueWriteBuffer(q, dst.buffer()(), CL_TRUE, 0, bytes, src, 0, nullptr, nullptr),
                      "clEnqueueWriteBuffer");
    };
    auto read_into = [&](void* out) {
        opencl::check(clEnqueueReadBuffer(q, dst.buffer()(), CL_TRUE, 0, bytes, out, 0, nullptr, nullptr),
                      "clEnqueueReadBuffer");
    };
    m.pageable_write = gbps(bytes, median_seconds(1, reps, [&] { write_from(pageable.data()); }));
    m.pageable_read = gbps(bytes, median_seconds(1, reps, [&] { read_into(pageable.data()); }));
    m.pinned_write = gbps(bytes, median_seconds(1, reps, [&] { write_from(pinned); }));
    m.pinned_read = gbps(bytes, median_seconds(1, reps, [&] { read_into(pinned); }));
    opencl::check(clEnqueueUnmapMemObject(q, staging.buffer()(), pinned, 0, nullptr, nullptr),
                  "clEnqueueUnmapMemObject");
    opencl::check(clFinish(q), "clFinish");
    dst.release();
    staging.release();
    m.stats = {{"BufferPool", buffer_pool.stats()},
               {"PinnedBufferPool", pinned_pool.stats()},
               {"PersistentBufferPool", persistent_pool.stats()}};
    return m;
}
#endif

#ifdef CLPOOL_HAS_OPENCL
// What NVIDIA's OpenCL did with several GPUs in one context (docs/DEVICES.md, "Several devices"):
// benchmarks/gpu/multi_gpu.sh, pinned host-to-device copies of 256 MiB to each GPU at once, a
// queue and a thread per GPU, two H200s, one run.
struct ScalingFigure {
    const char* layout;
    double one_gpu, two_gpus;  // GB/s
};
constexpr ScalingFigure shared_blocking{"one context, blocking calls (clFinish)", 55.1, 53.2};
constexpr ScalingFigure shared_events{"one context, waited for by events", 54.6, 106.0};
constexpr ScalingFigure per_device_contexts{"one context per device", 54.9, 100.3};

// Platforms with several devices: a program may put them all in one context (what most engines
// and the OpenCL samples do), and on NVIDIA's driver a blocking call or clFinish on one device's
// queue then holds up the transfers to the others. Says so with the numbers, after checking that
// such a context can be made here. Never throws for a driver error (the context is only tried).
void several_devices(const std::vector<tools::DeviceFacts>& devices, std::ostream& os, nlohmann::json& j) {
    std::map<std::size_t, std::vector<const tools::DeviceFacts*>> by_platform;
    for (const auto& d : devices) by_platform[d.platform_index].push_back(&d);
    j["several_devices"] = nlohmann::json::array();
    for (const auto& [platform, devs] : by_platform) {
        if (devs.size() < 2) continue;
        std::vector<cl_device_id> ids;
        for (const auto* d : devs) ids.push_back(d->id);
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, static_cast<cl_uint>(ids.size()), ids.data(), nullptr, nullptr, &err);
        cl_uint spans = 0;
        if (ctx) {
            clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof spans, &spans, nullptr);
            clReleaseContext(ctx);
        }
        const std::string made = ctx ? "one context over its " + std::to_string(spans) + " devices can be made"
                                     : "one context over its " + std::to_string(ids.size()) +
                                           " devices could not be made here (clCreateContext: " + std::to_string(err) +
                                           ")";
        auto line = [](const ScalingFigure& f) {
            return std::string(f.layout) + ": " + fixed(f.one_gpu, 1) + " -> " + fixed(f.two_gpus, 1) + " GB/s (" +
                   fixed(f.two_gpus / f.one_gpu, 2) + "x one GPU)";
        };
        os << "\nseveral devices on platform " << platform << " (" << devs.front()->platform << "): " << made
           << ".\n  On NVIDIA's driver, transfers to the devices of one context scale only when each is "
              "issued\n  non-blocking and waited for by its event: a blocking call or clFinish on one queue "
              "holds up\n  the others. Pinned host -> device, 256 MiB to each of 2 H200s at once, a queue and a "
              "thread each:\n    "
           << line(shared_blocking) << "\n    " << line(shared_events) << "\n    " << line(per_device_contexts)
           << "\n  clpool::upload is non-blocking by default (CLPOOL_ASYNC_H2D): wait on the event it returns, "
              "not\n  clFinish; or give each device a context of its own with clpool::select_device(\"P:D\")\n"
              "  (docs/DEVICES.md, \"Several devices\"). Other drivers were not measured.\n";
        j["several_devices"].push_back(
            {{"platform_index", platform},
             {"platform", devs.front()->platform},
             {"devices", ids.size()},
             {"one_context_spans", spans},
             {"advice",
              "on NVIDIA's driver, wait for transfers by their events, not clFinish or blocking calls, when one "
              "context spans several devices (or use one context per device)"},
             {"measured_gbps",
              {{"one_context_blocking", {shared_blocking.one_gpu, shared_blocking.two_gpus}},
               {"one_context_events", {shared_events.one_gpu, shared_events.two_gpus}},
               {"one_context_per_device", {per_device_contexts.one_gpu, per_device_contexts.two_gpus}}}}});
    }
}
#endif

std::string ms(double s) { return s < 1e-4 ? fixed(s * 1e6, 2) + " us" : fixed(s * 1e3, 3) + " ms"; }

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "Lists OpenCL platforms and devices, then measures on one device what a pool hit saves\n"
        "against creating a buffer, and pinned against pageable copies, and says which clpool\n"
        "pool fits the device and why. Without OpenCL it measures the host backend.\n"
        "Exit codes: 0 ok, 1 a measurement failed (driver error), 2 bad arguments.",
        "clpool-info"};
    std::string device, size_text = "16MiB", json_path;
    std::size_t reps = 5;
    bool list_only = false;
    app.add_option("-d,--device", device,
                   "the device to measure: auto (a GPU, else any OpenCL device, else the host backend), gpu,\n"
                   "cpu, host, N, P:D as listed, platform:TEXT, device:TEXT or TEXT (docs/DEVICES.md);\n"
                   "default: CLPOOL_DEVICE, else auto");
    app.add_option("-s,--size", size_text, "buffer size for the measurements (e.g. 4KiB, 64MiB)")
        ->check(byte_size())
        ->capture_default_str();
    app.add_option("-r,--reps", reps, "timed repetitions per measurement (the median is reported)")
        ->transform(decimal_count())
        ->check(CLI::Range(std::size_t{1}, std::size_t{100000}))
        ->capture_default_str();
    app.add_flag("-l,--list", list_only, "list devices only; measure nothing");
    app.add_option("--json", json_path,
                   "also write everything as JSON to PATH ('-': standard output,\n"
                   "the text report then goes to standard error)");

    return run_tool(app, argc, argv, [&]() -> int {
        const std::size_t bytes = static_cast<std::size_t>(*parse_bytes(size_text));
        if (bytes == 0) throw input_error("--size 0: measurements need at least one byte");
        const auto devices = list_device_facts();
        nlohmann::json j;
        j["devices"] = nlohmann::json::array();
        // With JSON on standard output, the report moves to standard error so the JSON stays parseable.
        std::ostream& os = json_path == "-" ? std::cerr : std::cout;
#ifndef CLPOOL_HAS_OPENCL
        os << "OpenCL: not built in (CLPOOL_WITH_OPENCL=OFF); the host backend only\n";
#else
        if (devices.empty()) {
            os << "OpenCL: no platform found (no ICD installed?); the host backend will be measured\n";
        } else {
            os << "OpenCL devices:\n";
            Table t({"P:D", "platform", "device", "type", "unified", "fp16", "max alloc", "align", "global mem",
                     "NUMA node"});
            for (const auto& d : devices) {
                const std::string id = std::to_string(d.platform_index) + ":" + std::to_string(d.device_index);
                // Where its staging memory and copy threads belong: "-" on one node or off PCI.
                const numa::placement& place = numa::placement_of(d.id);
                t.add({id, d.platform, d.name, d.type, d.unified ? "yes" : "no", d.fp16 ? "yes" : "no",
                       format_bytes(static_cast<double>(d.max_alloc)), std::to_string(d.align_bytes) + " B",
                       format_bytes(static_cast<double>(d.global_mem)),
                       place.node < 0 ? "-" : std::to_string(place.node)});
                j["devices"].push_back({{"id", id}, {"platform", d.platform}, {"name", d.name}, {"type", d.type},
                                        {"index", d.index}, {"unified_memory", d.unified}, {"fp16", d.fp16},
                                        {"max_alloc_bytes", d.max_alloc}, {"base_align_bytes", d.align_bytes},
                                        {"global_mem_bytes", d.global_mem}, {"numa_node", place.node},
                                        {"numa", place.why}});
            }
            t.print(os);
            several_devices(devices, os, j);
        }
#endif
        const DeviceChoice choice = choose_device(device_spec(device), devices);
        const std::string chosen = choice.host
                                       ? std::string("host backend")
                                       : std::to_string(choice.facts.platform_index) + ":" +
                                             std::to_string(choice.facts.device_index) + " " + choice.facts.name;
        os << "\nchosen: " << chosen << " (" << choice.why << ")\n";
        j["chosen"] = {{"device", chosen}, {"why", choice.why}, {"host", choice.host}};
        if (list_only) {
            if (!json_path.empty()) {
                OutputFile out(json_path);
                out.stream() << j.dump(2) << '\n';
                out.close();
            }
            return exit_ok;
        }
        if (!choice.host && bytes > choice.facts.max_alloc)
            throw input_error("--size " + size_text + " (" + std::to_string(bytes) +
                              " bytes) is above the device's maximum allocation of " +
                              std::to_string(choice.facts.max_alloc) + " bytes; pick a smaller --size");

        Measurements m;
        bool unified = true;
#ifdef CLPOOL_HAS_OPENCL
        if (!choice.host) {
            m = measure_opencl(choice.facts.id, bytes, reps);
            unified = choice.facts.unified;
        } else {
            m = measure_host(bytes, reps);
        }
#else
        m = measure_host(bytes, reps);
#endif
        const std::string what = choice.host ? "aligned new + fill + delete" : "clCreateBuffer + write all + release";
        os << "\nallocation of " << format_bytes(static_cast<double>(bytes)) << " (median of " << reps << "):\n";
        Table at({"path", "time", "saved", "vs raw"});
        at.add({"raw: " + what, ms(m.raw_s), "-", "1.0x"});
        for (const auto& [name, s] : m.hit_s)
            at.add({name + " hit + " + (choice.host ? "fill" : "write all") + " + release", ms(s),
                    m.raw_s > s ? ms(m.raw_s - s) : "none", fixed(s > 0 ? m.raw_s / s : 0.0, 1) + "x"});
        at.print(os);

        os << "\ncopies of " << format_bytes(static_cast<double>(bytes)) << " (median of " << reps << "):\n";
        const std::string to = choice.host ? " (memcpy into a pool buffer)" : " (host -> device)";
        const std::string from = choice.host ? " (memcpy out of a pool buffer)" : " (device -> host)";
        Table ct({"copy", "GB/s", "vs pageable"});
        ct.add({"pageable write" + to, fixed(m.pageable_write), "1.00x"});
        ct.add({"pinned write" + to, fixed(m.pinned_write),
                fixed(m.pageable_write > 0 ? m.pinned_write / m.pageable_write : 0.0) + "x"});
        ct.add({"pageable read" + from, fixed(m.pageable_read), "1.00x"});
        ct.add({"pinned read" + from, fixed(m.pinned_read),
                fixed(m.pageable_read > 0 ? m.pinned_read / m.pageable_read : 0.0) + "x"});
        ct.print(os);

        const Advice a = advise(choice.host, unified, m);
        os << "\nrecommended: " << a.pool << "\n  why: " << a.why << "\n";
#ifdef CLPOOL_HAS_OPENCL
        Advice frugal;
        if (!choice.host) {
            frugal = fast_and_frugal(choice.facts.id);
            os << "fast and frugal: " << frugal.pool << "\n  why: " << frugal.why << "\n";
        }
#endif

        os << "\npool stats:\n";
        for (const auto& [name, st] : m.stats) os << "  " << name << ": " << st << '\n';

        if (!json_path.empty()) {
            j["measurements"] = {{"bytes", bytes},
                                 {"reps", reps},
                                 {"raw_seconds", m.raw_s},
                                 {"pageable_write_gbps", m.pageable_write},
                                 {"pageable_read_gbps", m.pageable_read},
                                 {"pinned_write_gbps", m.pinned_write},
                                 {"pinned_read_gbps", m.pinned_read}};
            for (const auto& [name, s] : m.hit_s) j["measurements"]["hit_seconds"][name] = s;
            for (const auto& [name, st] : m.stats)
                j["stats"][name] = {{"hits", st.hits},
                                    {"misses", st.misses},
                                    {"evictions", st.evictions},
                                    {"bytes_allocated", st.bytes_allocated},
                                    {"bytes_cached", st.bytes_cached}};
            j["recommendation"] = {{"pool", a.pool}, {"why", a.why}};
#ifdef CLPOOL_HAS_OPENCL
            if (!choice.host) j["fast_and_frugal"] = {{"pool", frugal.pool}, {"why", frugal.why}};
#endif
            OutputFile out(json_path);
            out.stream() << j.dump(2) << '\n';
            out.close();
        }
        return exit_ok;
    });
}
