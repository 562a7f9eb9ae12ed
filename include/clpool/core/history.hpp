// History: the opt-in record of a pool's allocate, release, evict, trim and out-of-memory events, as a snapshot carries it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace clpool {

// Whether a pool's history also records where each event was called from
// (Pool::record_history; CLPOOL_HISTORY_STACKS).
enum class CallSites : std::uint8_t { off, on };

enum class HistoryAction : std::uint8_t {
    alloc,  // a hand-out: hit (from the cache) or miss (a new buffer from the driver)
    free,  // a release that cached the buffer
    pending,  // a release with events still running: cached once they complete
    evict,  // a buffer given back to the driver (a cap refused it, or trim)
    trim,  // one trim() call; bytes_held is what it gave back
    oom,  // an out-of-memory after the retry; bytes_requested is what was asked
};

constexpr const char* to_string(HistoryAction a) noexcept {
    switch (a) {
        case HistoryAction::alloc: return "alloc";
        case HistoryAction::free: return "free";
        case HistoryAction::pending: return "pending";
        case HistoryAction::evict: return "evict";
        case HistoryAction::trim: return "trim";
        case HistoryAction::oom: return "oom";
    }
    return "unknown";
}

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
