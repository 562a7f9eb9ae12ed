// What driver_floor.cpp (OpenCL) and driver_floor_cuda.cu share: the sizes they are given, the timing and
// the median of a measurement, the pieces a size is obtained in. C++17, for nvcc.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace driver_floor {

struct Size {
    std::string label;
    std::uint64_t bytes = 0;
};

// Bytes with an optional K/M/G/T[i][B] suffix (powers of 1024), decimals allowed (2.1GiB).
inline std::optional<std::uint64_t> parse_bytes(const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !(v > 0) || !std::isfinite(v)) return std::nullopt;
    std::string suffix(end);
    for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double scale = 1;
    if (suffix.empty() || suffix == "B") scale = 1;
    else if (suffix == "K" || suffix == "KB" || suffix == "KIB") scale = 0x1p10;
    else if (suffix == "M" || suffix == "MB" || suffix == "MIB") scale = 0x1p20;
    else if (suffix == "G" || suffix == "GB" || suffix == "GIB") scale = 0x1p30;
    else if (suffix == "T" || suffix == "TB" || suffix == "TIB") scale = 0x1p40;
    else return std::nullopt;
    if (v * scale >= 0x1p63) return std::nullopt;
    return static_cast<std::uint64_t>(std::llround(v * scale));
}

inline std::string fmt_bytes(double n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (n >= 1024 && u < 4) n /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", n, units[u]);
    return buf;
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One run of one way: obtaining, first use and release timed apart.
struct Run {
    double create_ms = 0, use_ms = 0, release_ms = 0;
    std::size_t pieces = 0;
    std::string error;  // empty: it went through
};

// The sizes of the pieces S is obtained in: as many of `piece` as fit, then the rest.
inline std::vector<std::uint64_t> split(std::uint64_t s, std::uint64_t piece) {
    std::vector<std::uint64_t> out(s / piece, piece);
    if (s % piece) out.push_back(s % piece);
    return out;
}

}  // namespace driver_floor
