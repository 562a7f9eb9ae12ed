// oom_report: what out_of_memory::what() adds from a snapshot (largest live buffers, what was given back, fragmentation), and the CLPOOL_OOM_SNAPSHOT dump.
#pragma once

#include <clpool/core/snapshot.hpp>
#include <clpool/core/snapshot_json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace clpool::detail {

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
    line("fragmentation: " + std::to_string(lost) + " bytes (" + std::to_string(pct) +
         "% of live) lost to bucket rounding; " + std::to_string(idle) + " bytes idle in the pool now");
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
        line(write_snapshot(path, dump) ? std::string("snapshot written to ") + path
                                        : std::string("could not write the snapshot to ") + path);
    }
    return out;
}

}  // namespace clpool::detail
