// Process-wide state the pools consult: the fork generation and whether clpool::shutdown() ran.
#pragma once

#include <clpool/core/errors.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#if __has_include(<pthread.h>)
#include <pthread.h>
#define CLPOOL_HAS_PTHREAD_ATFORK 1
#endif

namespace clpool::detail {

// One word: (fork generation << 1) | shut-down bit. A pool remembers the
// generation it was born in; a single relaxed load tells it whether it may
// still work (same process, not shut down). A trivially destructible global,
// so nothing runs at exit.
inline std::atomic<std::uint64_t> process_word{0};

inline std::uint32_t fork_generation() noexcept {
    return static_cast<std::uint32_t>(process_word.load(std::memory_order_acquire) >> 1);
}
inline bool shut_down() noexcept { return (process_word.load(std::memory_order_acquire) & 1u) != 0; }
// The word a pool born in `generation` expects while it may work.
constexpr std::uint64_t alive_word(std::uint32_t generation) noexcept { return std::uint64_t{generation} << 1; }
// True when `generation` is this process's (not a fork parent's).
inline bool same_process(std::uint32_t generation) noexcept { return generation == fork_generation(); }

inline void mark_shut_down() noexcept { process_word.fetch_or(1u, std::memory_order_acq_rel); }

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

// Why a pool of `generation` refuses work: the clear error for the caller.
[[noreturn]] inline void refuse_work(std::uint32_t generation, std::string_view pool_name) {
    if (!same_process(generation))
        throw usage_error("clpool: this " + std::string(pool_name) +
                          " pool was created before fork() in the parent process; a child process must "
                          "create its own pools (get_buffer_pool and select_device give fresh ones in the child)");
    throw usage_error("clpool: " + std::string(pool_name) +
                      " pool used after clpool::shutdown(); no pool accepts work once shutdown() has run");
}

}  // namespace clpool::detail
