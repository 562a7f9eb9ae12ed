// steady_clock: nanoseconds of the steady clock, without <chrono> on POSIX.
#pragma once

#include <cstdint>

#if defined(__unix__)
#include <time.h>
#else
#include <chrono>
#endif

namespace clpool::detail {

#if defined(__unix__)
// A POSIX clock in nanoseconds.
inline std::uint64_t clock_ns(clockid_t clock) noexcept {
    timespec t{};
    clock_gettime(clock, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
}
#endif

// The steady clock in nanoseconds: CLOCK_MONOTONIC, the clock std::chrono::steady_clock
// reads on POSIX systems, so the two agree (snapshots mix them).
inline std::uint64_t steady_ns() noexcept {
#if defined(__unix__)
    return clock_ns(CLOCK_MONOTONIC);
#else
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
#endif
}

// The steady clock as of its last tick (CLOCK_MONOTONIC_COARSE: a few
// milliseconds behind at most, never ahead of a later steady_ns()), at a
// fraction of the cost: for stamps on the miss path that are only shown as ages.
inline std::uint64_t steady_coarse_ns() noexcept {
#if defined(__linux__)
    return clock_ns(CLOCK_MONOTONIC_COARSE);
#else
    return steady_ns();
#endif
}

}  // namespace clpool::detail
