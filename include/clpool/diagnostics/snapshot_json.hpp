// to_json: a snapshot as the versioned JSON of docs/OBSERVABILITY.md, with no dependency; and a file writer that never throws.
#pragma once

#include <clpool/diagnostics/snapshot.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace clpool {

// The schema's name and version (docs/OBSERVABILITY.md). A reader refuses
// another version: fields may change meaning between versions.
inline constexpr const char* snapshot_schema = "clpool.snapshot";
inline constexpr int snapshot_schema_version = 2;

namespace detail {

inline void json_string(std::string& out, const std::string& s) {
    out += '"';
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20) {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[u >> 4];
            out += hex[u & 15];
        } else {
            out += c;
        }
    }
    out += '"';
}

inline void json_field(std::string& out, const char* name, std::uint64_t v, bool comma = true) {
    if (comma) out += ',';
    out += '"';
    out += name;
    out += "\":";
    out += std::to_string(v);
}

// A sub-allocating pool's segments (version 2): each block at its offset,
// "free" or its buffer's state and id.
inline void json_segments(std::string& out, const std::vector<SegmentInfo>& segments) {
    out += ",\"segments\":[";
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const auto& seg = segments[i];
        out += i ? ",\n{" : "\n{";
        json_field(out, "id", seg.id, false);
        json_field(out, "bytes", seg.bytes);
        json_field(out, "free_bytes", seg.free_bytes);
        json_field(out, "largest_free", seg.largest_free);
        out += ",\"blocks\":[";
        for (std::size_t j = 0; j < seg.blocks.size(); ++j) {
            const auto& b = seg.blocks[j];
            out += j ? ",{" : "{";
            json_field(out, "offset", b.offset, false);
            json_field(out, "bytes", b.bytes);
            out += ",\"state\":\"";
            out += b.free ? "free" : to_string(b.state);
            out += '"';
            json_field(out, "buffer_id", b.free ? 0 : b.buffer_id);
            out += '}';
        }
        out += "]}";
    }
    out += ']';
}

inline void json_frames(std::string& out, const std::vector<std::string>& frames) {
    out += ",\"frames\":[";
    for (std::size_t i = 0; i < frames.size(); ++i) {
        if (i) out += ',';
        json_string(out, frames[i]);
    }
    out += ']';
}

inline void json_history(std::string& out, const History& h) {
    out += ",\"history\":{";
    json_field(out, "capacity", h.capacity, false);
    json_field(out, "recorded", h.recorded);
    json_field(out, "dropped", h.dropped);
    out += ",\"events\":[";
    for (std::size_t i = 0; i < h.events.size(); ++i) {
        const auto& e = h.events[i];
        out += i ? ",\n{" : "\n{";
        json_field(out, "t_ns", e.t_ns, false);
        out += ",\"action\":\"";
        out += to_string(e.action);
        out += '"';
        if (e.action == HistoryAction::alloc) out += e.hit ? ",\"hit\":true" : ",\"hit\":false";
        json_field(out, "id", e.id);
        json_field(out, "bytes_requested", e.bytes_requested);
        json_field(out, "bytes_held", e.bytes_held);
        json_field(out, "bucket_size", e.bucket_size);
        out += ",\"tag\":";
        if (e.tag.empty()) out += "null";
        else json_string(out, e.tag);
        if (!e.frames.empty()) json_frames(out, e.frames);
        out += '}';
    }
    out += "]}";
}

