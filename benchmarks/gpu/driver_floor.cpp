// The driver's own cost of obtaining S bytes of device memory, for the floor under a pool's first pass from cold:
// a pool that holds about the live bytes must obtain at least the trace's live peak from the driver.
//   driver_floor [-d gpu|cpu|auto|N|P:D] [--runs 3] [--segment 64MiB] [--max-seconds 10] [--jsonl PATH]
//                [LABEL=]SIZE ...
// SIZE: bytes with an optional K/M/G/T[i][B] suffix, decimals allowed (2.1GiB). Per size, three ways, each the
// median of --runs fresh runs with everything released between them:
//   a_one_buffer  clCreateBuffer of S and a 1-byte clEnqueueFillBuffer at its start, clFinish; above
//                 CL_DEVICE_MAX_MEM_ALLOC_SIZE, the fewest buffers of at most that size
//   b_segments    S in --segment buffers (the arenas' large segments), each created and filled the same way
//   c_svm         clSVMAlloc of S (coarse-grained) and a 1-byte clEnqueueSVMMemFill at its start, clFinish
// and, apart, the release of what was obtained (clReleaseMemObject or clSVMFree, then clFinish).
// Prints a table and one JSON line per measurement (also to --jsonl). OpenCL only.
#define CL_HPP_TARGET_OPENCL_VERSION 200
#define CL_HPP_MINIMUM_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS  // clCreateCommandQueue: the 1.2 devices too
#include <CL/opencl.hpp>

#include "driver_floor_common.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace driver_floor;

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
        else out += c;
    }
    return out + "\"";
}

// -d: auto (a GPU, else the first device), gpu, cpu, N (in platform, device order), P:D.
cl::Device choose(const std::string& sel) {
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    std::vector<std::pair<std::size_t, cl::Device>> all;  // (platform index, device)
    for (std::size_t p = 0; p < platforms.size(); ++p) {
        std::vector<cl::Device> ds;
        if (platforms[p].getDevices(CL_DEVICE_TYPE_ALL, &ds) != CL_SUCCESS) continue;
        for (auto& d : ds) all.emplace_back(p, d);
    }
    if (all.empty()) throw std::runtime_error("no OpenCL device");
    const auto of_type = [&](cl_device_type t) -> std::optional<cl::Device> {
        for (auto& [p, d] : all)
            if (d.getInfo<CL_DEVICE_TYPE>() & t) return d;
        return std::nullopt;
    };
    if (sel == "auto") return of_type(CL_DEVICE_TYPE_GPU).value_or(all.front().second);
    if (sel == "gpu" || sel == "cpu" || sel == "accelerator") {
        const auto d = of_type(sel == "gpu"   ? CL_DEVICE_TYPE_GPU
                               : sel == "cpu" ? CL_DEVICE_TYPE_CPU
                                              : CL_DEVICE_TYPE_ACCELERATOR);
        if (!d) throw std::runtime_error("no OpenCL device of type " + sel);
        return *d;
    }
    unsigned long p = 0, i = 0;
    char extra = 0;
    if (std::sscanf(sel.c_str(), "%lu:%lu%c", &p, &i, &extra) == 2) {
        std::size_t k = 0;
        for (auto& [pp, d] : all)
            if (pp == p && k++ == i) return d;
    } else if (std::sscanf(sel.c_str(), "%lu%c", &i, &extra) == 1 && i < all.size()) {
        return all[i].second;
    }
    throw std::runtime_error("no OpenCL device '" + sel + "' (auto, gpu, cpu, N or P:D)");
}

struct Env {
    cl_context ctx = nullptr;
    cl_command_queue queue = nullptr;
};

// clCreateBuffer of each piece, then a 1-byte fill at each one's end and one clFinish; then their release.
Run buffers_run(const Env& e, const std::vector<std::uint64_t>& pieces) {
    Run r;
    r.pieces = pieces.size();
    std::vector<cl_mem> mems;
    mems.reserve(pieces.size());
    cl_int err = CL_SUCCESS;
    const cl_uchar pattern = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (auto n : pieces) {
        cl_mem m = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, n, nullptr, &err);
        if (err != CL_SUCCESS) {
            r.error = "clCreateBuffer " + std::to_string(err);
            break;
        }
        mems.push_back(m);
    }
    r.create_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (r.error.empty()) {
        for (std::size_t i = 0; i < mems.size() && r.error.empty(); ++i) {
            err = clEnqueueFillBuffer(e.queue, mems[i], &pattern, 1, 0, 1, 0, nullptr, nullptr);
            if (err != CL_SUCCESS) r.error = "clEnqueueFillBuffer " + std::to_string(err);
        }
        err = clFinish(e.queue);
        if (err != CL_SUCCESS && r.error.empty()) r.error = "clFinish " + std::to_string(err);
    }
    r.use_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (cl_mem m : mems) clReleaseMemObject(m);
    clFinish(e.queue);
    r.release_ms = ms_since(t0);
    return r;
}

