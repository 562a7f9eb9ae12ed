// Process lifecycle: shutdown(), the registered queues finished at exit, what a fork child gets.
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/runtime/registry_list.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/platform/opencl.hpp>
#include <clpool/runtime/queue_registry.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

// What clpool does at each way a process ends (docs/DEVICES.md, "Lifecycle"):
//  - normal exit (return from main, exit()): every registered queue (those of
//    DeviceHandles and of get_*_pool) is finished by an atexit handler, for
//    at most set_exit_wait() / CLPOOL_EXIT_WAIT_MS (5 s) in all; then the
//    handler says on stderr which it left, and the exit goes on. No
//    OpenCL object is released: registries and handles are never destroyed.
//  - shutdown(): the same finish, then every registry pool gives its cache
//    back; from then on every pool refuses work with usage_error.
//  - fork(): the child starts a new generation. Pools, registries and
//    DeviceHandles made before the fork refuse work in the child and are
//    dropped without any OpenCL call; the child gets fresh registries.
//  - Ctrl+C: nothing unless install_interrupt_handler() was called
//    (runtime/interrupts.hpp; runtime/waits.hpp has waits it can interrupt).

namespace clpool {

// True once shutdown() has run in this process. Never throws.
inline bool is_shut_down() noexcept { return detail::shut_down(); }

// What shutdown() did.
struct ShutdownReport {
    std::size_t queues = 0;          // registered queues finished
    std::size_t queues_failed = 0;   // of which clFinish failed
    std::size_t bytes_released = 0;  // cache given back to the driver (and the host)
};

#ifdef CLPOOL_HAS_OPENCL
// clFinish on every registered queue (call before leaving the process by a
// path that skips atexit, e.g. _exit from a signal handler of your own).
// Returns the number of queues that failed to finish. Never throws. Blocks
// until the device is done; thread-safe.
inline std::size_t finish_registered_queues() noexcept {
    auto* queues = detail::queue_registry::existing();  // none made: nothing registered (and no allocation)
    return queues ? queues->finish_all() : 0;
}

// How long normal exit waits, in all, for the registered queues (default
// 5000 ms, or CLPOOL_EXIT_WAIT_MS); a queue still busy then is left, and
// stderr says so. Overrides the variable. Never throws; thread-safe.
inline void set_exit_wait(std::chrono::milliseconds wait) noexcept {
    detail::exit_wait_override_ms.store(std::max<std::int64_t>(0, wait.count()), std::memory_order_release);
}

// The queues finished at exit (not retained for the caller). Thread-safe.
inline std::vector<cl_command_queue> registered_queues() { return detail::queue_registry::instance().queues(); }
#endif

// Finishes every registered queue, then gives every registry pool's cache
// (get_*_pool, get_host_*_pool) back. Afterwards every pool, registry and
// device selection refuses work with usage_error, and handles still out free
// their buffers when released instead of caching them. Idempotent; never
// throws; blocks until the queues are done. Call it from one thread while no
// other thread allocates. Irreversible for this process (a fork child starts afresh).
inline ShutdownReport shutdown() noexcept {
    ShutdownReport r;
    detail::mark_shut_down();  // first: no pool caches a buffer from here on
#ifdef CLPOOL_HAS_OPENCL
    if (auto* queues = detail::queue_registry::existing()) {  // none made: nothing registered
        try {
            r.queues = queues->queues().size();
        } catch (...) {}
        r.queues_failed = queues->finish_all();
    }
#endif
    // Every registry made in this process (pools/registry.hpp,
    // pools/host_registry.hpp enrol themselves on first use).
    r.bytes_released = detail::trim_registries();
    return r;
}

}  // namespace clpool
