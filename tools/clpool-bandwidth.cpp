// clpool-bandwidth: host<->device copy bandwidth over a sweep of sizes, per transfer mode; text, CSV, JSON, SVG.
#include <nlohmann/json.hpp>

#include <clpool/clpool.hpp>
#if __has_include(<clpool/interop/transfer.hpp>)
#include <clpool/interop/transfer.hpp>
#define CLPOOL_BANDWIDTH_HAS_STAGED 1
#else
#define CLPOOL_BANDWIDTH_HAS_STAGED 0
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/devices.hpp"
#include "common/progress.hpp"
#include "common/svg_plot.hpp"
#include "common/table.hpp"
#include "common/timing.hpp"
#include "common/units.hpp"

namespace {

using namespace clpool;
using namespace clpool::tools;

struct ModeInfo {
    const char* name;
    const char* what;
    bool available;
};

constexpr bool staged = CLPOOL_BANDWIDTH_HAS_STAGED != 0;

const std::vector<ModeInfo>& all_modes() {
    static const std::vector<ModeInfo> modes{
        {"pageable-write", "clEnqueueWriteBuffer from malloc'd (pageable) host memory", true},
        {"pageable-read", "clEnqueueReadBuffer into pageable host memory", true},
        {"pinned-write", "clEnqueueWriteBuffer from a mapped CL_MEM_ALLOC_HOST_PTR buffer (PinnedBufferPool)", true},
        {"pinned-read", "clEnqueueReadBuffer into a mapped CL_MEM_ALLOC_HOST_PTR buffer", true},
        {"staged-write",
         staged ? "clpool::upload from pageable memory, always through pinned staging (transfer.hpp)"
                : "UNAVAILABLE in this build: clpool/interop/transfer.hpp (the staging pipeline) is not there",
         staged},
        {"staged-read",
         staged ? "clpool::download into pageable memory, always through pinned staging"
                : "UNAVAILABLE in this build: clpool/interop/transfer.hpp is not there",
         staged},
        {"map-write", "map the device buffer (WRITE_INVALIDATE_REGION), memcpy from pageable, unmap", true},
        {"map-read", "map the device buffer for reading, memcpy into pageable, unmap", true},
    };
    return modes;
}

std::string mode_help() {
    std::string s = "comma-separated transfer modes (default: every available one):\n";
    for (const auto& m : all_modes()) s += std::string("  ") + m.name + ": " + m.what + "\n";
    return s;
}

std::vector<std::size_t> sweep(std::size_t lo, std::size_t hi, double factor) {
    std::vector<std::size_t> out;
    for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * (1 + 1e-9);) {
        const auto n = static_cast<std::size_t>(std::llround(s));
        if (out.empty() || n > out.back()) out.push_back(n);
        s = std::max(s * factor, s + 1);
    }
    return out;
}

