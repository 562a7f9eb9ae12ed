// clpool-replay: replays an allocation trace through pool configurations and reports what each would do.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/devices.hpp"
#include "common/svg_plot.hpp"
#include "common/table.hpp"
#include "common/progress.hpp"
#include "common/units.hpp"
#include "replay/replay.hpp"
#include "replay/search.hpp"
#include "replay/timed.hpp"
#include "replay/trace.hpp"

namespace {

using namespace clpool;
using namespace clpool::tools;
using clpool::replay::Result;

std::string read_all(const std::string& path) {
    if (path == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
    const auto cannot = [&](int err) {
        return input_error("cannot read trace '" + path + "': " + std::strerror(err) +
                           "; record one with CLPOOL_TRACE=path (docs/TRACE_FORMAT.md)");
    };
    // stdio, not an ifstream: an ifstream opens a directory and then reads nothing, which
    // would pass for an empty trace; fread reports the error (EISDIR, EIO).
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw cannot(errno);
    std::string text;
    char buf[1 << 16];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    const int err = errno;
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw cannot(err);
    return text;
}

std::string percent(double v) { return fixed(100.0 * v, 1) + "%"; }

// The --warmup value: a count of allocations, or a percentage of them ("10%").
std::size_t warmup_allocations(const std::string& text, std::size_t allocs) {
    if (text.empty()) return 0;
    std::uint64_t v = 0;
    const bool percent = text.back() == '%';
    const std::string digits = percent ? text.substr(0, text.size() - 1) : text;
    if (!replay::detail::parse_dec(digits, v) || (percent && v > 100))
        throw input_error("--warmup='" + text +
                          "'; expected a count of allocations (e.g. 500) or a percentage (e.g. 10%)");
    if (percent) return static_cast<std::size_t>((static_cast<double>(allocs) * static_cast<double>(v)) / 100.0);
    return static_cast<std::size_t>(v);
}

std::string capacity_text(const replay::CapacityResult& c) {
    return c.capacity ? format_bytes(static_cast<double>(*c.capacity)) : "none";
}

nlohmann::json to_json(const Result& r, std::size_t peak_live, const replay::CapacityResult* search) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const auto& b : r.stats.buckets)
        buckets.push_back({{"bucket_size", b.bucket_size},
                           {"hits", b.hits},
                           {"misses", b.misses},
                           {"evictions", b.evictions},
                           {"cached_at_end", b.cached_buffers}});
    return {{"name", r.name},
            {"spec", r.spec},
            {"allocations", r.allocations},
            {"hits", r.stats.hits},
            {"misses", r.stats.misses},
            {"hit_rate", r.hit_rate()},
            {"driver_allocations", r.driver_allocations},
            {"driver_allocations_avoided", r.avoided()},
            {"passthrough", r.passthrough},
            {"failed", r.failed},
            {"peak_bytes_held", r.peak_held},
            {"peak_held_over_peak_live", r.held_over_live(peak_live)},
            {"hit_rate_after_warmup", r.warm_hit_rate()},
            {"min_capacity_bytes", search && search->capacity ? nlohmann::json(*search->capacity) : nlohmann::json()},
            {"bytes_held_at_end", r.held_at_end},
            {"peak_bytes_wasted_by_rounding", r.peak_waste},
            {"evictions", r.stats.evictions},
            {"segments_at_end", r.stats.segments},
            {"segment_bytes_at_end", r.stats.segment_bytes},
            {"segment_allocations", r.stats.segment_allocations},
            {"sub_buffer_fallbacks", r.stats.sub_buffer_fallbacks},
            {"sub_buffers_made", r.stats.sub_buffers_made},
            {"sub_buffers_reused", r.stats.sub_buffers_reused},
            {"views_made", r.views},
            {"fragmentation_at_end", r.stats.fragmentation()},
            {"seconds", r.seconds},
            {"buckets", buckets}};
}

