// clpool-replay: replays an allocation trace through pool configurations and reports what each would do.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/devices.hpp"
#include "common/svg_plot.hpp"
#include "common/table.hpp"
#include "common/progress.hpp"
#include "common/units.hpp"
#include "replay/replay.hpp"
#include "replay/trace.hpp"

namespace {

using namespace clpool;
using namespace clpool::tools;
using clpool::replay::Result;

std::string read_all(const std::string& path) {
    if (path == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw input_error("cannot read trace '" + path + "': " + std::strerror(errno) +
                          "; record one with CLPOOL_TRACE=path (docs/TRACE_FORMAT.md)");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string percent(double v) { return fixed(100.0 * v, 1) + "%"; }

nlohmann::json to_json(const Result& r) {
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
            {"bytes_held_at_end", r.held_at_end},
            {"peak_bytes_wasted_by_rounding", r.peak_waste},
            {"evictions", r.stats.evictions},
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

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "Replays an allocation trace (docs/TRACE_FORMAT.md) through BufferPool, PinnedBufferPool,\n"
        "PersistentBufferPool and custom configurations, and reports for each: hit rate, driver\n"
        "allocations avoided, peak bytes held, rounding waste, evictions and a per-bucket table.\n"
        "Exit codes: 0 ok, 1 the replay failed (driver error), 2 bad arguments or a malformed trace.",
        "clpool-replay"};
    std::string trace_path, device = "host", json_path, svg_path, x_axis = "index";
    std::vector<std::string> config_specs;
    bool no_aliases = false, no_buckets = false;
    app.add_option("trace", trace_path, "the trace file ('-' reads standard input)")->required();
    app.add_option("-c,--config", config_specs,
                   "a custom configuration, repeatable: comma-separated key=value from\n"
                   "name=TEXT, buckets=pow2|fixed|quarter, cap=SIZE|none (idle bytes kept),\n"
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

    return run_tool(app, argc, argv, [&]() -> int {
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

        std::vector<Result> results{replay::run_unpooled(trace)};
        ProgressBar progress(configs.size());
        for (std::size_t i = 0; i < configs.size(); ++i) {
            progress.update(i, configs[i].name);
            results.push_back(replay::run(trace, configs[i], target));
        }
        progress.finish();

        // With JSON on standard output, the report moves to standard error so the JSON stays parseable.
        std::ostream& os = json_path == "-" ? std::cerr : std::cout;
        os << "trace:   " << trace_path << ": " << trace.events.size() << " events (" << allocs << " allocs, "
           << trace.events.size() - allocs << " frees) over " << keys.size() << " (context, flags) pools; "
           << trace.live_at_end << " buffers (" << format_bytes(static_cast<double>(trace.live_bytes_at_end))
           << ") never freed\n"
           << "backend: " << backend_text << "\n\n";
        Table summary({"configuration", "hit rate", "driver allocs", "avoided", "peak held", "peak waste", "evictions",
                       "failed", "replay ms"});
        for (const auto& r : results)
            summary.add({r.name, percent(r.hit_rate()), std::to_string(r.driver_allocations),
                         std::to_string(r.avoided()), format_bytes(static_cast<double>(r.peak_held)),
                         format_bytes(static_cast<double>(r.peak_waste)), std::to_string(r.stats.evictions),
                         std::to_string(r.failed), fixed(r.seconds * 1e3, 2)});
        summary.print(os, "");
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
            for (const auto& r : results) j["configurations"].push_back(to_json(r));
            OutputFile out(json_path);
            out.stream() << j.dump(2) << '\n';
            out.close();
        }
        if (!svg_path.empty()) write_svg(svg_path, trace, results, x_axis == "time", "Bytes held over " + trace_path);
        const bool any_failed = std::any_of(results.begin(), results.end(), [](const Result& r) { return r.failed; });
        if (any_failed)
            std::cerr << "clpool-replay: some allocations failed (column 'failed'); the device ran out of memory or "
                         "the size is above its limit. Try --device host or sim.\n";
        return exit_ok;
    });
}