struct Point {
    std::string mode;
    std::size_t bytes;
    double seconds;  // median
    double gbps;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "Measures host<->device copy bandwidth (GB/s, 1e9 bytes/s, median of --reps) over a sweep of\n"
        "sizes for each transfer mode. A progress bar shows on a terminal. Exit codes: 0 ok,\n"
        "1 a transfer failed (driver error, out of memory: try a smaller --max), 2 bad arguments.",
        "clpool-bandwidth"};
    std::string device, min_text = "4KiB", max_text = "1GiB", modes_text, csv_path, json_path, svg_path;
    double factor = 2.0;
    std::size_t reps = 5, warmup = 1;
    bool quiet = false;
    app.add_option("-d,--device", device,
                   "an OpenCL device: auto, gpu, cpu, N, P:D (as clpool-info lists them), TEXT\n"
                   "(docs/DEVICES.md); default: CLPOOL_DEVICE, else auto");
    app.add_option("--min", min_text, "smallest transfer (e.g. 4KiB)")->check(byte_size())->capture_default_str();
    app.add_option("--max", max_text, "largest transfer, capped at the device's max allocation")
        ->check(byte_size())
        ->capture_default_str();
    app.add_option("--factor", factor, "each size is the previous one times this (2: powers of two)")
        ->check(decimal_number())
        ->check(CLI::Range(1.01, 1024.0))
        ->capture_default_str();
    app.add_option("-m,--modes", modes_text, mode_help());
    app.add_option("-r,--reps", reps, "timed repetitions per point; the median is reported")
        ->transform(decimal_count())
        ->check(CLI::Range(std::size_t{1}, std::size_t{10000}))
        ->capture_default_str();
    app.add_option("-w,--warmup", warmup, "untimed repetitions before each point")
        ->transform(decimal_count())
        ->check(CLI::Range(std::size_t{0}, std::size_t{10000}))
        ->capture_default_str();
    app.add_option("--csv", csv_path, "write CSV (size_bytes,mode,gbps,median_seconds) to PATH ('-': standard output)");
    app.add_option("--json", json_path, "write JSON to PATH ('-': standard output)");
    app.add_option("--svg", svg_path, "write a plot of GB/s against size (log2 axis), one line per mode");
    app.add_flag("-q,--quiet", quiet, "no progress bar and no table (for --csv/--json to standard output)");

    return run_tool(app, argc, argv, [&]() -> int {
        const std::size_t lo = static_cast<std::size_t>(*parse_bytes(min_text));
        std::size_t hi = static_cast<std::size_t>(*parse_bytes(max_text));
        if (lo == 0) throw input_error("--min 0: the smallest transfer must be at least 1 byte");
        if (lo > hi) throw input_error("--min " + min_text + " is above --max " + max_text + "; swap them");

        std::vector<const ModeInfo*> modes;
        if (modes_text.empty()) {
            for (const auto& m : all_modes())
                if (m.available) modes.push_back(&m);
        } else {
            std::string rest = modes_text;
            while (!rest.empty()) {
                const auto comma = rest.find(',');
                const std::string name = rest.substr(0, comma);
                rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
                const ModeInfo* found = nullptr;
                for (const auto& m : all_modes())
                    if (name == m.name) found = &m;
                if (!found) {
                    std::string names;
                    for (const auto& m : all_modes()) names += std::string(names.empty() ? "" : ", ") + m.name;
                    throw input_error("unknown mode '" + name + "'; modes: " + names);
                }
                if (std::find(modes.begin(), modes.end(), found) != modes.end())
                    throw input_error("mode '" + name + "' is given twice in --modes '" + modes_text +
                                      "'; give each mode once");
                if (!found->available)
                    throw input_error("mode '" + name +
                                      "' is unavailable in this build: clpool/interop/transfer.hpp "
                                      "(upload/download through pinned staging) is not there; leave it out");
                modes.push_back(found);
            }
        }

        const DeviceChoice choice = choose_device(device_spec(device), list_device_facts());
        if (choice.host)
            throw input_error(
                std::string("clpool-bandwidth measures host<->device copies and needs an OpenCL device (") +
                choice.why + "); install an OpenCL driver (e.g. pocl-opencl-icd) or pick one with --device");
        if (hi > choice.facts.max_alloc) {
            hi = static_cast<std::size_t>(choice.facts.max_alloc);
            std::cerr << "clpool-bandwidth: --max capped at the device's maximum allocation, "
                      << format_bytes(static_cast<double>(hi)) << '\n';
        }
        const auto sizes = sweep(lo, hi, factor);
        if (sizes.empty()) throw input_error("no sizes between --min and the device's maximum allocation");
        const std::size_t top = sizes.back();

        DeviceSession session(choice.facts.id);
        const cl_command_queue q = session.queue();
        BufferPool device_pool{OpenCLBackend(session.context, session.device, CL_MEM_READ_WRITE)};
        PinnedBufferPool pinned_pool{OpenCLBackend(session.context, session.device, CL_MEM_READ_WRITE)};
        auto dev = device_pool.allocate(top);
        auto pin = pinned_pool.allocate(top);
        cl_int err = CL_SUCCESS;
        void* pinned = clEnqueueMapBuffer(q, pin.buffer()(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, top, 0, nullptr,
                                          nullptr, &err);
        opencl::check(err, "clEnqueueMapBuffer of the pinned buffer");
        std::memset(pinned, 1, top);
        std::vector<unsigned char> pageable(top, 1);
        const cl_mem d = dev.buffer()();

#if CLPOOL_BANDWIDTH_HAS_STAGED
        MappedPinnedPool mapped_staging{MappedPinnedBackend(session.context, session.device, CL_MEM_READ_WRITE)};
        TransferOptions staging;
        staging.staging_pool = &mapped_staging;
        staging.stage = true;          // the pipeline itself, not the library's choice for small sizes
        staging.direct_max_bytes = 0;
        staging.async = false;
#endif
        auto run_once = [&](const std::string& mode, std::size_t n) {
            if (mode == "pageable-write")
                opencl::check(clEnqueueWriteBuffer(q, d, CL_TRUE, 0, n, pageable.data(), 0, nullptr, nullptr), "write");
            else if (mode == "pageable-read")
                opencl::check(clEnqueueReadBuffer(q, d, CL_TRUE, 0, n, pageable.data(), 0, nullptr, nullptr), "read");
            else if (mode == "pinned-write")
                opencl::check(clEnqueueWriteBuffer(q, d, CL_TRUE, 0, n, pinned, 0, nullptr, nullptr), "write");
            else if (mode == "pinned-read")
                opencl::check(clEnqueueReadBuffer(q, d, CL_TRUE, 0, n, pinned, 0, nullptr, nullptr), "read");
            else if (mode == "map-write" || mode == "map-read") {
                const bool w = mode == "map-write";
                cl_int e = CL_SUCCESS;
                void* p = clEnqueueMapBuffer(q, d, CL_TRUE, w ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ, 0, n, 0,
                                             nullptr, nullptr, &e);
                opencl::check(e, "clEnqueueMapBuffer");
                if (w) std::memcpy(p, pageable.data(), n);
                else std::memcpy(pageable.data(), p, n);
                opencl::check(clEnqueueUnmapMemObject(q, d, p, 0, nullptr, nullptr), "clEnqueueUnmapMemObject");
                opencl::check(clFinish(q), "clFinish");
            }
#if CLPOOL_BANDWIDTH_HAS_STAGED
            else if (mode == "staged-write")
                upload(session.queue, dev.buffer(), 0, pageable.data(), n, staging).wait();
            else if (mode == "staged-read")
                download(session.queue, pageable.data(), dev.buffer(), 0, n, staging).wait();
#endif
        };

        std::vector<Point> points;
        ProgressBar progress(modes.size() * sizes.size(), !quiet);
        std::size_t step = 0;
        for (std::size_t n : sizes)
            for (const ModeInfo* m : modes) {
                progress.update(step++, std::string(m->name) + " " + format_bytes(static_cast<double>(n)));
                const double s = median_seconds(warmup, reps, [&] { run_once(m->name, n); });
                points.push_back({m->name, n, s, s > 0 ? static_cast<double>(n) / s / 1e9 : 0.0});
            }
        progress.finish();
        opencl::check(clEnqueueUnmapMemObject(q, pin.buffer()(), pinned, 0, nullptr, nullptr),
                      "clEnqueueUnmapMemObject");
        opencl::check(clFinish(q), "clFinish");

        if (!quiet) {
            std::cout << "device: " << choice.facts.name << " (" << choice.facts.platform << "; " << choice.why
                      << ")\nGB/s (1e9 bytes/s), median of " << reps << " after " << warmup << " warm-up\n";
            std::vector<std::string> header{"size"};
            for (const ModeInfo* m : modes) header.push_back(m->name);
            Table t(header);
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                std::vector<std::string> row{format_bytes(static_cast<double>(sizes[i]))};
                for (std::size_t k = 0; k < modes.size(); ++k) row.push_back(fixed(points[i * modes.size() + k].gbps));
                t.add(row);
            }
            t.print(std::cout, "");
            if (!staged)
                std::cout << "staged-write/staged-read: unavailable in this build (no clpool/interop/transfer.hpp)\n";
        }
        if (!csv_path.empty()) {
            OutputFile out(csv_path);
            out.stream() << "size_bytes,mode,gbps,median_seconds\n";
            for (const auto& p : points)
                out.stream() << p.bytes << ',' << p.mode << ',' << fixed(p.gbps, 4) << ',' << p.seconds << '\n';
            out.close();
        }
        if (!json_path.empty()) {
            nlohmann::json j;
            j["device"] = {{"name", choice.facts.name},
                           {"platform", choice.facts.platform},
                           {"unified_memory", choice.facts.unified}};
            j["reps"] = reps;
            j["warmup"] = warmup;
            j["staged_available"] = staged;
            j["points"] = nlohmann::json::array();
            for (const auto& p : points)
                j["points"].push_back(
                    {{"mode", p.mode}, {"bytes", p.bytes}, {"gbps", p.gbps}, {"median_seconds", p.seconds}});
            OutputFile out(json_path);
            out.stream() << j.dump(2) << '\n';
            out.close();
        }
        if (!svg_path.empty()) {
            LinePlot plot;
            plot.title = "clpool-bandwidth: " + choice.facts.name;
            plot.x_label = "transfer size";
            plot.y_label = "GB/s";
            plot.log2_x = true;
            plot.x_format = [](double v) { return format_bytes(v); };
            std::map<std::string, std::size_t> by_mode;  // indices: add() may move the series
            for (const ModeInfo* m : modes) {
                by_mode[m->name] = plot.series.size();
                plot.add(m->name);
            }
            for (const auto& p : points)
                plot.series[by_mode[p.mode]].points.emplace_back(static_cast<double>(p.bytes), p.gbps);
            OutputFile out(svg_path);
            plot.write(out.stream());
            out.close();
        }
        return exit_ok;
    });
}