void write_svg(const std::string& path, const replay::Trace& trace, const std::vector<Result>& results, bool by_time,
               const std::string& title) {
    LinePlot plot;
    plot.title = title;
    plot.x_label = by_time ? "time since start (ms)" : "trace event";
    plot.y_label = "bytes held from the driver";
    plot.y_format = [](double v) { return format_bytes(v); };
    plot.binary_y = true;
    const std::size_t n = trace.events.size();
    constexpr std::size_t max_points = 2000;
    const std::size_t bin = n > max_points ? (n + max_points - 1) / max_points : 1;
    for (const auto& r : results) {
        auto& s = plot.add(r.name);
        // Each point is the largest value of its bin, so peaks survive thinning.
        for (std::size_t i = 0; i < n; i += bin) {
            std::size_t peak = 0;
            const std::size_t end = std::min(n, i + bin);
            for (std::size_t j = i; j < end; ++j) peak = std::max(peak, r.held[j]);
            const double x = by_time ? static_cast<double>(trace.events[end - 1].t_ns) / 1e6 : static_cast<double>(end);
            s.points.emplace_back(x, static_cast<double>(peak));
        }
    }
    OutputFile out(path);
    plot.write(out.stream());
    out.close();
}

std::string fast_and_frugal(const replay::Target& target, const std::vector<Result>& results);

// --suggest: every candidate's capacity search, pruned by the best so far, and
// the winner as code.
void print_suggestion(std::ostream& os, const replay::Trace& trace, std::size_t peak_live, std::size_t resolution,
                      const replay::Requirement& req, const std::string& pick) {
    const auto candidates = replay::suggest_candidates(peak_live);
    struct Found {
        const replay::Config* config;
        replay::CapacityResult search;
    };
    std::vector<Found> found;
    std::size_t best = std::numeric_limits<std::size_t>::max();
    unsigned replays = 0;
    ProgressBar progress(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        progress.update(i, candidates[i].name);
        // A later candidate must beat the best by more than the search's resolution: within
        // it they tie, and the earlier (simpler) one stays.
        const std::size_t below = best == std::numeric_limits<std::size_t>::max() ? best
                                  : best > resolution                             ? best - resolution
                                                                                  : 0;
        auto s = replay::min_capacity(trace, candidates[i], req, peak_live, resolution, below);
        replays += s.replays;
        if (!s.capacity) continue;
        best = std::min(best, *s.capacity);
        found.push_back({&candidates[i], std::move(s)});
    }
    progress.finish();
    os << "\nsuggest: " << candidates.size() << " configurations (" << replays
       << " replays), each needing no failed allocation and " << percent(req.min_hit_rate)
       << " of the allocations after the first " << req.warmup << " served with no driver call:\n";
    if (found.empty()) {
        os << "  none meets it; lower --min-hit-rate or raise --warmup.\n" << pick << '\n';
        return;
    }
    // Ties on capacity go to the higher hit rate, then to the earlier (simpler) candidate.
    std::stable_sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
        if (*a.search.capacity != *b.search.capacity) return *a.search.capacity < *b.search.capacity;
        return a.search.at.warm_hit_rate() > b.search.at.warm_hit_rate();
    });
    Table t({"configuration", "min capacity", "capacity / live", "after warm-up", "hit rate"});
    for (std::size_t i = 0; i < found.size() && i < 8; ++i) {
        const auto& f = found[i];
        t.add({f.config->spec, capacity_text(f.search),
               fixed(static_cast<double>(*f.search.capacity) / static_cast<double>(std::max<std::size_t>(peak_live, 1)),
                     2) +
                   "x",
               percent(f.search.at.warm_hit_rate()), percent(f.search.at.hit_rate())});
    }
    t.print(os);
    os << "(the candidates above are those that beat every one tried before them; the search skips the rest)\n\n"
       << "suggested: -c " << found.front().config->spec << "\n"
       << replay::using_line(*found.front().config) << '\n'
       << pick << '\n';
}

