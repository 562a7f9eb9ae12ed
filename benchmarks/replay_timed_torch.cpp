// replay_timed_torch: replays a clpool trace (docs/TRACE_FORMAT.md) through PyTorch's CUDA caching
// allocator, c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete, timed as `clpool-replay --timed`
// times clpool's pools: a first pass from an empty cache (emptyCache()), then a second pass of the same
// trace over the warm cache, each as the mean alloc + free pair, with the reserved bytes' peak over the
// trace's live peak and the device allocations each pass made (num_device_alloc). PyTorch reads
// PYTORCH_CUDA_ALLOC_CONF at start-up, so the default allocator and expandable_segments:True are
// separate runs of this program.
//
//   replay_timed_torch TRACE [--runs N] [--json PATH] [--name TEXT]
//
// TRACE is plain text ('-': standard input). Built with Torch's compile flags; it uses nothing of clpool
// but the std-only trace parser, so no ABI is shared with clpool's other code.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "replay/timed_ops.hpp"
#include "replay/trace.hpp"

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

struct Pass {
    double seconds = 0;
    std::uint64_t allocations = 0;
    std::uint64_t failed = 0;
    std::int64_t device_allocs = 0;   // cudaMalloc / cuMemMap calls (num_device_alloc)
    std::int64_t segments_made = 0;   // segments allocated (segment.allocated)
    std::int64_t alloc_retries = 0;   // device allocations retried after freeing the cache
    std::int64_t peak_reserved = 0;   // the reserved bytes' peak since the cache was emptied
};

// Index 0 of a StatArray is the aggregate over the pools (StatType::AGGREGATE in every version).
Pass counts(const c10::CachingDeviceAllocator::DeviceStats& before,
            const c10::CachingDeviceAllocator::DeviceStats& after, double seconds, std::uint64_t allocations,
            std::uint64_t failed) {
    Pass p;
    p.seconds = seconds;
    p.allocations = allocations;
    p.failed = failed;
    p.device_allocs = after.num_device_alloc - before.num_device_alloc;
    p.segments_made = after.segment[0].allocated - before.segment[0].allocated;
    p.alloc_retries = after.num_alloc_retries - before.num_alloc_retries;
    p.peak_reserved = after.reserved_bytes[0].peak;
    return p;
}

double pass_seconds(const clpool::replay::TimedOps& t, std::vector<void*>& slots, std::uint64_t& failed) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& o : t.ops) {
        void*& p = slots[o.slot];
        if (o.bytes) {
            try {
                p = alloc::raw_alloc(static_cast<size_t>(o.bytes));
            } catch (const c10::Error&) {  // out of memory
                p = nullptr;
                ++failed;
            }
        } else if (p) {
            alloc::raw_delete(p);
            p = nullptr;
        }
    }
    for (auto& p : slots)  // what the trace never frees: every alloc gets its free
        if (p) {
            alloc::raw_delete(p);
            p = nullptr;
        }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string pass_json(const Pass& p, std::size_t peak_live) {
    const double ns = p.allocations ? p.seconds * 1e9 / static_cast<double>(p.allocations) : 0.0;
    const auto calls = std::min<std::uint64_t>(static_cast<std::uint64_t>(p.device_allocs) + p.failed, p.allocations);
    const double no_call = p.allocations ? 1.0 - static_cast<double>(calls) / static_cast<double>(p.allocations) : 1.0;
    std::ostringstream os;
    os.precision(9);
    os << "{\"seconds\": " << p.seconds << ", \"ns_per_pair\": " << ns << ", \"allocations\": " << p.allocations
       << ", \"failed\": " << p.failed << ", \"driver_calls\": " << p.device_allocs
       << ", \"segment_allocations\": " << p.segments_made << ", \"alloc_retries\": " << p.alloc_retries
       << ", \"no_driver_call_rate\": " << no_call << ", \"peak_bytes_held\": " << p.peak_reserved
       << ", \"peak_held_over_peak_live\": "
       << (peak_live ? static_cast<double>(p.peak_reserved) / static_cast<double>(peak_live) : 0.0) << "}";
    return os.str();
}

