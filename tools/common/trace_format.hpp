// The clpool trace format (docs/TRACE_FORMAT.md) in one place: the interposer writes it, clpool-replay reads it.
#pragma once

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

// std-only, so the interposer, the tools, the tests and the fuzzers can all include it.
namespace clpool::tools::trace_format {

inline constexpr int version = 1;
// The first line of every trace; a reader told "clpool-trace 2" knows it is a newer version.
inline constexpr std::string_view header_prefix = "clpool-trace ";
inline constexpr std::string_view header = "clpool-trace 1";
static_assert(header.substr(0, header_prefix.size()) == header_prefix && header.size() == header_prefix.size() + 1 &&
              header.back() == '0' + version);

inline constexpr char comment = '#';    // a comment line starts with it
inline constexpr char separator = ' ';  // between fields: exactly one

// The ops, null-terminated so the writer can print them with %s.
inline constexpr char op_alloc[] = "alloc";
inline constexpr char op_free[] = "free";

// Where each field sits on an event line (0-based); docs/TRACE_FORMAT.md has their meaning.
namespace field {
inline constexpr std::size_t t_ns = 0, op = 1, id = 2, ctx = 3, flags = 4, bytes = 5;
}
inline constexpr std::size_t alloc_fields = 6;  // t_ns alloc id ctx flags bytes
inline constexpr std::size_t free_fields = 3;   // t_ns free id
inline constexpr std::string_view alloc_syntax = "<t_ns> alloc <id> <ctx> <flags> <bytes>";
inline constexpr std::string_view free_syntax = "<t_ns> free <id>";

// Room for the longest event line: five 64-bit numbers, the op, separators, "0x" twice, "\n".
inline constexpr std::size_t max_line = 128;

// The writer's lines, each ending in "\n" and its fields separated by single
// spaces, as snprintf writes them (the length, or negative).
inline int format_header(char* out, std::size_t room, const char* note) noexcept {
    return std::snprintf(out, room, "%.*s\n%c %s\n", static_cast<int>(header.size()), header.data(), comment, note);
}
inline int format_alloc(char* out, std::size_t room, std::uint64_t t_ns, std::uint64_t id, std::uint64_t ctx,
                        std::uint64_t flags, std::uint64_t bytes) noexcept {
    return std::snprintf(out, room, "%" PRIu64 " %s %" PRIu64 " 0x%" PRIx64 " 0x%" PRIx64 " %" PRIu64 "\n", t_ns,
                         op_alloc, id, ctx, flags, bytes);
}
inline int format_free(char* out, std::size_t room, std::uint64_t t_ns, std::uint64_t id) noexcept {
    return std::snprintf(out, room, "%" PRIu64 " %s %" PRIu64 "\n", t_ns, op_free, id);
}

}  // namespace clpool::tools::trace_format
