// Byte sizes for the tools: parsing "4KiB"/"1G"/"4096" and printing "4 KiB"; decimal numbers.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace clpool::tools {

// Parses a byte count: a decimal integer with an optional binary suffix
// K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all powers of 1024, case-insensitive).
// Returns nullopt on anything else or on overflow. Cost: O(length).
inline std::optional<std::uint64_t> parse_bytes(std::string_view s) {
    std::uint64_t value = 0;
    const char* first = s.data();
    const char* last = s.data() + s.size();
    auto [p, ec] = std::from_chars(first, last, value);
    if (ec != std::errc{} || p == first) return std::nullopt;
    std::string suffix;
    for (; p != last; ++p) suffix += static_cast<char>(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    if (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
    unsigned shift = 0;
    if (suffix.empty() || suffix == "B") shift = 0;
    else if (suffix == "K" || suffix == "KB" || suffix == "KIB") shift = 10;
    else if (suffix == "M" || suffix == "MB" || suffix == "MIB") shift = 20;
    else if (suffix == "G" || suffix == "GB" || suffix == "GIB") shift = 30;
    else if (suffix == "T" || suffix == "TB" || suffix == "TIB") shift = 40;
    else return std::nullopt;
    if (shift && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
    return value << shift;
}

// Whether s is a decimal number as the tools' decimal options take it: an
// optional sign, digits with an optional fraction ("2", "1.5", ".5") and an
// optional exponent ("1e3"). strtod alone also reads hex ("0x10" is 16),
// inf, nan and leading blanks; those are refused here. Cost: O(length).
inline bool is_decimal_number(std::string_view s) {
    std::size_t i = 0;
    const auto sign = [&] {
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    };
    const auto digits = [&] {
        const std::size_t from = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        return i - from;
    };
    sign();
    std::size_t mantissa = digits();
    if (i < s.size() && s[i] == '.') {
        ++i;
        mantissa += digits();
    }
    if (mantissa == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        sign();
        if (digits() == 0) return false;
    }
    return i == s.size();
}

// "512 B", "4 KiB", "1.5 MiB", "1.25 MiB": binary units, at most two decimals.
inline std::string format_bytes(double bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 5) {
        bytes /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0 || bytes == static_cast<double>(static_cast<std::uint64_t>(bytes)))
        std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
    else {
        std::snprintf(buf, sizeof buf, "%.2f", bytes);
        std::string s = buf;
        while (s.back() == '0') s.pop_back();
        if (s.back() == '.') s.pop_back();
        return s + " " + units[u];
    }
    return buf;
}

// A fixed-point number with `digits` decimals.
inline std::string fixed(double v, int digits = 2) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

}  // namespace clpool::tools