int usage(const char* why) {
    std::cerr << "replay_timed_torch: " << why
              << "\nusage: replay_timed_torch TRACE [--runs N] [--json PATH] [--name TEXT]\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string trace_path, json_path, name;
    unsigned runs = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--runs" && has_value) {
            const long v = std::strtol(argv[++i], nullptr, 10);
            if (v < 1 || v > 1000) return usage("--runs takes 1 to 1000");
            runs = static_cast<unsigned>(v);
        } else if (a == "--json" && has_value) {
            json_path = argv[++i];
        } else if (a == "--name" && has_value) {
            name = argv[++i];
        } else if (trace_path.empty() && (a == "-" || a[0] != '-')) {
            trace_path = a;
        } else {
            return usage(("unknown or incomplete argument '" + a + "'").c_str());
        }
    }
    if (trace_path.empty()) return usage("a trace is required");
    const char* conf_env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    const std::string conf = conf_env ? conf_env : "";
    if (name.empty()) name = conf.empty() ? "PyTorch" : "PyTorch " + conf;

    std::string text;
    if (trace_path == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
        std::ifstream in(trace_path, std::ios::binary);
        if (!in) return usage(("cannot read trace '" + trace_path + "'").c_str());
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    clpool::replay::TimedOps t;
    std::size_t events = 0;
    try {
        const auto trace = clpool::replay::parse_trace(text);
        events = trace.events.size();
        t = clpool::replay::compile_timed(trace);
    } catch (const clpool::replay::trace_error& e) {
        std::cerr << "replay_timed_torch: trace '" << trace_path << "' " << e.what() << '\n';
        return 2;
    }

    try {
        // Outside Python nothing has set the allocator up yet: size it for every device.
        alloc::init(c10::cuda::device_count());
        c10::cuda::set_device(0);
        alloc::raw_delete(alloc::raw_alloc(256));  // CUDA's own start-up is no pass's
    } catch (const std::exception& e) {
        std::cerr << "replay_timed_torch: cannot start CUDA through Torch: " << e.what() << '\n';
        return 1;
    }

    std::vector<double> first_s, second_s;
    Pass first, second;
    std::vector<void*> slots(t.slots, nullptr);
    for (unsigned r = 0; r < runs; ++r) {
        c10::cuda::device_synchronize();
        alloc::emptyCache();
        alloc::resetPeakStats(0);
        alloc::resetAccumulatedStats(0);
        const auto s0 = alloc::getDeviceStats(0);
        std::uint64_t failed1 = 0, failed2 = 0;
        const double t1 = pass_seconds(t, slots, failed1);
        const auto s1 = alloc::getDeviceStats(0);
        const double t2 = pass_seconds(t, slots, failed2);
        const auto s2 = alloc::getDeviceStats(0);
        first = counts(s0, s1, t1, t.allocations, failed1);
        second = counts(s1, s2, t2, t.allocations, failed2);
        first_s.push_back(t1);
        second_s.push_back(t2);
    }
    first.seconds = median(first_s);
    second.seconds = median(second_s);
    alloc::emptyCache();

    const double live = static_cast<double>(std::max<std::size_t>(t.peak_live, 1));
    std::printf("trace: %s: %zu events, %llu allocations, live peak %.1f MiB\n", trace_path.c_str(), events,
                static_cast<unsigned long long>(t.allocations), static_cast<double>(t.peak_live) / 1048576.0);
#ifdef TORCH_VERSION
    const char* version = TORCH_VERSION;
#else
    const char* version = "unknown";
#endif
    std::printf("PyTorch %s, PYTORCH_CUDA_ALLOC_CONF='%s', %u run(s), medians\n", version, conf.c_str(), runs);
    std::printf("%-40s %10s %10s %10s %10s %12s %14s\n", "allocator", "1st ns/pr", "2nd ns/pr", "1st ms", "2nd ms",
                "held / live", "device allocs");
    std::printf("%-40s %10.1f %10.1f %10.2f %10.2f %11.2fx %6lld / %lld\n", name.c_str(),
                first.seconds * 1e9 / static_cast<double>(std::max<std::uint64_t>(t.allocations, 1)),
                second.seconds * 1e9 / static_cast<double>(std::max<std::uint64_t>(t.allocations, 1)),
                first.seconds * 1e3, second.seconds * 1e3, static_cast<double>(first.peak_reserved) / live,
                static_cast<long long>(first.device_allocs), static_cast<long long>(second.device_allocs));
    if (first.failed || second.failed)
        std::printf("%llu / %llu allocations failed (out of memory) in the 1st / 2nd pass\n",
                    static_cast<unsigned long long>(first.failed), static_cast<unsigned long long>(second.failed));

    if (!json_path.empty()) {
        std::ostringstream j;
        j << "{\n  \"trace\": {\"path\": " << quoted(trace_path) << ", \"events\": " << events
          << ", \"allocations\": " << t.allocations
          << "},\n  \"backend\": " << quoted(std::string("PyTorch ") + version)
          << ",\n  \"alloc_conf\": " << quoted(conf) << ",\n  \"peak_live_bytes\": " << t.peak_live
          << ",\n  \"timed\": [{\"name\": " << quoted(name) << ", \"pool_type\": \"c10::cuda::CUDACachingAllocator\""
          << ", \"runs\": " << runs << ",\n    \"first_pass\": " << pass_json(first, t.peak_live)
          << ",\n    \"second_pass\": " << pass_json(second, t.peak_live) << "}]\n}\n";
        std::FILE* f = std::fopen(json_path.c_str(), "w");
        bool ok = f && std::fputs(j.str().c_str(), f) >= 0;
        if (f) ok = std::fclose(f) == 0 && ok;
        if (!ok) {
            std::cerr << "replay_timed_torch: cannot write '" << json_path << "': " << std::strerror(errno) << '\n';
            return 1;
        }
    }
    return 0;
}
