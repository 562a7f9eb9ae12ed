// Ctrl+C: the interrupt flag (interrupt_requested, request_interrupt, clear_interrupt) and the opt-in handler.
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/runtime/detail/interrupt_flag.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/runtime/queue_registry.hpp>
#include <clpool/runtime/waits.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
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

namespace clpool {

// Whether Ctrl+C (with install_interrupt_handler) or request_interrupt() has
// asked the program to stop. Never throws; async-signal-safe.
inline bool interrupt_requested() noexcept { return detail::interrupt_flag.load(std::memory_order_acquire); }
// Sets the flag interruptible waits watch by default: for a SIGINT handler
// of your own. Async-signal-safe.
inline void request_interrupt() noexcept { detail::interrupt_flag.store(true, std::memory_order_release); }
// Clears it (after the program has handled the request). Never throws.
inline void clear_interrupt() noexcept { detail::interrupt_flag.store(false, std::memory_order_release); }

struct InterruptHandlerOptions {
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
    InterruptHandlerOptions options;
    sem_t wake;                              // sem_post is async-signal-safe
    // Every signal received and not yet handled, one bit each: a SIGTERM
    // that follows a SIGINT before the watchdog has looked is kept, not lost.
    std::atomic<unsigned> pending{0};
    static constexpr unsigned int_bit = 1u, term_bit = 2u;
    static_assert(std::atomic<unsigned>::is_always_lock_free);
    struct sigaction previous_int{}, previous_term{};
    std::uint32_t generation = 0;  // the process that installed it (its watchdog runs there only)

    static std::atomic<interrupt_handler*>& current() noexcept {
        static std::atomic<interrupt_handler*> h{nullptr};
        return h;
    }

    // Runs in signal context: only atomics, sem_post and _exit.
    static void on_signal(int sig) noexcept {
        interrupt_handler* h = current().load(std::memory_order_acquire);
        if (!h) return;
        if (sig == SIGTERM && h->generation != fork_generation()) {  // a fork child: no watchdog to wake
            sigaction(SIGTERM, &h->previous_term, nullptr);
            raise(SIGTERM);  // delivered with the previous disposition once this handler returns
            return;
        }
        if (sig == SIGINT && interrupt_flag.exchange(true, std::memory_order_acq_rel))
            _exit(h->options.exit_code);  // second Ctrl+C: leave now, the OS reclaims device memory
        h->pending.fetch_or(sig == SIGINT ? int_bit : term_bit, std::memory_order_acq_rel);
        sem_post(&h->wake);
    }

    // Waits, at most `grace`, for the registered queues. True if they finished.
    bool drain() noexcept {
#ifdef CLPOOL_HAS_OPENCL
        static const std::atomic<bool> never{false};
        const wait_budget left(options.grace);
        auto* qr = queue_registry::existing();
        if (!qr) return true;
        std::vector<cl_command_queue> qs;
        try {
            qs = qr->retained();  // the program may release a context's pools and queues meanwhile
        } catch (...) {
            return false;
        }
        bool done = true;
        for (auto q : qs) {
            WaitOptions w;
            w.stop = &never;
            w.timeout = left.left();
            done = done && finish_interruptible(q, w) == WaitStatus::complete;
            clReleaseCommandQueue(q);
        }
        return done;
#else
        return true;
#endif
    }

    // The watchdog: normal code, may call the driver.
    void run() noexcept {
        for (;;) {
            while (sem_wait(&wake) != 0 && errno == EINTR) {}
            const unsigned sigs = pending.exchange(0, std::memory_order_acq_rel);
            // SIGTERM first when both came: it asks for the end of the
            // process, which the previous disposition (by default) brings.
            if (sigs & term_bit) {
                drain();
                sigaction(SIGTERM, &previous_term, nullptr);
                raise(SIGTERM);
            }
            if (sigs & int_bit) {
                // First Ctrl+C: the program sees interrupt_requested() and may
                // save its state; if the device is still busy after the grace
                // window, leave, and let the OS reclaim the device memory.
                if (!drain()) _exit(options.exit_code);
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
// Every signal is kept until the watchdog handles it: a SIGTERM right after
// a SIGINT still ends the process (SIGTERM is handled first when both wait).
// A signal the process inherited as ignored (SIG_IGN: a background job of a
// non-interactive shell, nohup) is left ignored.
// clpool installs nothing unless this is called. Returns false if a handler
// was already installed (the first options stay). Throws std::system_error
// if the watchdog thread cannot start. In a fork child the watchdog is
// gone: a first Ctrl+C only sets the flag, a second still exits, and a
// SIGTERM goes straight to the previous disposition.
inline bool install_interrupt_handler(const InterruptHandlerOptions& options = {}) {
    static std::mutex m;
    std::lock_guard lock(m);
    if (detail::interrupt_handler::current().load()) return false;
    auto* h = new detail::interrupt_handler;  // never destroyed: signals may come until the end
    h->options = options;
    h->generation = detail::birth_generation();
    sem_init(&h->wake, 0, 0);
    std::thread([h] { h->run(); }).detach();
    detail::interrupt_handler::current().store(h, std::memory_order_release);
    struct sigaction sa{};
    sa.sa_handler = &detail::interrupt_handler::on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // A signal inherited as ignored (a background job, nohup) stays ignored,
    // as shells and CPython do: whoever started us chose that.
    const auto install_unless_ignored = [&sa](int sig, struct sigaction* previous) {
        sigaction(sig, nullptr, previous);
        if (previous->sa_handler != SIG_IGN) sigaction(sig, &sa, previous);
    };
    install_unless_ignored(SIGINT, &h->previous_int);
    if (options.handle_sigterm) install_unless_ignored(SIGTERM, &h->previous_term);
    return true;
}
#endif

}  // namespace clpool
