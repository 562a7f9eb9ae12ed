// The replay engine: runs a parsed trace through runtime-chosen pool configurations and measures each.
#pragma once

#include <clpool/clpool.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "counting_backends.hpp"
#include "pool_set.hpp"
#include "trace.hpp"

namespace clpool::replay {

// A driver call that failed while one event replayed (an out-of-memory or an
// oversized request is not one: it counts as a failed allocation). line() is
// the event's 1-based line in the trace, native_code() the driver's code;
// what() reads "line N: <configuration>: <the event>: <the driver's error>".
class replay_error : public std::runtime_error {
public:
    replay_error(std::size_t line, const std::string& message, int native_code)
        : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line), native_code_(native_code) {}
    std::size_t line() const noexcept { return line_; }
    int native_code() const noexcept { return native_code_; }

private:
    std::size_t line_;
    int native_code_;
};

struct Result {
    std::string name;
    std::string spec;
    PoolStats stats;                     // merged over the configuration's pools
    std::uint64_t allocations = 0;       // allocs in the trace
    std::uint64_t driver_allocations = 0;  // pool misses + pass-through buffers
    std::uint64_t passthrough = 0;       // CL_MEM_USE_HOST_PTR, never pooled
    std::uint64_t failed = 0;            // allocations the backend refused
    std::size_t peak_held = 0;           // bytes held from the driver, at most, over the trace
    std::size_t held_at_end = 0;
    std::size_t peak_waste = 0;          // rounding waste (bucket - asked) at most, over the trace
    double seconds = 0;                  // wall time of the replay
    std::vector<std::size_t> held;       // bytes held after each event
    std::uint64_t views = 0;             // views (sub-buffers) made: driver calls that allocate no memory
    // After the warm-up (run's `warmup` first allocations): allocations, and
    // those that called the driver (an allocation or a view made) or failed.
    std::uint64_t warm_allocations = 0;
    std::uint64_t warm_driver_allocations = 0;

    std::uint64_t avoided() const noexcept { return allocations - driver_allocations - failed; }  // = pool hits
    double hit_rate() const noexcept {
        return allocations ? static_cast<double>(avoided()) / static_cast<double>(allocations) : 0.0;
    }
    // The share of allocations after the warm-up served with no driver call
    // (1 if there are none).
    double warm_hit_rate() const noexcept {
        return warm_allocations
                   ? 1.0 - static_cast<double>(warm_driver_allocations) / static_cast<double>(warm_allocations)
                   : 1.0;
    }
    // Peak bytes held over peak bytes live (the unpooled replay's peak).
    double held_over_live(std::size_t peak_live) const noexcept {
        return peak_live ? static_cast<double>(peak_held) / static_cast<double>(peak_live) : 0.0;
    }
};

// What the trace costs with no pool: one driver allocation per alloc, and
// only the live bytes held (the baseline for every configuration).
inline Result run_unpooled(const Trace& trace) {
    Result r;
    r.name = "no pool";
    r.spec = "every alloc is a driver allocation";
    std::size_t held = 0;
    r.held.reserve(trace.events.size());
    for (const auto& e : trace.events) {
        if (e.kind == op::alloc) {
            ++r.allocations;
            held += e.bytes;
        } else {
            held -= e.bytes;
        }
        r.peak_held = std::max(r.peak_held, held);
        r.held.push_back(held);
    }
    r.driver_allocations = r.allocations;
    r.warm_allocations = r.warm_driver_allocations = r.allocations;
    r.held_at_end = held;
    return r;
}

// Replays the trace through one configuration: pools are made fresh, every
// alloc asks its (context, flags) pool, every free releases the handle.
// Buffers still live at the end are released, then the pools destroyed.
// The first `warmup` allocations are left out of warm_allocations and
// warm_driver_allocations. Target::capacity caps the bytes held.
// Throws replay_error, naming the event's line, for a driver call that fails
// (an allocation the driver refuses other than for memory, a backend that
// cannot be made), config_error; trace_error, naming the line, if a
// pass-through buffer would take the bytes held past 2^64-1.
// Cost: one pool operation per event, plus the backend's allocations.
inline Result run(const Trace& trace, const Config& c, const Target& t, std::size_t warmup = 0) {
    Result r;
    r.name = c.name;
    r.spec = c.spec;
    r.held.reserve(trace.events.size());
    auto set = make_pool_set(c, t);
    set->set_capacity(t.capacity);
    const auto start = std::chrono::steady_clock::now();
    for (const auto& e : trace.events) {
        const std::uint64_t driver_before = set->driver().allocations + set->driver().views;
        // Pass-through buffers are never refused (pooled ones are, by Counted's capacity check),
        // so only they can take the 64-bit count of bytes held past its limit.
        if (e.kind == op::alloc && (e.flags & cl_mem_use_host_ptr) &&
            e.bytes > std::numeric_limits<std::size_t>::max() - set->driver().held)
            throw trace_error(e.line, "pass-through (CL_MEM_USE_HOST_PTR) size " + std::to_string(e.bytes) +
                                          " takes the bytes " + c.name + " holds (" +
                                          std::to_string(set->driver().held) + ") past " +
                                          std::to_string(std::numeric_limits<std::size_t>::max()));
        bool ok = false;
        try {
            ok = set->apply(e);
        } catch (const driver_error& err) {
            // The driver's message names the call, not the trace: say which event made it.
            char flags[17];
            const auto end = std::to_chars(flags, flags + sizeof flags, e.flags, 16).ptr;
            const std::string event = std::string(e.kind == op::alloc ? "alloc" : "free") + " of id " +
                                      std::to_string(e.id) + " (" + std::to_string(e.bytes) + " bytes, flags 0x" +
                                      std::string(flags, end) + ")";
            throw replay_error(e.line, c.name + ": " + event + ": " + err.what(), err.native_code());
        }
        if (!ok) ++r.failed;
        if (e.kind == op::alloc && r.allocations++ >= warmup) {
            ++r.warm_allocations;
            if (!ok || set->driver().allocations + set->driver().views != driver_before) ++r.warm_driver_allocations;
        }
        const std::size_t held = set->driver().held;
        r.peak_held = std::max(r.peak_held, held);
        r.peak_waste = std::max(r.peak_waste, set->waste());
        r.held.push_back(held);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.stats = set->stats();
    r.passthrough = set->passthrough();
    r.driver_allocations = set->driver().allocations;
    r.views = set->driver().views;
    r.held_at_end = set->driver().held;
    return r;
}

}  // namespace clpool::replay