// The fast-and-frugal pick, for the report and --suggest: the buffer arena with offset handles
// carves blocks with no driver call per block at an arena's held / live, on any OpenCL device; the
// SVM arena does the same with SVM pointers, but each of its segments is a clSVMAlloc (0.8 ms at
// 4 KiB to 34 ms at 64 MiB on an H200), so a cold pass costs far more (BENCHMARKS.md).
std::string fast_and_frugal(const replay::Target& target, const std::vector<Result>& results) {
    std::string measured;
    for (const auto& r : results)
        if (r.name == "OffsetArenaPool")
            measured = " (this trace, as replayed above: held / live " +
                       fixed(r.held_over_live(results.front().peak_held), 2) + "x, " + percent(r.hit_rate()) +
                       " of allocations with no driver call)";
    const std::string offsets =
        "clpool::OffsetArenaPool: blocks carved from a few segments, each its segment's cl_mem and an "
        "offset, no driver call per block, an arena's held / live" +
        measured;
    const std::string svm =
        "clpool::SVMArenaPool where kernels take SVM pointers: the same carving by pointer arithmetic, "
        "as fast once warm, but each segment is a clSVMAlloc (a cold pass pays milliseconds a segment)";
#ifdef CLPOOL_HAS_OPENCL
    if (target.what == replay::Target::type::opencl) {
        try {
            opencl::check_svm_support(target.context(), CL_MEM_READ_WRITE);
            return "fast and frugal on this device: " + offsets + "; or, with its coarse-grained SVM, " + svm + ".";
        } catch (const config_error&) {
            return "fast and frugal on this device (no coarse-grained SVM): " + offsets + ".";
        }
    }
#endif
    return "fast and frugal: " + offsets +
           "; where the device has coarse-grained SVM (OpenCL 2.0+; clpool-info says), " + svm + ".";
}

nlohmann::json to_json(const replay::TimedPass& p, std::size_t peak_live) {
    return {{"seconds", p.seconds},
            {"ns_per_pair", p.ns_per_pair()},
            {"allocations", p.allocations},
            {"failed", p.failed},
            {"misses", p.misses},
            {"segment_allocations", p.segment_allocations},
            {"sub_buffers_made", p.sub_buffers_made},
            {"driver_calls", p.driver_calls},
            {"no_driver_call_rate", p.no_driver_call_rate()},
            {"peak_bytes_held", p.peak_held},
            {"peak_held_over_peak_live",
             peak_live ? static_cast<double>(p.peak_held) / static_cast<double>(peak_live) : 0.0}};
}

// --timed: the table, and the JSON's "timed" array.
void print_timed(std::ostream& os, const std::vector<replay::TimedResult>& results, std::size_t peak_live,
                 unsigned runs) {
    Table t({"configuration", "1st pass ns/pair", "2nd pass ns/pair", "1st pass ms", "2nd pass ms", "peak held",
             "held / live", "2nd pass no driver call", "driver calls 1st / 2nd", "segments", "sub-buffers"});
    for (const auto& r : results) {
        if (!r.skipped.empty()) continue;
        t.add({r.name, fixed(r.first.ns_per_pair(), 1), fixed(r.second.ns_per_pair(), 1),
               fixed(r.first.seconds * 1e3, 2), fixed(r.second.seconds * 1e3, 2),
               format_bytes(static_cast<double>(r.first.peak_held)),
               fixed(r.held_over_live(r.first, peak_live), 2) + "x", percent(r.second.no_driver_call_rate()),
               std::to_string(r.first.driver_calls) + " / " + std::to_string(r.second.driver_calls),
               std::to_string(r.first.segment_allocations + r.second.segment_allocations),
               std::to_string(r.first.sub_buffers_made + r.second.sub_buffers_made)});
    }
    t.print(os, "");
    os << "\nns/pair: wall time of a pass over the whole trace (every buffer it never frees released at the end) per "
          "allocation;\n1st pass: a fresh pool (from cold, the driver warmed), 2nd pass: the same trace again over "
          "the warm pool";
    if (runs > 1) {
        os << "; medians of " << runs << " fresh pools";
        std::string fewer;
        for (const auto& r : results)
            if (r.skipped.empty() && r.runs < runs)
                fewer += (fewer.empty() ? "" : ", ") + r.name + " " + std::to_string(r.runs);
        if (!fewer.empty()) os << " (stopped by --max-seconds: " << fewer << ")";
    }
    os << ".\nheld / live: the pool's peak bytes held over the first pass, over the trace's live peak ("
       << format_bytes(static_cast<double>(peak_live))
       << ").\nno driver call: the second pass's allocations that made none, at least (1 - driver calls / "
          "allocations);\na driver call: a bucketed pool's miss, an arena's segment allocated or sub-buffer made.\n"
          "One pool per configuration serves the whole trace: its contexts and flags are not kept apart.\n";
    for (const auto& r : results) {
        if (!r.skipped.empty()) os << r.name << ": skipped: " << r.skipped << '\n';
        else if (r.first.failed || r.second.failed)
            os << r.name << ": " << r.first.failed << " / " << r.second.failed
               << " allocations failed (out of memory or above the device's limit) in the 1st / 2nd pass\n";
    }
}

