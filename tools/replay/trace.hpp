// The allocation-trace parser (format: docs/TRACE_FORMAT.md), std-only so tests and fuzzers can include it.
#pragma once

#include "../common/trace_format.hpp"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace clpool::replay {

enum class op : unsigned char { alloc, free };

// One trace event. For a free, ctx/flags/bytes are those of the matching
// alloc (filled in by the parser), so a replay needs no lookup of its own.
struct Event {
    std::uint64_t t_ns = 0;
    op kind = op::alloc;
    std::uint64_t id = 0;
    std::uint64_t ctx = 0;
    std::uint64_t flags = 0;
    std::uint64_t bytes = 0;
    std::size_t line = 0;  // 1-based line in the file
    // The last event of its context in the trace. The format records no
    // context release; a replay takes a context with no more events as
    // released (the interposer closes its pools at clReleaseContext).
    bool ends_context = false;
};

struct Trace {
    std::vector<Event> events;
    std::size_t lines = 0;           // lines read, header and comments included
    std::size_t live_at_end = 0;     // allocations never freed
    std::uint64_t live_bytes_at_end = 0;
};

// A malformed trace: line() is the 1-based line, what() reads
// "line N: <problem>; expected <what>: '<the line>'".
class trace_error : public std::runtime_error {
public:
    trace_error(std::size_t line, const std::string& message)
        : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line) {}
    std::size_t line() const noexcept { return line_; }

private:
    std::size_t line_;
};

namespace detail {

// The line as it may be quoted in a message: at most 80 characters,
// non-printable bytes as \xNN (traces are text; a fuzzer's are not).
inline std::string quote(std::string_view s) {
    std::string out = "'";
    const std::size_t n = s.size() < 80 ? s.size() : 80;
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > n) out += "...";
    return out + "'";
}

inline bool parse_dec(std::string_view s, std::uint64_t& v) {
    if (s.empty() || s.front() < '0' || s.front() > '9') return false;  // no sign, no space
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    return ec == std::errc{} && p == s.data() + s.size();
}

inline bool parse_hex(std::string_view s, std::uint64_t& v) {
    if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
    s.remove_prefix(2);
    if (s.front() == '+' || s.front() == '-') return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    return ec == std::errc{} && p == s.data() + s.size();
}

}  // namespace detail

// The header every trace starts with.
inline constexpr std::string_view trace_header = tools::trace_format::header;

