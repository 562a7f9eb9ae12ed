// Timing helpers for the tools: a monotonic clock and the median of repetitions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace clpool::tools {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point start) noexcept {
    return std::chrono::duration<double>(clock::now() - start).count();
}

// The median of `v` (the mean of the middle two for an even count); 0 for
// an empty vector. Takes a copy: sorting is its own business.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Runs f() `warmup` times untimed, then `reps` times timed; returns the
// median seconds per call.
template <class F>
double median_seconds(std::size_t warmup, std::size_t reps, F&& f) {
    for (std::size_t i = 0; i < warmup; ++i) f();
    std::vector<double> t;
    t.reserve(reps);
    for (std::size_t i = 0; i < reps; ++i) {
        const auto start = clock::now();
        f();
        t.push_back(seconds_since(start));
    }
    return median(std::move(t));
}

}  // namespace clpool::tools
