// History: the opt-in record of a pool's allocate, release, evict, trim and out-of-memory events, as a snapshot carries it.
#pragma once

#include <clpool/core/diagnostics_hook.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace clpool {

struct HistoryEvent {
    std::uint64_t t_ns = 0;  // steady clock, as PoolSnapshot::taken_ns and BufferInfo::made_ns
    HistoryAction action = HistoryAction::alloc;
    bool hit = false;  // alloc only: served from the cache
    std::uintptr_t id = 0;  // the buffer (as BufferInfo::id); 0 for trim and oom
    std::size_t bytes_requested = 0;
    std::size_t bytes_held = 0;  // the buffer's size; trim: the bytes it gave back
    std::size_t bucket_size = 0;  // 0 for the exact-size bucket, trim and oom
    std::string tag;  // the holder's tag at a release; empty: none
    std::vector<std::string> frames;  // call site, innermost first, when recorded
};

// A pool's recent events, oldest first: the newest `capacity` of `recorded`.
struct History {
    std::size_t capacity = 0;
    std::uint64_t recorded = 0;  // events ever recorded since history was turned on
    std::uint64_t dropped = 0;  // recorded - events.size(): overwritten by newer ones
    std::vector<HistoryEvent> events;
};

}  // namespace clpool