// Parses a whole trace. Lines end in "\n" (a "\r" before it is dropped);
// blank lines and lines starting with '#' are skipped. Checks the header,
// the op, the field count, every number, that times never decrease and
// sizes are at least 1 (docs/TRACE_FORMAT.md), that ids pair up (an
// alloc of a live id and a free of an id that is not live are errors), and
// that the bytes live at once fit in 64 bits.
// Returns the events in file order. Throws trace_error (only) for a malformed
// trace, naming the line and what was expected; std::bad_alloc if memory runs out.
// Cost: O(length of text). Thread-safe (no shared state).
inline Trace parse_trace(std::string_view text) {
    namespace fmt = tools::trace_format;
    namespace field = fmt::field;
    // " (field N)": where a bad field sits, counted from 1.
    const auto at = [](std::size_t i) { return " (field " + std::to_string(i + 1) + ")"; };
    const auto quoted = [](std::string_view s) { return "'" + std::string(s) + "'"; };
    Trace trace;
    std::unordered_map<std::uint64_t, std::size_t> live;  // id -> index of its alloc event
    std::uint64_t live_bytes = 0;                         // a replay's "no pool" bytes held
    std::size_t line_no = 0;
    bool header_seen = false;
    std::uint64_t last_t = 0;
    std::size_t last_t_line = 0;
    std::vector<std::string_view> fields;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        auto fail = [&](const std::string& what) { return trace_error(line_no, what + ": " + detail::quote(line)); };
        if (!header_seen) {
            if (line != trace_header) {
                if (line.substr(0, trace_header.size()) == trace_header &&
                    line.find_first_not_of(" \t", trace_header.size()) == std::string_view::npos)
                    throw fail("trailing blanks after the header; expected exactly '" + std::string(trace_header) +
                               "'");
                if (line.substr(0, fmt::header_prefix.size()) == fmt::header_prefix)
                    throw fail("unsupported trace version; expected the header '" + std::string(trace_header) + "'");
                throw fail("not a clpool trace; expected the header '" + std::string(trace_header) + "'");
            }
            header_seen = true;
            continue;
        }
        if (line.empty() || line.front() == fmt::comment) continue;

        fields.clear();
        for (std::size_t start = 0;;) {
            const std::size_t sp = line.find(fmt::separator, start);
            fields.push_back(line.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start));
            if (sp == std::string_view::npos) break;
            start = sp + 1;
        }
        for (std::size_t i = 0; i < fields.size(); ++i)
            if (fields[i].empty())
                throw fail("empty field " + std::to_string(i + 1) +
                           "; expected fields separated by single spaces, no leading or trailing space");
        if (fields.size() <= field::op)
            throw fail("too few fields; expected " + quoted(fmt::alloc_syntax) + " or " + quoted(fmt::free_syntax));

        Event e;
        e.line = line_no;
        if (!detail::parse_dec(fields[field::t_ns], e.t_ns))
            throw fail("bad time '" + std::string(fields[field::t_ns].substr(0, 40)) +
                       "'; expected a decimal count of nanoseconds" + at(field::t_ns));
        if (last_t_line && e.t_ns < last_t)
            throw fail("time " + std::to_string(e.t_ns) + " is before " + std::to_string(last_t) + " on line " +
                       std::to_string(last_t_line) + "; expected times that never decrease");
        last_t = e.t_ns;
        last_t_line = line_no;
        const std::string_view op_name = fields[field::op];
        if (op_name == fmt::op_alloc) {
            if (fields.size() != fmt::alloc_fields)
                throw fail("alloc has " + std::to_string(fields.size()) + " fields; expected " +
                           std::to_string(fmt::alloc_fields) + ": " + quoted(fmt::alloc_syntax));
            e.kind = op::alloc;
            if (!detail::parse_dec(fields[field::id], e.id))
                throw fail("bad id '" + std::string(fields[field::id].substr(0, 40)) + "'; expected a decimal id" +
                           at(field::id));
            if (!detail::parse_hex(fields[field::ctx], e.ctx))
                throw fail("bad context '" + std::string(fields[field::ctx].substr(0, 40)) +
                           "'; expected a hex token like 0x1" + at(field::ctx));
            if (!detail::parse_hex(fields[field::flags], e.flags))
                throw fail("bad flags '" + std::string(fields[field::flags].substr(0, 40)) +
                           "'; expected hex cl_mem_flags like 0x1" + at(field::flags));
            if (!detail::parse_dec(fields[field::bytes], e.bytes))
                throw fail("bad size '" + std::string(fields[field::bytes].substr(0, 40)) +
                           "'; expected a decimal byte count" + at(field::bytes));
            if (e.bytes == 0) throw fail("size 0; expected at least 1 byte" + at(field::bytes));
            // Replays count bytes in 64 bits; past that a peak would wrap silently.
            if (e.bytes > std::numeric_limits<std::uint64_t>::max() - live_bytes)
                throw fail("size " + std::to_string(e.bytes) + " with " + std::to_string(live_bytes) +
                           " bytes live takes the live bytes past " +
                           std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                           "; expected live bytes that fit in 64 bits" + at(field::bytes));
            live_bytes += e.bytes;
            auto [it, fresh] = live.try_emplace(e.id, trace.events.size());
            if (!fresh)
                throw fail("alloc of id " + std::to_string(e.id) + ", which is still live (allocated on line " +
                           std::to_string(trace.events[it->second].line) + "); expected a free of it first");
        } else if (op_name == fmt::op_free) {
            if (fields.size() != fmt::free_fields)
                throw fail("free has " + std::to_string(fields.size()) + " fields; expected " +
                           std::to_string(fmt::free_fields) + ": " + quoted(fmt::free_syntax));
            e.kind = op::free;
            if (!detail::parse_dec(fields[field::id], e.id))
                throw fail("bad id '" + std::string(fields[field::id].substr(0, 40)) + "'; expected a decimal id" +
                           at(field::id));
            auto it = live.find(e.id);
            if (it == live.end())
                throw fail("free of id " + std::to_string(e.id) +
                           ", which is not live (never allocated, or already freed); expected the id of a live alloc");
            const Event& a = trace.events[it->second];
            e.ctx = a.ctx;
            e.flags = a.flags;
            e.bytes = a.bytes;
            live_bytes -= a.bytes;
            live.erase(it);
        } else {
            throw fail("unknown op '" + std::string(op_name.substr(0, 40)) + "'; expected " + fmt::op_alloc + " or " +
                       fmt::op_free + at(field::op));
        }
        trace.events.push_back(e);
    }
    if (!header_seen) throw trace_error(1, "empty file; expected the header '" + std::string(trace_header) + "'");
    trace.lines = line_no;
    std::unordered_set<std::uint64_t> seen;
    for (auto it = trace.events.rbegin(); it != trace.events.rend(); ++it)
        it->ends_context = seen.insert(it->ctx).second;
    trace.live_at_end = live.size();
    trace.live_bytes_at_end = live_bytes;
    return trace;
}

}  // namespace clpool::replay
