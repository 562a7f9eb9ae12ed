// Process-wide state the pools consult: the fork generation and whether clpool::shutdown() ran.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#if __has_include(<pthread.h>)
#include <pthread.h>
#define CLPOOL_HAS_PTHREAD_ATFORK 1
#endif

namespace clpool::detail {

// One word: exiting bit (63) | fork generation << 1 | shut-down bit (0). A
// pool remembers the generation it was born in; a single relaxed load tells
// it whether it may still work (same process, not exiting, not shut down). A
// trivially destructible global, so nothing runs at exit.
inline std::atomic<std::uint64_t> process_word{0};
inline constexpr std::uint64_t shut_down_bit = 1;
inline constexpr std::uint64_t exiting_bit = std::uint64_t{1} << 63;

inline std::uint32_t fork_generation() noexcept {
    return static_cast<std::uint32_t>(process_word.load(std::memory_order_acquire) >> 1);
}
inline bool shut_down() noexcept { return (process_word.load(std::memory_order_acquire) & shut_down_bit) != 0; }
inline bool exiting() noexcept { return (process_word.load(std::memory_order_acquire) & exiting_bit) != 0; }
// The word a pool born in `generation` expects while it may work.
constexpr std::uint64_t alive_word(std::uint32_t generation) noexcept { return std::uint64_t{generation} << 1; }
// True when `generation` is this process's (not a fork parent's).
inline bool same_process(std::uint32_t generation) noexcept { return generation == fork_generation(); }
// True while objects of `generation` may call the driver to free what they
// hold: this process's, and its exit not past clpool's handler (after it the
// driver may already be torn down, so what is left leaks). After shutdown()
// they still may: it only stops caching. A shift and a compare, as
// same_process: the exiting bit stays in the shifted word.
inline bool may_free(std::uint32_t generation) noexcept {
    return (process_word.load(std::memory_order_acquire) >> 1) == generation;
}

inline void mark_shut_down() noexcept { process_word.fetch_or(shut_down_bit, std::memory_order_acq_rel); }
inline void mark_exiting() noexcept { process_word.fetch_or(exiting_bit, std::memory_order_acq_rel); }

// Marks the exit once an OpenCL driver is loaded (a context or queue exists):
// the handler is registered after the driver's own teardown was, and exit()
// runs handlers in reverse order, so it runs before that teardown. A pool,
// handle or arena destroyed after it (a static made before the driver was
// loaded) leaks what it holds instead of calling the driver. Once per process.
inline void arm_exit_mark() noexcept { [[maybe_unused]] static const bool armed = std::atexit(&mark_exiting) == 0; }

// In a fork child: a new generation, not shut down. Only an atomic store, so
// it is safe in the child of a multithreaded parent. Objects of the parent's
// generation notice lazily and never touch their OpenCL handles again.
inline void on_fork_child() noexcept {
    const auto gen = fork_generation();
    process_word.store(alive_word(gen + 1), std::memory_order_release);
}

// Installs the fork-child handler once per process. Returns the generation
// now current. Thread-safe; cheap after the first call.
inline std::uint32_t birth_generation() noexcept {
#ifdef CLPOOL_HAS_PTHREAD_ATFORK
    [[maybe_unused]] static const bool installed = pthread_atfork(nullptr, nullptr, &on_fork_child) == 0;
#endif
    return fork_generation();
}

// Why a pool of `generation` refuses work, as the message of the caller's
// error (core throws it as usage_error: the platform layer knows no clpool type).
inline std::string refusal_message(std::uint32_t generation, std::string_view pool_name) {
    if (!same_process(generation))
        return "clpool: this " + std::string(pool_name) +
               " pool was created before fork() in the parent process; a child process must "
               "create its own pools (get_buffer_pool and select_device give fresh ones in the child)";
    if (exiting())
        return "clpool: " + std::string(pool_name) +
               " pool used after clpool's exit handler ran; no pool accepts work while the process "
               "exits (the driver may already be gone)";
    return "clpool: " + std::string(pool_name) +
           " pool used after clpool::shutdown(); no pool accepts work once shutdown() has run";
}

}  // namespace clpool::detail
