// Process lifecycle: shutdown(), queues finished at exit, fork safety, and queue waits Ctrl+C can interrupt.
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/core/detail/process_state.hpp>
#include <clpool/runtime/detail/registry_list.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/backends/opencl.hpp>
#include <clpool/runtime/detail/queue_registry.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <csignal>
#include <cerrno>
#include <semaphore.h>
#include <unistd.h>
#define CLPOOL_HAS_INTERRUPT_HANDLER 1
#endif

// What clpool does at each way a process ends (docs/DEVICES.md, "Lifecycle"):
//  - normal exit (return from main, exit()): every registered queue (those of
//    DeviceHandles and of get_*_pool) is finished by an atexit handler. No
//    OpenCL object is released: registries and handles are never destroyed.
//  - shutdown(): the same finish, then every registry pool gives its cache
//    back; from then on every pool refuses work with usage_error.
//  - fork(): the child starts a new generation. Pools, registries and
//    DeviceHandles made before the fork refuse work in the child and are
//    dropped without any OpenCL call; the child gets fresh registries.
//  - Ctrl+C: nothing unless install_interrupt_handler() was called.

namespace clpool {

// True once shutdown() has run in this process. Never throws.
inline bool is_shut_down() noexcept { return detail::shut_down(); }

// What shutdown() did.
struct shutdown_report {
    std::size_t queues = 0;          // registered queues finished
    std::size_t queues_failed = 0;   // of which clFinish failed
    std::size_t bytes_released = 0;  // cache given back to the driver (and the host)
};

#ifdef CLPOOL_HAS_OPENCL
// clFinish on every registered queue (call before leaving the process by a
// path that skips atexit, e.g. _exit from a signal handler of your own).
// Returns the number of queues that failed to finish. Never throws. Blocks
// until the device is done; thread-safe.
inline std::size_t finish_registered_queues() noexcept { return detail::queue_registry::instance().finish_all(); }

// The queues finished at exit (not retained for the caller). Thread-safe.
inline std::vector<cl_command_queue> registered_queues() { return detail::queue_registry::instance().queues(); }
#endif

// Finishes every registered queue, then gives every registry pool's cache
// (get_*_pool, get_host_*_pool) back. Afterwards every pool, registry and
// device selection refuses work with usage_error, and handles still out free
// their buffers when released instead of caching them. Idempotent; never
// throws; blocks until the queues are done. Call it from one thread while no
// other thread allocates. Irreversible for this process (a fork child starts afresh).
inline shutdown_report shutdown() noexcept {
    shutdown_report r;
    detail::mark_shut_down();  // first: no pool caches a buffer from here on
#ifdef CLPOOL_HAS_OPENCL
    auto& queues = detail::queue_registry::instance();
    try {
        r.queues = queues.queues().size();
    } catch (...) {
    }
    r.queues_failed = queues.finish_all();
#endif
    // Every registry made in this process (pools/registry.hpp,
    // pools/host_registry.hpp enrol themselves on first use).
    r.bytes_released = detail::trim_registries();
    return r;
}

namespace detail {
// Set by the opt-in handler or request_interrupt(); lock-free, so a signal
// handler may set it.
inline std::atomic<bool> interrupt_flag{false};
static_assert(std::atomic<bool>::is_always_lock_free);
}  // namespace detail

// Whether Ctrl+C (with install_interrupt_handler) or request_interrupt() has
// asked the program to stop. Never throws; async-signal-safe.
inline bool interrupt_requested() noexcept { return detail::interrupt_flag.load(std::memory_order_acquire); }
// Sets the flag interruptible waits watch by default: for a SIGINT handler
// of your own. Async-signal-safe.
inline void request_interrupt() noexcept { detail::interrupt_flag.store(true, std::memory_order_release); }
// Clears it (after the program has handled the request). Never throws.
inline void clear_interrupt() noexcept { detail::interrupt_flag.store(false, std::memory_order_release); }

#ifdef CLPOOL_HAS_OPENCL
enum class wait_status : unsigned char {
    complete,     // every command queued before the wait has finished
    interrupted,  // the stop flag was set first; the commands keep running
    timed_out,    // the timeout passed first; the commands keep running
    failed,       // a command ended in error, or the driver refused the wait
};

constexpr const char* to_string(wait_status s) noexcept {
    switch (s) {
        case wait_status::complete: return "complete";
        case wait_status::interrupted: return "interrupted";
        case wait_status::timed_out: return "timed_out";
        default: return "failed";
    }
}

struct wait_options {
    // Checked between polls; nullptr: clpool's flag (interrupt_requested()).
    const std::atomic<bool>* stop = nullptr;
    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
    // The longest sleep between two polls (they start at 20 us and double).
    std::chrono::microseconds max_poll = std::chrono::milliseconds(2);
};

// Waits for an event by polling its status (clGetEventInfo), never blocking
// in the driver, so the calling thread notices a stop flag or a timeout
// within max_poll. Never throws. Thread-safe.
inline wait_status wait_interruptible(cl_event event, const wait_options& options = {}) noexcept {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const std::atomic<bool>& stop = options.stop ? *options.stop : detail::interrupt_flag;
    auto sleep = std::chrono::microseconds(20);
    for (;;) {
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
            return wait_status::failed;
        if (status == CL_COMPLETE) return wait_status::complete;
        if (status < 0) return wait_status::failed;
        if (stop.load(std::memory_order_acquire)) return wait_status::interrupted;
        const auto elapsed = clock::now() - start;
        if (options.timeout != std::chrono::nanoseconds::max() && elapsed >= options.timeout)
            return wait_status::timed_out;
        std::this_thread::sleep_for(sleep);
        sleep = std::min<std::chrono::microseconds>(sleep * 2, options.max_poll);
    }
}

// Waits for everything queued on `queue` so far (a marker's event), as
// wait_interruptible does: the calling thread (e.g. the main thread) is never
// stuck inside clFinish and returns `interrupted` soon after the stop flag
// is set, e.g. by Ctrl+C with install_interrupt_handler() or by a handler of
// your own calling request_interrupt(). Never throws. Thread-safe.
inline wait_status finish_interruptible(cl_command_queue queue, const wait_options& options = {}) noexcept {
    cl_event marker = nullptr;
    if (clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) != CL_SUCCESS) return wait_status::failed;
    clFlush(queue);  // submit, or a polled marker may never start
    const auto s = wait_interruptible(marker, options);
    clReleaseEvent(marker);
    return s;
}
inline wait_status finish_interruptible(const cl::CommandQueue& queue, const wait_options& options = {}) noexcept {
    return finish_interruptible(queue(), options);
}
#endif

