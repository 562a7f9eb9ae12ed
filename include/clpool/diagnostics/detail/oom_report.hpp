// oom_report: what out_of_memory::what() adds from a snapshot (largest live buffers, what was given back, fragmentation), and the CLPOOL_OOM_SNAPSHOT dump.
#pragma once

#include <clpool/diagnostics/snapshot.hpp>
#include <clpool/diagnostics/snapshot_json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if __has_include(<sys/stat.h>) && __has_include(<unistd.h>)
#include <sys/stat.h>
#include <unistd.h>
#define CLPOOL_OOM_DUMP_RENAMES 1
#endif

namespace clpool::detail {

// The CLPOOL_OOM_SNAPSHOT dump, whole: written to a file of its own beside
// `path`, then renamed over it, so that out-of-memories on several threads
// at once leave one of their snapshots, never one spliced into another. A
// path that is not a regular file (a device, a pipe, a link) or whose directory
// takes no new file is written in place. Never throws.
inline bool write_oom_dump(const char* path, const ProcessSnapshot& dump) noexcept {
#ifdef CLPOOL_OOM_DUMP_RENAMES
    try {
        struct stat st{};
        if (::lstat(path, &st) != 0 || S_ISREG(st.st_mode)) {  // a link is written through, in place
            static std::atomic<unsigned long> serial{0};
            const std::string tmp = std::string(path) + "." + std::to_string(::getpid()) + "." +
                                    std::to_string(serial.fetch_add(1, std::memory_order_relaxed)) + ".tmp";
            if (write_snapshot(tmp.c_str(), dump)) {
                if (std::rename(tmp.c_str(), path) == 0) return true;
            }
            std::remove(tmp.c_str());
        }
    } catch (...) {
        return false;
    }
#endif
    return write_snapshot(path, dump);
}

// The forensics lines of an out-of-memory message, from the pool's snapshot
// taken after the failed retry. Writes that snapshot to CLPOOL_OOM_SNAPSHOT
// when it is set (and says so). May throw bad_alloc: the caller falls back to
// the plain message.
inline std::string oom_report(const PoolSnapshot& snap, const OutOfMemoryRecord& oom) {
    std::string out;
    auto line = [&](const std::string& s) {
        out += "\n  ";
        out += s;
    };
    line("asked: " + std::to_string(oom.requested) + " bytes (the driver was asked for " +
         std::to_string(oom.bucket_size) + ")");
    line("given back before the retry: " + std::to_string(oom.cached_given_back) +
         " bytes of cached and pending buffers");
    std::vector<const BufferInfo*> live;
    std::size_t held = 0, asked = 0, idle = 0;
    for (const auto& b : snap.buffers) {
        if (b.state == BufferState::in_use) {
            live.push_back(&b);
            held += b.bytes_held;
            asked += b.bytes_requested;
        } else {
            idle += b.bytes_held;
        }
    }
    const std::size_t lost = held - asked;
    const std::size_t pct = held ? (lost * 100 + held / 2) / held : 0;  // rounded
    line("live: " + std::to_string(live.size()) + " buffers, " + std::to_string(held) + " bytes held for " +
         std::to_string(asked) + " asked");
    // Rounded percentages of a part of a whole (0 of nothing).
    auto percent = [](std::size_t part, std::size_t whole) {
        return std::to_string(whole ? std::lround(100.0 * static_cast<double>(part) / static_cast<double>(whole)) : 0);
    };
    const PoolStats& st = snap.stats;
    const bool arena = st.segments > 0;
    // An arena's free space lies in its segments, not in idle buffers (the
    // cache went back to them before the retry): its own lines say how much
    // there is and how it is cut up.
    line(std::string(arena ? "rounding: " : "fragmentation: ") + std::to_string(lost) + " bytes (" +
         std::to_string(pct) + "% of live) lost to bucket rounding; " + std::to_string(idle) +
         " bytes idle in the pool now");
    if (arena) {
        line("segments: " + std::to_string(st.segments) + ", " + std::to_string(st.segment_bytes) + " bytes, " +
             std::to_string(st.segment_free_bytes) + " bytes free (" +
             percent(st.segment_free_bytes, st.segment_bytes) + "%), largest free block " +
             std::to_string(st.largest_free_block) + " bytes");
        line("fragmentation: " + percent(st.segment_free_bytes - st.largest_free_block, st.segment_free_bytes) +
             "% of the free bytes lie outside the largest free block (stats().fragmentation()); no block above " +
             std::to_string(st.largest_free_block) + " bytes can be carved from them");
    }
    const std::size_t top = std::min<std::size_t>(10, live.size());
    std::partial_sort(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(top), live.end(),
                      [](const BufferInfo* a, const BufferInfo* b) {
                          return a->bytes_held != b->bytes_held ? a->bytes_held > b->bytes_held
                                                                : a->bytes_requested > b->bytes_requested;
                      });
    if (top) line("largest live buffers:");
    for (std::size_t i = 0; i < top; ++i) {
        const auto& b = *live[i];
        line("  " + std::to_string(i + 1) + ". " + std::to_string(b.bytes_held) + " bytes held, " +
             std::to_string(b.bytes_requested) + " asked, " +
             (b.tag.empty() ? std::string("untagged") : "tag '" + b.tag + "'") + ", made " +
             std::to_string((snap.taken_ns - b.made_ns) / 1000000) + " ms ago");
        // Where it was allocated, when the history records call sites: the
        // innermost frames, the caller's first.
        for (std::size_t f = 0; f < std::min<std::size_t>(b.frames.size(), 4); ++f) line("       at " + b.frames[f]);
    }
    if (const char* path = std::getenv("CLPOOL_OOM_SNAPSHOT"); path && *path) {
        ProcessSnapshot dump;
        dump.taken_ns = snap.taken_ns;
        dump.out_of_memory = oom;
        dump.pools.push_back(snap);
        line(write_oom_dump(path, dump) ? std::string("snapshot written to ") + path
                                        : std::string("could not write the snapshot to ") + path);
    }
    return out;
}

}  // namespace clpool::detail
