// The timed replay (--timed): a trace replayed through the named OpenCL pools on a real device, each
// from a fresh pool (the first pass) and again over the same warm pool (the second pass), with the
// wall time per alloc + free pair, the peak bytes held and the driver calls of each pass.
#pragma once

#include <clpool/clpool.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "timed_ops.hpp"
#include "trace.hpp"

namespace clpool::replay {

// One pass over the trace.
struct TimedPass {
    double seconds = 0;               // the whole pass, the release of what the trace never frees included
    std::uint64_t allocations = 0;
    std::uint64_t failed = 0;         // allocations refused (out of memory, above the device's limit)
    std::uint64_t misses = 0;         // allocations not served from the cache
    std::uint64_t segment_allocations = 0;  // arenas: driver allocations of segments (and whole-buffer fallbacks)
    std::uint64_t sub_buffers_made = 0;     // arenas: clCreateSubBuffer calls (0 where views are free)
    // Driver calls that allocate: a bucketed pool's misses; an arena's segments and sub-buffers made.
    std::uint64_t driver_calls = 0;
    std::size_t peak_held = 0;  // the pool's peak bytes held from the driver, from its creation to this pass's end
    double ns_per_pair() const noexcept { return allocations ? seconds * 1e9 / static_cast<double>(allocations) : 0.0; }
    // The share of the pass's allocations that made no driver call, at least
    // (1 - driver calls / allocations: an arena's miss may make both a segment
    // and its sub-buffer, counted as two calls).
    double no_driver_call_rate() const noexcept {
        if (!allocations) return 1.0;
        const auto calls = std::min(driver_calls + failed, allocations);
        return 1.0 - static_cast<double>(calls) / static_cast<double>(allocations);
    }
};

struct TimedResult {
    std::string name;  // BufferPool, ArenaPool, OffsetArenaPool, SVMArenaPool, SVMPool
    std::string pool_type;  // the C++ type, e.g. clpool::SVMArenaPool
    std::string skipped;  // why the configuration did not run (e.g. no SVM on the device); empty if it ran
    unsigned runs = 0;  // fresh pools, each with both passes; the times are the medians over them
    TimedPass first, second;  // the last run's counts; seconds: the median over the runs
    PoolStats stats;  // the last run's pool after both passes
    double held_over_live(const TimedPass& p, std::size_t peak_live) const noexcept {
        return peak_live ? static_cast<double>(p.peak_held) / static_cast<double>(peak_live) : 0.0;
    }
};

namespace detail {

template <class B>
struct is_sub_allocated : std::false_type {};
template <class B>
struct is_sub_allocated<SubAllocated<B>> : std::true_type {};
template <class P>
inline constexpr bool carves = is_sub_allocated<typename P::backend_type>::value;

// Bytes held from the driver at most so far: an arena's segments, a bucketed pool's buffers.
inline std::size_t peak_held(const PoolStats& s) noexcept {
    return std::max(s.peak_bytes_allocated, s.peak_segment_bytes);
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Runs the ops once over `pool`, `slots` holding the live handles; returns the seconds.
template <class P>
double timed_pass(P& pool, const TimedOps& t, std::vector<typename P::handle>& slots, std::uint64_t& failed) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& o : t.ops) {
        auto& h = slots[o.slot];
        if (o.bytes) {
            try {
                h = pool.allocate(static_cast<std::size_t>(o.bytes));
            } catch (const out_of_memory&) {
                ++failed;
            } catch (const size_error&) {
                ++failed;
            }
        } else {
            h.release();
        }
    }
    for (auto& h : slots) h.release();  // what the trace never frees: every alloc gets its free
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class P>
TimedPass pass_counts(const PoolStats& before, const PoolStats& after, double seconds, std::uint64_t allocations,
                      std::uint64_t failed) {
    TimedPass p;
    p.seconds = seconds;
    p.allocations = allocations;
    p.failed = failed;
    p.misses = after.misses - before.misses;
    p.segment_allocations = after.segment_allocations - before.segment_allocations;
    p.sub_buffers_made = after.sub_buffers_made - before.sub_buffers_made;
    p.driver_calls = carves<P> ? p.segment_allocations + p.sub_buffers_made : p.misses;
    p.peak_held = peak_held(after);
    return p;
}

}  // namespace detail

// Replays t through `runs` fresh pools made by make(), each twice: the first
// pass from cold, the second over the same pool, warm; after the first run,
// no further one starts once max_seconds (if > 0) have passed. Times are the
// medians over the runs made (TimedResult::runs); counts and stats are the last run's.
// Throws what make() throws (config_error for a device without what the pool
// needs), driver_error for a driver failure other than out of memory.
template <class P, class Make>
TimedResult time_pool(std::string name, std::string pool_type, const TimedOps& t, unsigned runs, double max_seconds,
                      Make make) {
    TimedResult r;
    r.name = std::move(name);
    r.pool_type = std::move(pool_type);
    std::vector<double> first, second;
    const auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < std::max(runs, 1u); ++i) {
        if (i > 0 && max_seconds > 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds)
            break;
        ++r.runs;
        P pool(make());
        std::vector<typename P::handle> slots(t.slots);
        const PoolStats s0 = pool.stats();
        std::uint64_t failed1 = 0, failed2 = 0;
        const double t1 = detail::timed_pass(pool, t, slots, failed1);
        const PoolStats s1 = pool.stats();
        const double t2 = detail::timed_pass(pool, t, slots, failed2);
        const PoolStats s2 = pool.stats();
        first.push_back(t1);
        second.push_back(t2);
        r.first = detail::pass_counts<P>(s0, s1, t1, t.allocations, failed1);
        r.second = detail::pass_counts<P>(s1, s2, t2, t.allocations, failed2);
        r.stats = s2;
    }
    r.first.seconds = detail::median(first);
    r.second.seconds = detail::median(second);
    return r;
}

