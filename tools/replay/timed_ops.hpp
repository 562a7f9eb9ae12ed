// The trace as a timed replay runs it (clpool-replay --timed, benchmarks/replay_timed_torch.cpp):
// std-only, so a program built with another library's compile flags can include it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace.hpp"

namespace clpool::replay {

// The trace as the timed loop runs it: every id mapped beforehand to a dense
// slot (reused once freed), so the loop does no lookup of its own and times
// the pool alone. Contexts and flags are left out: one pool on one device
// serves every allocation, as PyTorch's allocator serves a process's.
struct TimedOps {
    struct Op {
        std::uint64_t bytes = 0;  // 0 for a free
        std::uint32_t slot = 0;
    };
    std::vector<Op> ops;
    std::size_t slots = 0;        // the most allocations live at once
    std::uint64_t allocations = 0;
    std::size_t peak_live = 0;    // the most bytes asked for live at once
};

// Throws trace_error if an id is freed that is not live (parse_trace has already refused such a trace).
inline TimedOps compile_timed(const Trace& trace) {
    TimedOps t;
    t.ops.reserve(trace.events.size());
    std::unordered_map<std::uint64_t, std::uint32_t> slot_of;
    std::vector<std::uint32_t> free_slots;
    std::size_t live = 0;
    for (const auto& e : trace.events) {
        if (e.kind == op::alloc) {
            std::uint32_t s = 0;
            if (free_slots.empty()) {
                s = static_cast<std::uint32_t>(t.slots++);
            } else {
                s = free_slots.back();
                free_slots.pop_back();
            }
            slot_of[e.id] = s;
            // At least 1 byte: parse_trace refuses size 0, so this is the size asked.
            t.ops.push_back({std::max<std::uint64_t>(e.bytes, 1), s});
            ++t.allocations;
            live += static_cast<std::size_t>(e.bytes);
            t.peak_live = std::max(t.peak_live, live);
        } else {
            const auto it = slot_of.find(e.id);
            if (it == slot_of.end())
                throw trace_error(e.line, "free of id " + std::to_string(e.id) + ", which is not live");
            t.ops.push_back({0, it->second});
            free_slots.push_back(it->second);
            slot_of.erase(it);
            live -= static_cast<std::size_t>(e.bytes);
        }
    }
    return t;
}

}  // namespace clpool::replay