inline void json_pool(std::string& out, const PoolSnapshot& p) {
    out += "{\"name\":";
    json_string(out, p.pool);
    json_field(out, "taken_ns", p.taken_ns);
    const auto& s = p.stats;
    out += ",\"stats\":{";
    json_field(out, "hits", s.hits, false);
    json_field(out, "misses", s.misses);
    json_field(out, "evictions", s.evictions);
    json_field(out, "driver_frees", s.driver_frees);
    json_field(out, "oom_retries", s.oom_retries);
    json_field(out, "failed_allocations", s.failed_allocations);
    json_field(out, "bytes_allocated", s.bytes_allocated);
    json_field(out, "bytes_cached", s.bytes_cached);
    json_field(out, "bytes_in_use", s.bytes_in_use);
    json_field(out, "bytes_requested", s.bytes_requested);
    json_field(out, "bytes_pending", s.bytes_pending);
    json_field(out, "peak_bytes_allocated", s.peak_bytes_allocated);
    json_field(out, "peak_bytes_in_use", s.peak_bytes_in_use);
    out += ",\"buckets\":[";
    for (std::size_t i = 0; i < s.buckets.size(); ++i) {
        const auto& b = s.buckets[i];
        out += i ? ",{" : "{";
        json_field(out, "bucket_size", b.bucket_size, false);
        json_field(out, "hits", b.hits);
        json_field(out, "misses", b.misses);
        json_field(out, "evictions", b.evictions);
        json_field(out, "cached_buffers", b.cached_buffers);
        json_field(out, "in_use_buffers", b.in_use_buffers);
        json_field(out, "pending_buffers", b.pending_buffers);
        out += '}';
    }
    out += "]},\"buffers\":[";
    for (std::size_t i = 0; i < p.buffers.size(); ++i) {
        const auto& b = p.buffers[i];
        out += i ? ",\n{" : "\n{";
        json_field(out, "id", b.id, false);
        out += ",\"state\":\"";
        out += to_string(b.state);
        out += '"';
        json_field(out, "bucket_size", b.bucket_size);
        json_field(out, "bytes_requested", b.bytes_requested);
        json_field(out, "bytes_held", b.bytes_held);
        json_field(out, "made_ns", b.made_ns);
        json_field(out, "handout_seq", b.handout_seq);
        json_field(out, "handouts_since", b.handouts_since);
        json_field(out, "uses", b.uses);
        out += ",\"tag\":";
        json_string(out, b.tag);
        if (!b.frames.empty()) json_frames(out, b.frames);
        out += '}';
    }
    out += ']';
    if (!p.segments.empty()) json_segments(out, p.segments);
    if (p.history) json_history(out, *p.history);
    out += '}';
}

}  // namespace detail

// The JSON of docs/OBSERVABILITY.md (schema "clpool.snapshot", version 2).
inline std::string to_json(const ProcessSnapshot& snap) {
    std::string out = "{\"schema\":\"";
    out += snapshot_schema;
    out += '"';
    detail::json_field(out, "version", snapshot_schema_version);
    detail::json_field(out, "taken_ns", snap.taken_ns);
    out += ",\"out_of_memory\":";
    if (snap.out_of_memory) {
        const auto& o = *snap.out_of_memory;
        out += "{\"pool\":";
        detail::json_string(out, o.pool);
        detail::json_field(out, "requested", o.requested);
        detail::json_field(out, "bucket_size", o.bucket_size);
        detail::json_field(out, "cached_given_back", o.cached_given_back);
        detail::json_field(out, "native_code", static_cast<std::uint64_t>(static_cast<std::uint32_t>(o.native_code)));
        out += '}';
    } else {
        out += "null";
    }
    out += ",\"pools\":[";
    for (std::size_t i = 0; i < snap.pools.size(); ++i) {
        if (i) out += ",\n";
        detail::json_pool(out, snap.pools[i]);
    }
    out += "]}\n";
    return out;
}

// One pool's snapshot, as a process snapshot of that pool alone.
inline std::string to_json(const PoolSnapshot& snap) {
    ProcessSnapshot p;
    p.taken_ns = snap.taken_ns;
    p.pools.push_back(snap);
    return to_json(p);
}

namespace detail {
template <class Snapshot>
bool write_json(const char* path, const Snapshot& snap) noexcept {
    try {
        const std::string text = to_json(snap);
        std::FILE* f = std::fopen(path, "wb");
        if (!f) return false;
        const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        return std::fclose(f) == 0 && ok;
    } catch (...) {
        return false;
    }
}
}  // namespace detail

// Writes to_json(snap) to `path`, a process's snapshot or one pool's. Never
// throws: false if the JSON could not be made (out of host memory) or the
// file not written in full.
inline bool write_snapshot(const char* path, const ProcessSnapshot& snap) noexcept {
    return detail::write_json(path, snap);
}
inline bool write_snapshot(const char* path, const PoolSnapshot& snap) noexcept {
    return detail::write_json(path, snap);
}

}  // namespace clpool