// The pools --timed replays, in its order.
inline std::vector<std::string> timed_pool_names() {
    return {"BufferPool", "ArenaPool", "OffsetArenaPool", "SVMArenaPool", "SVMPool"};
}

#ifdef CLPOOL_HAS_OPENCL
// The pools timed, in order: the bucketed buffer pool, the arena of
// sub-buffers, the arena of offsets, and the SVM pools. A pool the device
// cannot make (no coarse-grained SVM) is a result with `skipped` set.
// `only` (names from timed_pool_names), when not empty, picks among them.
// max_seconds: time_pool's, per pool.
inline std::vector<TimedResult> run_timed(const Trace& trace, const cl::Context& context, cl_device_id device,
                                          unsigned runs, const std::vector<std::string>& only = {},
                                          double max_seconds = 0) {
    const TimedOps t = compile_timed(trace);
    // The driver's own first-use costs (a context's first buffer, its first SVM allocation) are not any
    // pool's: pay them once here, so "cold" is a fresh pool on a warm driver.
    {
        OpenCLBackend warm(context, device, CL_MEM_READ_WRITE);
        (void)warm.allocate(4096, MemoryKind::device_local);
        try {
            SVMBackend svm(context, device, CL_MEM_READ_WRITE);
            (void)svm.allocate(4096, MemoryKind::device_local);
        } catch (const config_error&) {  // no SVM: its pools are skipped below
        }
    }
    const auto wanted = [&](const std::string& n) {
        return only.empty() || std::find(only.begin(), only.end(), n) != only.end();
    };
    std::vector<TimedResult> out;
    const auto add = [&](const std::string& n, const std::string& type, auto run) {
        if (!wanted(n)) return;
        try {
            out.push_back(run(n, type));
        } catch (const config_error& e) {
            TimedResult r;
            r.name = n;
            r.pool_type = type;
            r.skipped = e.what();
            out.push_back(std::move(r));
        }
    };
    const cl_mem_flags rw = CL_MEM_READ_WRITE;
    add("BufferPool", "clpool::BufferPool", [&](const std::string& n, const std::string& type) {
        return time_pool<BufferPool>(n, type, t, runs, max_seconds, [&] { return OpenCLBackend(context, device, rw); });
    });
    add("ArenaPool", "clpool::ArenaPool", [&](const std::string& n, const std::string& type) {
        return time_pool<ArenaPool>(n, type, t, runs, max_seconds,
                                    [&] { return SubAllocated<OpenCLBackend>(OpenCLBackend(context, device, rw)); });
    });
    add("OffsetArenaPool", "clpool::OffsetArenaPool", [&](const std::string& n, const std::string& type) {
        return time_pool<OffsetArenaPool>(n, type, t, runs, max_seconds, [&] {
            return SubAllocated<OpenCLOffsetBackend>(OpenCLOffsetBackend(context, device, rw));
        });
    });
    add("SVMArenaPool", "clpool::SVMArenaPool", [&](const std::string& n, const std::string& type) {
        return time_pool<SVMArenaPool>(n, type, t, runs, max_seconds,
                                       [&] { return SubAllocated<SVMBackend>(SVMBackend(context, device, rw)); });
    });
    add("SVMPool", "clpool::SVMPool", [&](const std::string& n, const std::string& type) {
        return time_pool<SVMPool>(n, type, t, runs, max_seconds, [&] { return SVMBackend(context, device, rw); });
    });
    return out;
}
#endif

}  // namespace clpool::replay
