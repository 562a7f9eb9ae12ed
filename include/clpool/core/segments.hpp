// Segments: a sub-allocating backend's driver allocations and their blocks, as a snapshot lists them; and the states of a buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace clpool {

enum class BufferState : std::uint8_t {
    in_use,  // handed out and not yet released
    cached,  // idle, ready to hand out (a thread's magazine counts too)
    pending,  // released, waiting for its events
};

constexpr const char* to_string(BufferState s) noexcept {
    switch (s) {
        case BufferState::in_use: return "in_use";
        case BufferState::cached: return "cached";
        case BufferState::pending: return "pending";
    }
    return "unknown";
}

// One range of a segment (a sub-allocating pool, SubAllocated): a buffer's
// block or free space. Blocks are rounded to the arena's granularity, so a
// buffer's block may be larger than its bytes_held.
struct SegmentBlock {
    std::size_t offset = 0;
    std::size_t bytes = 0;
    bool free = false;  // free space of the segment; state and buffer_id mean nothing then
    BufferState state = BufferState::in_use;  // its buffer's state
    std::uintptr_t buffer_id = 0;  // its buffer's BufferInfo::id; 0 for a block no buffer of the pool lists
        // (being made or freed right now, or kept by a handle that outlived its pool)
};

// One segment: a driver allocation that blocks are carved from.
struct SegmentInfo {
    std::uintptr_t id = 0;  // stable while the segment lives
    std::size_t bytes = 0;
    std::size_t free_bytes = 0;
    std::size_t largest_free = 0;
    std::vector<SegmentBlock> blocks;  // in address order; their bytes add up to `bytes`
};

}  // namespace clpool