nlohmann::json timed_json(const std::vector<replay::TimedResult>& results, std::size_t peak_live) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
        nlohmann::json j{{"name", r.name}, {"pool_type", r.pool_type}, {"runs", r.runs}};
        if (!r.skipped.empty()) {
            j["skipped"] = r.skipped;
        } else {
            j["first_pass"] = to_json(r.first, peak_live);
            j["second_pass"] = to_json(r.second, peak_live);
            j["segments_at_end"] = r.stats.segments;
            j["sub_buffers_reused"] = r.stats.sub_buffers_reused;
            j["evictions"] = r.stats.evictions;
            j["oom_retries"] = r.stats.oom_retries;
        }
        out.push_back(std::move(j));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "Replays an allocation trace (docs/TRACE_FORMAT.md) through BufferPool, PinnedBufferPool,\n"
        "PersistentBufferPool, ArenaPool and custom configurations, and reports for each: hit rate, driver\n"
        "allocations avoided, peak bytes held, rounding waste, evictions and a per-bucket table.\n"
        "With --timed, on an OpenCL device: the time per alloc + free pair of the named pools, cold and warm.\n"
        "Exit codes: 0 ok, 1 the replay failed (driver error), 2 bad arguments or a malformed trace.",
        "clpool-replay"};
    std::string trace_path, device = "host", json_path, svg_path, x_axis = "index";
    std::vector<std::string> config_specs;
    bool no_aliases = false, no_buckets = false, no_search = false, suggest = false, timed = false;
    unsigned timed_runs = 1;
    double timed_max_seconds = 0;
    std::string timed_pools;
    std::string warmup_text, resolution_text;
    double min_hit_percent = 99.0;
    app.add_option("trace", trace_path, "the trace file ('-' reads standard input)")->required();
    app.add_option("-c,--config", config_specs,
                   "a custom configuration, repeatable: comma-separated key=value from\n"
                   "name=TEXT, buckets=pow2|fixed|half|quarter|eighth|sixteenth (classes per doubling:\n"
                   "1 for pow2, 2 .. 16 for the others) or arena (blocks carved from segments, with\n"
                   "segment=SIZE, large-segment=SIZE, small=SIZE, granularity=SIZE, max-free=F),\n"
                   "cap=SIZE|none (idle bytes kept),\n"
                   "per-bucket=N|none (idle buffers per bucket), kind=device|pinned|integrated;\n"
                   "e.g. 'name=small,buckets=pow2,cap=256MiB,per-bucket=8'")
        ->take_all();
    app.add_flag("--no-aliases", no_aliases, "replay only the --config configurations");
    app.add_option("-d,--device", device,
                   "where pools get memory: host (default; aligned host memory), sim (accounting only,\n"
                   "no memory: for traces larger than this machine), or an OpenCL device:\n"
                   "auto, gpu, cpu, N, P:D (as clpool-info lists them), TEXT (docs/DEVICES.md)")
        ->capture_default_str();
    app.add_option("--json", json_path,
                   "also write the results as JSON to PATH ('-': standard output,\n"
                   "the text report then goes to standard error)");
    app.add_option("--svg", svg_path, "write a plot of bytes held over the trace, one line per configuration");
    app.add_option("--x", x_axis, "the plot's x axis: index (trace event) or time (t_ns)")
        ->check(CLI::IsMember({"index", "time"}))
        ->capture_default_str();
    app.add_flag("--no-buckets", no_buckets, "leave out the per-bucket tables");
    app.add_flag("--no-search", no_search,
                 "skip the 'min capacity' column (a search over simulated device sizes,\n"
                 "one replay per size where the replay changes, from the live peak up)");
    app.add_option("--resolution", resolution_text,
                   "how close the capacity search gets (a byte size, e.g. 1MiB, or 1 for exact);\n"
                   "default 0.1% of the live peak, 4 KiB at least");
    app.add_option("--warmup", warmup_text,
                   "leave the first N allocations (or N% of them) out of 'hit rate after warm-up',\n"
                   "e.g. a training loop's first iteration");
    app.add_flag("--suggest", suggest,
                 "search bucket schemes and caps for the configuration that needs the least device\n"
                 "capacity while serving --min-hit-rate of the allocations after --warmup with no\n"
                 "driver call; print it as a 'using' line");
    app.add_flag("--timed", timed,
                 "on an OpenCL device (-d gpu, -d 0:0): replay the trace through BufferPool, ArenaPool,\n"
                 "OffsetArenaPool, SVMArenaPool and SVMPool, each from a fresh pool and then again over\n"
                 "the warm pool, and report the time per alloc + free pair of both passes, peak held /\n"
                 "live and the second pass's allocations with no driver call (one pool per\n"
                 "configuration; the trace's contexts and flags are not kept apart)");
    app.add_option("--runs", timed_runs, "--timed: fresh pools per configuration; the times are their medians")
        ->check(CLI::Range(1u, 1000u))
        ->capture_default_str();
    app.add_option("--max-seconds", timed_max_seconds,
                   "--timed: start no further --runs of a pool once this many seconds have passed on it\n"
                   "(one run at least; 0: no limit)")
        ->check(decimal_number())
        ->check(CLI::Range(0.0, 1e6))
        ->capture_default_str();
    app.add_option("--pools", timed_pools,
                   "--timed: a comma-separated subset of BufferPool,ArenaPool,OffsetArenaPool,SVMArenaPool,SVMPool");
    app.add_option("--min-hit-rate", min_hit_percent, "--suggest's requirement, in percent")
        ->check(decimal_number())
        ->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();

    // --timed: the named pools on the device, timed; nothing else is replayed.
    const auto run_timed_mode = [&](const replay::Trace& trace, std::size_t allocs, std::size_t pools) -> int {
        std::vector<std::string> only;
        for (std::size_t at = 0; at < timed_pools.size();) {
            const std::size_t comma = std::min(timed_pools.find(',', at), timed_pools.size());
            const std::string name = timed_pools.substr(at, comma - at);
            const auto names = replay::timed_pool_names();
            if (std::find(names.begin(), names.end(), name) == names.end())
                throw input_error("--pools: '" + name +
                                  "' is not a timed pool; expected BufferPool, ArenaPool, OffsetArenaPool, "
                                  "SVMArenaPool or SVMPool");
            only.push_back(name);
            at = comma + 1;
        }
#ifdef CLPOOL_HAS_OPENCL
        const auto refuse = [&](const std::string& what) {
            return input_error(
                "--timed needs an OpenCL device (--device gpu, --device 0:0; clpool-info --list "
                "shows them), not " +
                what);
        };
        if (device == "sim") throw refuse("--device sim");
        const DeviceChoice choice = choose_device({device, "--device"}, list_device_facts());
        if (choice.host) throw refuse("the host backend (" + choice.why + ")");
        const DeviceSession session(choice.facts.id);
        const std::string backend_text =
            "OpenCL " + choice.facts.name + " (" + choice.facts.platform + "; " + choice.why + ")";
        const std::vector<replay::TimedResult> results =
            replay::run_timed(trace, session.context, choice.facts.id, timed_runs, only, timed_max_seconds);
        const std::size_t peak_live = replay::run_unpooled(trace).peak_held;
        std::ostream& os = json_path == "-" ? std::cerr : std::cout;
        os << "trace:   " << trace_path << ": " << trace.events.size() << " events (" << allocs << " allocs, "
           << trace.events.size() - allocs << " frees) over " << pools << " (context, flags) pools\n"
           << "backend: " << backend_text << "\n\n";
        print_timed(os, results, peak_live, timed_runs);
        replay::Target target;
        target.what = replay::Target::type::opencl;
        target.context = session.context;
        target.device = choice.facts.id;
        os << fast_and_frugal(target, {}) << '\n';
        if (!json_path.empty()) {
            nlohmann::json j;
            j["trace"] = {{"path", trace_path},
                          {"events", trace.events.size()},
                          {"allocations", allocs},
                          {"pools", pools},
                          {"live_at_end", trace.live_at_end}};
            j["backend"] = backend_text;
            j["peak_live_bytes"] = peak_live;
            j["timed"] = timed_json(results, peak_live);
            OutputFile out(json_path);
            out.stream() << j.dump(2) << '\n';
            out.close();
        }
        const bool any_failed = std::any_of(results.begin(), results.end(), [](const replay::TimedResult& r) {
            return r.first.failed || r.second.failed;
        });
        if (any_failed)
            std::cerr << "clpool-replay: some allocations failed (the device ran out of memory or a size is above "
                         "its limit); their times are not comparable.\n";
        return exit_ok;
#else
        (void)trace;
        (void)allocs;
        (void)pools;
        (void)only;
        throw input_error("--timed needs an OpenCL device; this clpool-replay was built without OpenCL");
#endif
    };

    const auto body = [&]() -> int {
        std::vector<replay::Config> configs;
        if (!no_aliases) configs = replay::alias_configs();
        try {
            for (std::size_t i = 0; i < config_specs.size(); ++i)
                configs.push_back(replay::parse_config(config_specs[i], i + 1));
        } catch (const replay::config_spec_error& e) {
            throw input_error(std::string(e.what()) + "\nSee 'clpool-replay --help' for the keys.");
        }
        if (configs.empty())
            throw input_error("--no-aliases with no --config leaves nothing to replay; add a --config");
        std::set<std::string> names;
        for (const auto& c : configs)
            if (!names.insert(c.name).second)
                throw input_error("two configurations are named '" + c.name + "'; give each --config its own name=");

        replay::Target target;
        std::string backend_text;
        if (device == "sim") {
            target.what = replay::Target::type::sim;
        } else {
            const DeviceChoice choice = choose_device({device, "--device"}, list_device_facts());
            if (!choice.host) {
#ifdef CLPOOL_HAS_OPENCL
                DeviceSession session(choice.facts.id);
                target.what = replay::Target::type::opencl;
                target.context = session.context;
                target.device = choice.facts.id;
                backend_text = "OpenCL " + choice.facts.name + " (" + choice.facts.platform + "; " + choice.why + ")";
#endif
            }
        }
        if (backend_text.empty()) backend_text = target.description();

        const std::string text = read_all(trace_path);
        replay::Trace trace;
        try {
            trace = replay::parse_trace(text);
        } catch (const replay::trace_error& e) {
            throw input_error("trace '" + trace_path + "' " + e.what() +
                              "\nFix or remove that line; docs/TRACE_FORMAT.md describes the format.");
        }
        std::size_t allocs = 0;
        std::set<std::pair<std::uint64_t, std::uint64_t>> keys;
        for (const auto& e : trace.events)
            if (e.kind == replay::op::alloc) {
                ++allocs;
                keys.insert({e.ctx, e.flags});
            }
        if (timed) return run_timed_mode(trace, allocs, keys.size());

        const std::size_t warmup = warmup_allocations(warmup_text, allocs);
        std::vector<Result> results{replay::run_unpooled(trace)};
        const std::size_t peak_live = results[0].peak_held;
        // Bisection stops within 0.1% of the live peak (4 KiB at least).
        std::size_t resolution = std::max<std::size_t>(4096, peak_live / 1000);
        if (!resolution_text.empty()) {
            const auto r = parse_bytes(resolution_text);
            if (!r || *r == 0 || *r > std::numeric_limits<std::size_t>::max())
                throw input_error("--resolution='" + resolution_text +
                                  "'; expected a byte size of at least 1 (e.g. 1, 64KiB, 1MiB)");
            resolution = static_cast<std::size_t>(*r);
        }
        std::vector<replay::CapacityResult> searches(1);  // none for "no pool"
        ProgressBar progress(configs.size());
        for (std::size_t i = 0; i < configs.size(); ++i) {
            progress.update(i, configs[i].name);
            results.push_back(replay::run(trace, configs[i], target, warmup));
            if (!no_search)
                searches.push_back(
                    replay::min_capacity(trace, configs[i], replay::Requirement{0.0, warmup}, peak_live, resolution));
        }
        progress.finish();

        // With JSON on standard output, the report moves to standard error so the JSON stays parseable.
        std::ostream& os = json_path == "-" ? std::cerr : std::cout;
        os << "trace:   " << trace_path << ": " << trace.events.size() << " events (" << allocs << " allocs, "
           << trace.events.size() - allocs << " frees) over " << keys.size() << " (context, flags) pools; "
           << trace.live_at_end << " buffers (" << format_bytes(static_cast<double>(trace.live_bytes_at_end))
           << ") never freed\n"
           << "backend: " << backend_text << "\n\n";
        std::vector<std::string> columns{"configuration", "hit rate"};
        if (warmup) columns.emplace_back("after warm-up");
        for (const char* c : {"driver allocs", "avoided", "peak held", "held / live"}) columns.emplace_back(c);
        if (!no_search) columns.emplace_back("min capacity");
        for (const char* c : {"peak waste", "evictions", "failed", "replay ms"}) columns.emplace_back(c);
        Table summary(columns);
        for (std::size_t i = 0; i < results.size(); ++i) {
            const auto& r = results[i];
            std::vector<std::string> row{r.name, percent(r.hit_rate())};
            if (warmup) row.push_back(percent(r.warm_hit_rate()));
            row.push_back(std::to_string(r.driver_allocations));
            row.push_back(std::to_string(r.avoided()));
            row.push_back(format_bytes(static_cast<double>(r.peak_held)));
            row.push_back(fixed(r.held_over_live(peak_live), 2) + "x");
            if (!no_search)
                row.push_back(i == 0 ? format_bytes(static_cast<double>(peak_live)) : capacity_text(searches[i]));
            row.push_back(format_bytes(static_cast<double>(r.peak_waste)));
            row.push_back(std::to_string(r.stats.evictions));
            row.push_back(std::to_string(r.failed));
            row.push_back(fixed(r.seconds * 1e3, 2));
            summary.add(row);
        }
        summary.print(os, "");
        os << "\nheld / live: peak bytes held from the driver over the peak of live bytes ("
           << format_bytes(static_cast<double>(peak_live)) << ", the 'no pool' row).\n";
        os << fast_and_frugal(target, results) << '\n';
        if (!no_search)
            os << "min capacity: the smallest simulated device size with which the configuration replays the trace\n"
                  "with no failed allocation (searched in steps of at least "
               << (resolution == 1 ? std::string("the byte") : format_bytes(static_cast<double>(resolution)))
               << "; pools trim and retry on out-of-memory).\n";
        if (warmup)
            os << "after warm-up: allocations after the first " << warmup
               << " served with no driver call (neither a driver allocation nor a sub-buffer made).\n";
        for (const auto& r : results)
            if (r.stats.segment_allocations)
                os << r.name << ": " << r.stats.segment_allocations << " segments allocated, " << r.stats.segments
                   << " (" << format_bytes(static_cast<double>(r.stats.segment_bytes))
                   << ") at the end, largest free block "
                   << format_bytes(static_cast<double>(r.stats.largest_free_block)) << ", fragmentation "
                   << percent(r.stats.fragmentation()) << ", sub-buffers made " << r.stats.sub_buffers_made
                   << ", reused " << r.stats.sub_buffers_reused << ", fallbacks " << r.stats.sub_buffer_fallbacks
                   << ".\n";
        os << "\nconfigurations:\n";
        for (const auto& r : results) os << "  " << r.name << ": " << r.spec << '\n';
        if (!no_buckets) {
            for (std::size_t i = 1; i < results.size(); ++i) {
                const auto& r = results[i];
                os << "\nper bucket, " << r.name << ":\n";
                Table t({"bucket", "hits", "misses", "hit rate", "evictions", "cached at end"});
                for (const auto& b : r.stats.buckets) {
                    const auto total = b.hits + b.misses;
                    t.add({b.bucket_size ? format_bytes(static_cast<double>(b.bucket_size)) : "exact",
                           std::to_string(b.hits), std::to_string(b.misses),
                           percent(total ? static_cast<double>(b.hits) / static_cast<double>(total) : 0.0),
                           std::to_string(b.evictions), std::to_string(b.cached_buffers)});
                }
                t.print(os);
            }
        }
        if (!json_path.empty()) {
            nlohmann::json j;
            j["trace"] = {{"path", trace_path},
                          {"events", trace.events.size()},
                          {"allocations", allocs},
                          {"pools", keys.size()},
                          {"live_at_end", trace.live_at_end}};
            j["backend"] = backend_text;
            j["configurations"] = nlohmann::json::array();
            j["peak_live_bytes"] = peak_live;
            j["warmup_allocations"] = warmup;
            for (std::size_t i = 0; i < results.size(); ++i)
                j["configurations"].push_back(
                    to_json(results[i], peak_live, i < searches.size() && i > 0 ? &searches[i] : nullptr));
            OutputFile out(json_path);
            out.stream() << j.dump(2) << '\n';
            out.close();
        }
        if (suggest)
            print_suggestion(os, trace, peak_live, resolution, replay::Requirement{min_hit_percent / 100.0, warmup},
                             fast_and_frugal(target, results));
        if (!svg_path.empty()) write_svg(svg_path, trace, results, x_axis == "time", "Bytes held over " + trace_path);
        const bool any_failed = std::any_of(results.begin(), results.end(), [](const Result& r) { return r.failed; });
        if (any_failed)
            std::cerr << "clpool-replay: some allocations failed (column 'failed'); the device ran out of memory or "
                         "the size is above its limit. Try --device host or sim.\n";
        return exit_ok;
    };
    return run_tool(app, argc, argv, [&]() -> int {
        try {
            return body();
        } catch (const replay::trace_error& e) {  // from a replay: bytes held past what 64 bits count
            throw input_error("trace '" + trace_path + "' " + e.what() +
                              "\nThe replay counts bytes in 64 bits; shrink or leave out that allocation.");
        } catch (const replay::replay_error& e) {  // a driver call failed: exit 1, naming the event's line
            throw std::runtime_error("trace '" + trace_path + "' " + e.what());
        }
    });
}