struct interrupt_handler_options {
    // How long the first Ctrl+C waits for the registered queues before the
    // process leaves with _exit(exit_code).
    std::chrono::milliseconds grace = std::chrono::seconds(3);
    int exit_code = 130;  // 128 + SIGINT, what a shell reports for Ctrl+C
    // SIGTERM: finish the registered queues (at most `grace`), then the
    // previous SIGTERM disposition (by default: the process ends).
    bool handle_sigterm = true;
};

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
namespace detail {

struct interrupt_handler {
    interrupt_handler_options options;
    sem_t wake;                              // sem_post is async-signal-safe
    std::atomic<int> signal_received{0};
    struct sigaction previous_int {}, previous_term {};

    static std::atomic<interrupt_handler*>& current() noexcept {
        static std::atomic<interrupt_handler*> h{nullptr};
        return h;
    }

    // Runs in signal context: only atomics, sem_post and _exit.
    static void on_signal(int sig) noexcept {
        interrupt_handler* h = current().load(std::memory_order_acquire);
        if (!h) return;
        if (sig == SIGINT && interrupt_flag.exchange(true, std::memory_order_acq_rel))
            _exit(h->options.exit_code);  // second Ctrl+C: leave now, the OS reclaims device memory
        int expected = 0;
        h->signal_received.compare_exchange_strong(expected, sig, std::memory_order_acq_rel);
        sem_post(&h->wake);
    }

    // Waits, at most `grace`, for the registered queues. True if they finished.
    bool drain() noexcept {
#ifdef CLPOOL_HAS_OPENCL
        static const std::atomic<bool> never{false};
        const auto deadline = std::chrono::steady_clock::now() + options.grace;
        auto* qr = queue_registry::existing();
        if (!qr) return true;
        std::vector<cl_command_queue> qs;
        try {
            qs = qr->queues();
        } catch (...) {
            return false;
        }
        for (auto q : qs) {
            wait_options w;
            w.stop = &never;
            w.timeout = std::max(std::chrono::nanoseconds(0), std::chrono::nanoseconds(deadline - std::chrono::steady_clock::now()));
            if (finish_interruptible(q, w) != wait_status::complete) return false;
        }
#endif
        return true;
    }

    // The watchdog: normal code, may call the driver.
    void run() noexcept {
        for (;;) {
            while (sem_wait(&wake) != 0 && errno == EINTR) {
            }
            const int sig = signal_received.exchange(0, std::memory_order_acq_rel);
            if (sig == SIGINT) {
                // First Ctrl+C: the program sees interrupt_requested() and may
                // save its state; if the device is still busy after the grace
                // window, leave, and let the OS reclaim the device memory.
                if (!drain()) _exit(options.exit_code);
            } else if (sig == SIGTERM) {
                drain();
                sigaction(SIGTERM, &previous_term, nullptr);
                raise(SIGTERM);
            }
        }
    }
};

}  // namespace detail

// Opt-in Ctrl+C handling, after the earlier library's contract:
//  - first SIGINT: interrupt_requested() becomes true (interruptible waits
//    return `interrupted`, the program can save its state and exit); a
//    watchdog thread waits up to `grace` for the registered queues and, if
//    they are still busy, ends the process with _exit(exit_code);
//  - second SIGINT: _exit(exit_code) at once;
//  - SIGTERM (if handle_sigterm): the registered queues get up to `grace`
//    to finish, then the previous SIGTERM disposition runs.
// clpool installs nothing unless this is called. Returns false if a handler
// was already installed (the first options stay). Throws std::system_error
// if the watchdog thread cannot start. In a fork child the watchdog is
// gone: a first Ctrl+C only sets the flag, a second still exits.
inline bool install_interrupt_handler(const interrupt_handler_options& options = {}) {
    static std::mutex m;
    std::lock_guard lock(m);
    if (detail::interrupt_handler::current().load()) return false;
    auto* h = new detail::interrupt_handler;  // never destroyed: signals may come until the end
    h->options = options;
    sem_init(&h->wake, 0, 0);
    std::thread([h] { h->run(); }).detach();
    detail::interrupt_handler::current().store(h, std::memory_order_release);
    struct sigaction sa {};
    sa.sa_handler = &detail::interrupt_handler::on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &h->previous_int);
    if (options.handle_sigterm) sigaction(SIGTERM, &sa, &h->previous_term);
    return true;
}
#endif

}  // namespace clpool
