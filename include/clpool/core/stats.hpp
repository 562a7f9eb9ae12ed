// PoolStats: a consistent snapshot of a pool's counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <vector>

namespace clpool {

struct BucketStats {
    std::size_t bucket_size = 0;       // bytes per buffer; 0 for the exact-size bucket
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t evictions = 0;
    std::size_t cached_buffers = 0;    // idle, ready to hand out
    std::size_t in_use_buffers = 0;    // handed out and not yet released
    std::size_t pending_buffers = 0;   // released, waiting for their events
};

struct PoolStats {
    std::uint64_t hits = 0;            // allocations served from the cache
    std::uint64_t misses = 0;          // allocations that went to the driver
    std::uint64_t evictions = 0;       // released buffers a cap sent back to the driver
    std::uint64_t driver_frees = 0;    // buffers given back to the driver (evictions, trims; a sub-
                                       // allocating pool's exact-size blocks on release, to its arena)
    std::uint64_t oom_retries = 0;     // driver failures answered by giving the cache back
    std::uint64_t failed_allocations = 0;  // allocations that failed for good
    std::size_t bytes_allocated = 0;   // bytes held from the driver: in use + cached + pending
    std::size_t bytes_cached = 0;      // idle bytes in the free lists
    std::size_t bytes_in_use = 0;      // bucket bytes handed out
    std::size_t bytes_requested = 0;   // bytes asked for by the holders of bytes_in_use
    std::size_t bytes_pending = 0;     // released bytes whose events still ran at the last look (stats() looks)
    std::size_t peak_bytes_allocated = 0;
    // Exact for one-stripe lock policies; with Striped<N> the sum of the
    // stripes' own peaks (an upper bound), so the hot path needs no shared counter.
    std::size_t peak_bytes_in_use = 0;
    std::vector<BucketStats> buckets;  // every bucket that has seen a buffer, smallest first
    // Sub-allocating backends only (SubAllocated, docs/ARENA.md); zero otherwise.
    std::size_t segments = 0;              // driver allocations carved into blocks
    std::size_t segment_bytes = 0;         // bytes held in those segments: what the device gave
    std::size_t peak_segment_bytes = 0;
    std::size_t segment_free_bytes = 0;    // bytes of the segments no block covers
    std::size_t largest_free_block = 0;    // the largest free range in a segment (small and large requests
                                           // carve their own segments: one this large may need a new one)
    std::uint64_t segment_allocations = 0;   // driver allocations for segments (misses not carved)
    std::uint64_t sub_buffer_fallbacks = 0;  // blocks served as whole buffers: the sub-buffer failed
    std::uint64_t sub_buffers_made = 0;      // views made for carves (OpenCL: successful clCreateSubBuffer)
    std::uint64_t sub_buffers_reused = 0;    // carves served by an idle view kept in the segment: no driver call
    std::size_t sub_buffers_cached = 0;      // idle views kept in the segments now

    double hit_rate() const noexcept {
        const auto total = hits + misses;
        return total ? static_cast<double>(hits) / static_cast<double>(total) : 0.0;
    }
    // Bytes handed out beyond what was asked for (bucket rounding).
    std::size_t bytes_wasted() const noexcept { return bytes_in_use - bytes_requested; }
    // 1 - largest free block / free bytes in segments: 0 when the free space is
    // one block, near 1 when it is in crumbs. 0 with no free space.
    double fragmentation() const noexcept {
        return segment_free_bytes
                   ? 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(segment_free_bytes)
                   : 0.0;
    }
};

// One line, every counter as name=value (the buckets table is left out), so
// that it adds up: bytes_allocated = bytes_in_use + bytes_cached + bytes_pending.
// The segment counters follow for a sub-allocating pool (any of them nonzero).
// A template so that this header needs only <iosfwd>; the caller has <ostream>.
template <class Char, class Traits>
std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os, const PoolStats& s) {
    os << "hits=" << s.hits << " misses=" << s.misses << " hit_rate=" << s.hit_rate() << " evictions=" << s.evictions
       << " driver_frees=" << s.driver_frees << " oom_retries=" << s.oom_retries
       << " failed_allocations=" << s.failed_allocations << " bytes_allocated=" << s.bytes_allocated
       << " bytes_in_use=" << s.bytes_in_use << " bytes_cached=" << s.bytes_cached
       << " bytes_pending=" << s.bytes_pending << " bytes_requested=" << s.bytes_requested
       << " peak_bytes_allocated=" << s.peak_bytes_allocated << " peak_bytes_in_use=" << s.peak_bytes_in_use;
    if (s.segments == 0 && s.segment_allocations == 0 && s.sub_buffer_fallbacks == 0) return os;
    return os << " segments=" << s.segments << " segment_bytes=" << s.segment_bytes
              << " peak_segment_bytes=" << s.peak_segment_bytes << " segment_free_bytes=" << s.segment_free_bytes
              << " largest_free_block=" << s.largest_free_block << " fragmentation=" << s.fragmentation()
              << " segment_allocations=" << s.segment_allocations << " sub_buffer_fallbacks=" << s.sub_buffer_fallbacks
              << " sub_buffers_made=" << s.sub_buffers_made << " sub_buffers_reused=" << s.sub_buffers_reused
              << " sub_buffers_cached=" << s.sub_buffers_cached;
}

}  // namespace clpool