Run svm_run(const Env& e, const std::vector<std::uint64_t>& pieces) {
    Run r;
    r.pieces = pieces.size();
    std::vector<void*> ptrs;
    ptrs.reserve(pieces.size());
    cl_int err = CL_SUCCESS;
    const cl_uchar pattern = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (auto n : pieces) {
        void* p = clSVMAlloc(e.ctx, CL_MEM_READ_WRITE, n, 0);
        if (!p) {
            r.error = "clSVMAlloc returned null";
            break;
        }
        ptrs.push_back(p);
    }
    r.create_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (r.error.empty()) {
        for (std::size_t i = 0; i < ptrs.size() && r.error.empty(); ++i) {
            err = clEnqueueSVMMemFill(e.queue, ptrs[i], &pattern, 1, 1, 0, nullptr, nullptr);
            if (err != CL_SUCCESS) r.error = "clEnqueueSVMMemFill " + std::to_string(err);
        }
        err = clFinish(e.queue);
        if (err != CL_SUCCESS && r.error.empty()) r.error = "clFinish " + std::to_string(err);
    }
    r.use_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (void* p : ptrs) clSVMFree(e.ctx, p);
    clFinish(e.queue);
    r.release_ms = ms_since(t0);
    return r;
}

struct Options {
    std::string device = "auto", jsonl;
    int runs = 3;
    std::uint64_t segment = std::uint64_t{64} << 20;
    double max_seconds = 10;
    std::vector<Size> sizes;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "driver_floor: %s\nusage: driver_floor [-d auto|gpu|cpu|N|P:D] [--runs N] [--segment BYTES] "
                 "[--max-seconds S] [--jsonl PATH] [LABEL=]SIZE ...\n",
                 why);
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(("no value after " + a).c_str());
            return argv[++i];
        };
        if (a == "-d" || a == "--device") o.device = value();
        else if (a == "--runs") o.runs = std::max(1, std::atoi(value().c_str()));
        else if (a == "--max-seconds") o.max_seconds = std::atof(value().c_str());
        else if (a == "--jsonl") o.jsonl = value();
        else if (a == "--segment") {
            const auto b = parse_bytes(value());
            if (!b) usage("--segment needs a byte count");
            o.segment = *b;
        } else if (a == "-h" || a == "--help") usage("the driver's cost of obtaining S bytes");
        else {
            const auto eq = a.find('=');
            Size s;
            s.label = eq == std::string::npos ? "" : a.substr(0, eq);
            const auto b = parse_bytes(eq == std::string::npos ? a : a.substr(eq + 1));
            if (!b) usage(("not a size: " + a).c_str());
            s.bytes = *b;
            if (s.label.empty()) s.label = fmt_bytes(static_cast<double>(s.bytes));
            o.sizes.push_back(s);
        }
    }
    if (o.sizes.empty()) usage("no sizes");
    return o;
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    const cl::Device device = choose(o.device);
    const cl::Platform platform(device.getInfo<CL_DEVICE_PLATFORM>());
    const std::string name = device.getInfo<CL_DEVICE_NAME>() + " (" + platform.getInfo<CL_PLATFORM_NAME>() + ", " +
                             device.getInfo<CL_DRIVER_VERSION>() + ")";
    const std::uint64_t max_alloc = device.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
    const std::uint64_t global_mem = device.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
    const std::string version = device.getInfo<CL_DEVICE_VERSION>();
    cl_device_svm_capabilities svm = 0;
    std::string no_svm;
    if (version.rfind("OpenCL 1.", 0) == 0) no_svm = "the device is " + version + " (SVM needs 2.0)";
    else if (clGetDeviceInfo(device(), CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, nullptr) != CL_SUCCESS)
        no_svm = "CL_DEVICE_SVM_CAPABILITIES cannot be queried";
    else if (!(svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)) no_svm = "no coarse-grained SVM buffers";

    // A context and queue of its own for every measurement: an error one leaves behind (NVIDIA reports
    // some on a later call, as CL_INVALID_COMMAND_QUEUE) is then that measurement's alone.
    cl_device_id id = device();
    const auto fresh_env = [&] {
        Env e;
        cl_int err = CL_SUCCESS;
        e.ctx = clCreateContext(nullptr, 1, &id, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("clCreateContext " + std::to_string(err));
        e.queue = clCreateCommandQueue(e.ctx, id, 0, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue " + std::to_string(err));
        // The context's own start-up (NVIDIA's is lazy, at the first use of memory) is not the driver's
        // cost per byte.
        buffers_run(e, {4096});
        if (no_svm.empty()) svm_run(e, {4096});
        return e;
    };
    const auto drop_env = [](Env& e) {
        clReleaseCommandQueue(e.queue);
        clReleaseContext(e.ctx);
    };

    std::ofstream jsonl;
    if (!o.jsonl.empty()) jsonl.open(o.jsonl);
    const std::uint64_t segment = std::min(o.segment, max_alloc);
    std::printf("device: %s\nmax alloc %s, global memory %s, SVM: %s; %d runs each (median), %s segments\n\n",
                name.c_str(), fmt_bytes(static_cast<double>(max_alloc)).c_str(),
                fmt_bytes(static_cast<double>(global_mem)).c_str(), no_svm.empty() ? "coarse-grained" : no_svm.c_str(),
                o.runs, fmt_bytes(static_cast<double>(segment)).c_str());
    std::printf("%-16s %10s %-13s %7s %6s %11s %11s %11s %11s  %s\n", "label", "size", "way", "pieces", "runs",
                "create ms", "1st use ms", "total ms", "release ms", "note");
    std::fflush(stdout);

    const auto emit = [&](const Size& s, const char* way, const std::vector<Run>& runs, const std::string& note,
                          const std::string& skipped) {
        std::string j = "{\"tool\": \"driver_floor\", \"api\": \"opencl\", \"device\": " + json_string(name) +
                        ", \"label\": " + json_string(s.label) + ", \"bytes\": " + std::to_string(s.bytes) +
                        ", \"way\": \"" + way + "\"";
        char row[256];
        if (!skipped.empty()) {
            j += ", \"skipped\": " + json_string(skipped) + "}";
            std::printf("%-16s %10s %-13s %7s %6s %11s %11s %11s %11s  skipped: %s\n", s.label.c_str(),
                        fmt_bytes(static_cast<double>(s.bytes)).c_str(), way, "-", "-", "-", "-", "-", "-",
                        skipped.c_str());
        } else {
            std::vector<double> c, u, t, rel;
            for (const auto& r : runs) {
                c.push_back(r.create_ms), u.push_back(r.use_ms), t.push_back(r.create_ms + r.use_ms);
                rel.push_back(r.release_ms);
            }
            std::string all = "[";
            for (std::size_t i = 0; i < t.size(); ++i) {
                std::snprintf(row, sizeof row, "%s%.4f", i ? ", " : "", t[i]);
                all += row;
            }
            std::snprintf(row, sizeof row,
                          ", \"pieces\": %zu, \"runs\": %zu, \"create_ms\": %.4f, \"first_use_ms\": %.4f, "
                          "\"total_ms\": %.4f, \"release_ms\": %.4f, \"total_ms_each\": ",
                          runs.front().pieces, runs.size(), median(c), median(u), median(t), median(rel));
            j += row + all + "]";
            if (!note.empty()) j += ", \"note\": " + json_string(note);
            j += "}";
            std::printf("%-16s %10s %-13s %7zu %6zu %11.3f %11.3f %11.3f %11.3f  %s\n", s.label.c_str(),
                        fmt_bytes(static_cast<double>(s.bytes)).c_str(), way, runs.front().pieces, runs.size(),
                        median(c), median(u), median(t), median(rel), note.c_str());
        }
        std::fflush(stdout);
        if (jsonl.is_open()) jsonl << j << '\n' << std::flush;
        return j;
    };

    std::vector<std::string> lines;
    for (const auto& s : o.sizes) {
        for (const char* way : {"a_one_buffer", "b_segments", "c_svm"}) {
            const bool is_svm = std::string(way) == "c_svm";
            std::string note;
            std::vector<std::uint64_t> pieces;
            if (s.bytes > global_mem) {
                lines.push_back(
                    emit(s, way, {}, "",
                         "above the device's global memory (" + fmt_bytes(static_cast<double>(global_mem)) + ")"));
                continue;
            }
            if (is_svm && !no_svm.empty()) {
                lines.push_back(emit(s, way, {}, "", no_svm));
                continue;
            }
            if (std::string(way) == "b_segments") {
                pieces = split(s.bytes, segment);
            } else {
                pieces = split(s.bytes, max_alloc);
                if (pieces.size() > 1)
                    note = "above CL_DEVICE_MAX_MEM_ALLOC_SIZE (" + fmt_bytes(static_cast<double>(max_alloc)) +
                           "): " + std::to_string(pieces.size()) + " pieces";
            }
            std::vector<Run> runs;
            std::string failed;
            Env e = fresh_env();
            const auto t0 = std::chrono::steady_clock::now();
            for (int r = 0; r < o.runs; ++r) {
                Run run = is_svm ? svm_run(e, pieces) : buffers_run(e, pieces);
                if (!run.error.empty()) {
                    failed = run.error;
                    break;
                }
                runs.push_back(run);
                if (ms_since(t0) > o.max_seconds * 1e3 && r + 1 < o.runs) {
                    note += std::string(note.empty() ? "" : "; ") + "runs stopped after " +
                            std::to_string(runs.size()) + ": past --max-seconds";
                    break;
                }
            }
            drop_env(e);
            if (!failed.empty()) lines.push_back(emit(s, way, {}, "", "failed: " + failed));
            else lines.push_back(emit(s, way, runs, note, ""));
        }
    }
    std::printf("\n");
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    return 0;
} catch (const std::exception& ex) {
    std::fprintf(stderr, "driver_floor: %s\n", ex.what());
    return 1;
}
