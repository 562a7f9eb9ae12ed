// driver_floor.cpp's measurement through CUDA's runtime, as a baseline: the cost of obtaining S bytes of device
// memory, cudaMalloc and a 1-byte cudaMemset at its end, then cudaDeviceSynchronize; cudaFree timed apart.
//   driver_floor_cuda [--device N] [--runs 3] [--segment 64MiB] [--max-seconds 10] [--jsonl PATH] [LABEL=]SIZE ...
// Ways: a_one_buffer (one cudaMalloc of S) and b_segments (S in --segment pieces). Same table and JSON lines as
// driver_floor, with "api": "cuda".
#include <cuda_runtime.h>

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
#include <string>
#include <vector>

namespace {

using namespace driver_floor;

Run cuda_run(const std::vector<std::uint64_t>& pieces) {
    Run r;
    r.pieces = pieces.size();
    std::vector<char*> ptrs;
    auto t0 = std::chrono::steady_clock::now();
    for (auto n : pieces) {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, n);
        if (e != cudaSuccess) {
            r.error = std::string("cudaMalloc: ") + cudaGetErrorString(e);
            break;
        }
        ptrs.push_back(static_cast<char*>(p));
    }
    r.create_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (r.error.empty()) {
        for (std::size_t i = 0; i < ptrs.size() && r.error.empty(); ++i) {
            const cudaError_t e = cudaMemset(ptrs[i] + pieces[i] - 1, 0, 1);
            if (e != cudaSuccess) r.error = std::string("cudaMemset: ") + cudaGetErrorString(e);
        }
        const cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess && r.error.empty()) r.error = std::string("sync: ") + cudaGetErrorString(e);
    }
    r.use_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (char* p : ptrs) cudaFree(p);
    cudaDeviceSynchronize();
    r.release_ms = ms_since(t0);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    int device = 0, runs_wanted = 3;
    double max_seconds = 10;
    std::uint64_t segment = std::uint64_t{64} << 20;
    std::string jsonl_path;
    std::vector<Size> sizes;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if ((a == "-d" || a == "--device") && has) device = std::atoi(argv[++i]);
        else if (a == "--runs" && has) runs_wanted = std::max(1, std::atoi(argv[++i]));
        else if (a == "--max-seconds" && has) max_seconds = std::atof(argv[++i]);
        else if (a == "--jsonl" && has) jsonl_path = argv[++i];
        else if (a == "--segment" && has) segment = parse_bytes(argv[++i]).value_or(segment);
        else {
            const auto eq = a.find('=');
            const auto b = parse_bytes(eq == std::string::npos ? a : a.substr(eq + 1));
            if (!b) {
                std::fprintf(stderr, "driver_floor_cuda: not a size: %s\n", a.c_str());
                return 2;
            }
            sizes.push_back({eq == std::string::npos ? fmt_bytes(static_cast<double>(*b)) : a.substr(0, eq), *b});
        }
    }
    if (sizes.empty()) {
        std::fprintf(stderr,
                     "usage: driver_floor_cuda [--device N] [--runs N] [--segment BYTES] [--jsonl PATH] "
                     "[LABEL=]SIZE ...\n");
        return 2;
    }
    if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {  // the context, made now
        std::fprintf(stderr, "driver_floor_cuda: no CUDA device %d\n", device);
        return 1;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    const std::string name = std::string(prop.name) + " (CUDA runtime " + std::to_string(runtime) + ", driver " +
                             std::to_string(driver) + ")";
    cuda_run({4096});
    std::ofstream jsonl;
    if (!jsonl_path.empty()) jsonl.open(jsonl_path);
    std::printf("device: %s\n%d runs each (median), %s segments\n\n", name.c_str(), runs_wanted,
                fmt_bytes(static_cast<double>(segment)).c_str());
    std::printf("%-16s %10s %-13s %7s %6s %11s %11s %11s %11s  %s\n", "label", "size", "way", "pieces", "runs",
                "create ms", "1st use ms", "total ms", "release ms", "note");
    std::vector<std::string> lines;
    for (const auto& s : sizes) {
        for (const char* way : {"a_one_buffer", "b_segments"}) {
            std::string j = "{\"tool\": \"driver_floor\", \"api\": \"cuda\", \"device\": \"" + name +
                            "\", \"label\": \"" + s.label + "\", \"bytes\": " + std::to_string(s.bytes) +
                            ", \"way\": \"" + way + "\"";
            std::size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            std::string skipped, note;
            std::vector<Run> runs;
            if (s.bytes > free_b) {
                skipped = "above the device's free memory (" + fmt_bytes(static_cast<double>(free_b)) + ")";
            } else {
                const auto pieces =
                    std::string(way) == "b_segments" ? split(s.bytes, segment) : std::vector<std::uint64_t>{s.bytes};
                const auto t0 = std::chrono::steady_clock::now();
                for (int r = 0; r < runs_wanted; ++r) {
                    Run run = cuda_run(pieces);
                    if (!run.error.empty()) {
                        skipped = "failed: " + run.error;
                        break;
                    }
                    runs.push_back(run);
                    if (ms_since(t0) > max_seconds * 1e3 && r + 1 < runs_wanted) {
                        note = "runs stopped after " + std::to_string(runs.size()) + ": past --max-seconds";
                        break;
                    }
                }
            }
            if (!skipped.empty()) {
                j += ", \"skipped\": \"" + skipped + "\"}";
                std::printf("%-16s %10s %-13s %7s %6s %11s %11s %11s %11s  skipped: %s\n", s.label.c_str(),
                            fmt_bytes(static_cast<double>(s.bytes)).c_str(), way, "-", "-", "-", "-", "-", "-",
                            skipped.c_str());
            } else {
                std::vector<double> c, u, t, rel;
                for (const auto& r : runs) {
                    c.push_back(r.create_ms), u.push_back(r.use_ms), t.push_back(r.create_ms + r.use_ms);
                    rel.push_back(r.release_ms);
                }
                char row[256];
                std::snprintf(row, sizeof row,
                              ", \"pieces\": %zu, \"runs\": %zu, \"create_ms\": %.4f, \"first_use_ms\": %.4f, "
                              "\"total_ms\": %.4f, \"release_ms\": %.4f",
                              runs.front().pieces, runs.size(), median(c), median(u), median(t), median(rel));
                j += row;
                if (!note.empty()) j += ", \"note\": \"" + note + "\"";
                j += "}";
                std::printf("%-16s %10s %-13s %7zu %6zu %11.3f %11.3f %11.3f %11.3f  %s\n", s.label.c_str(),
                            fmt_bytes(static_cast<double>(s.bytes)).c_str(), way, runs.front().pieces, runs.size(),
                            median(c), median(u), median(t), median(rel), note.c_str());
            }
            std::fflush(stdout);
            if (jsonl.is_open()) jsonl << j << '\n' << std::flush;
            lines.push_back(j);
        }
    }
    std::printf("\n");
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    return 0;
}
