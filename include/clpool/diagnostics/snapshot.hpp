// PoolSnapshot: every buffer of a pool, with its state, sizes, age and tag, and the pool's stats at that moment.
#pragma once

#include <clpool/core/steady_clock.hpp>
#include <clpool/core/segments.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/diagnostics/history.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace clpool {

// One buffer the pool holds from the driver.
struct BufferInfo {
    BufferState state = BufferState::in_use;
    std::size_t bucket_size = 0;      // bytes per buffer of its bucket; 0 for the exact-size bucket
    std::size_t bytes_requested = 0;  // what its holder asked for; 0 unless in use
    std::size_t bytes_held = 0;       // the buffer's size
    std::uint64_t made_ns = 0;        // steady clock, when the driver made it
    // How many buffers its lock stripe handed out (hits and misses) up to its
    // last hand-out from the shared lists, and how many since: a logical clock,
    // because reading a clock on every hit would cost more than the hit.
    // ThreadCached: hand-outs from a thread's magazine are not counted here.
    std::uint64_t handout_seq = 0;
    std::uint64_t handouts_since = 0;
    std::uint32_t uses = 0;    // times handed out from the shared lists, the first included
    std::string tag;           // the holder's Handle::set_tag; for an idle buffer, its last holder's
    std::uintptr_t id = 0;     // stable while the buffer lives (its node's address)
    // Where its current (or last) holder allocated it, innermost first; empty
    // unless the pool's history records call sites (Pool::record_history).
    std::vector<std::string> frames;
};

// What Pool::snapshot() returns: `stats` and `buffers` were read under the
// same locks, so the totals agree (bytes and buffer counts per state).
struct PoolSnapshot {
    std::string pool;  // the backend's name
    std::uint64_t taken_ns = 0;  // steady clock, same base as BufferInfo::made_ns
    PoolStats stats;
    std::vector<BufferInfo> buffers;  // in use first
    std::vector<SegmentInfo> segments;  // a sub-allocating pool's (SubAllocated); empty for others
    std::optional<History> history;     // the recent events, while the pool records them
};

// The moment of an out-of-memory (clpool::out_of_memory, CLPOOL_OOM_SNAPSHOT).
struct OutOfMemoryRecord {
    std::string pool;  // the backend's name
    std::size_t requested = 0;  // what was asked
    std::size_t bucket_size = 0;  // what the driver was asked for
    std::size_t cached_given_back = 0;  // cached and pending bytes trimmed before the retry
    int native_code = 0;
};

// A process-wide snapshot: one entry per pool (registry pools, host pools).
struct ProcessSnapshot {
    std::uint64_t taken_ns = 0;
    std::optional<OutOfMemoryRecord> out_of_memory;  // set in the dump CLPOOL_OOM_SNAPSHOT writes
    std::vector<PoolSnapshot> pools;
};

namespace detail {
// Where a buffer of a sub-allocating pool lies: its segment's id and offset.
struct buffer_place {
    std::pair<std::uintptr_t, std::size_t> at;
    std::uintptr_t id = 0;
    BufferState state = BufferState::in_use;
    bool operator<(const buffer_place& o) const noexcept { return at < o.at; }
};

// Gives each taken block of `segments` the id and state of the buffer that
// lies there (a block no buffer claims keeps in_use and id 0).
inline void join_segments(std::vector<SegmentInfo>& segments, std::vector<buffer_place>& places) {
    std::sort(places.begin(), places.end());
    for (auto& seg : segments)
        for (auto& blk : seg.blocks) {
            if (blk.free) continue;
            const buffer_place key{{seg.id, blk.offset}};
            const auto it = std::lower_bound(places.begin(), places.end(), key);
            if (it == places.end() || it->at != key.at) continue;
            blk.state = it->state;
            blk.buffer_id = it->id;
        }
}

// The segment counters of `s` that `segments` lists (count, bytes, free
// bytes, largest free range), from that list.
inline void segment_totals(const std::vector<SegmentInfo>& segments, PoolStats& s) noexcept {
    s.segments = segments.size();
    s.segment_bytes = s.segment_free_bytes = s.largest_free_block = 0;
    for (const auto& seg : segments) {
        s.segment_bytes += seg.bytes;
        s.segment_free_bytes += seg.free_bytes;
        s.largest_free_block = std::max(s.largest_free_block, seg.largest_free);
    }
}

}  // namespace detail

}  // namespace clpool
