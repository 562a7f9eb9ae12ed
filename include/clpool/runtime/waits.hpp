// Waits for a queue or an event that a stop flag (Ctrl+C, request_interrupt()) or a timeout can end.
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/runtime/detail/interrupt_flag.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/platform/opencl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace clpool {

enum class WaitStatus : unsigned char {
    complete,     // every command queued before the wait has finished
    interrupted,  // the stop flag was set first; the commands keep running
    timed_out,    // the timeout passed first; the commands keep running
    failed,       // a command ended in error, or the driver refused the wait
};

constexpr const char* to_string(WaitStatus s) noexcept {
    switch (s) {
        case WaitStatus::complete: return "complete";
        case WaitStatus::interrupted: return "interrupted";
        case WaitStatus::timed_out: return "timed_out";
        default: return "failed";
    }
}

namespace detail {
// The time left of a budget started now, for WaitOptions::timeout as the
// budget runs down: a budget too long for the clock (milliseconds::max(),
// "as long as it takes") never runs out, where now + budget would overflow.
class wait_budget {
public:
    explicit wait_budget(std::chrono::milliseconds budget) noexcept
        : forever_(budget >= std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::time_point::max() - std::chrono::steady_clock::now())),
          deadline_(forever_ ? std::chrono::steady_clock::time_point::max()
                             : std::chrono::steady_clock::now() + budget) {}
    std::chrono::nanoseconds left() const noexcept {
        if (forever_) return std::chrono::nanoseconds::max();
        return std::max(std::chrono::nanoseconds(0),
                        std::chrono::nanoseconds(deadline_ - std::chrono::steady_clock::now()));
    }

private:
    bool forever_;
    std::chrono::steady_clock::time_point deadline_;
};
}  // namespace detail

struct WaitOptions {
    // Checked between polls; nullptr: clpool's flag (interrupt_requested()).
    const std::atomic<bool>* stop = nullptr;
    // Zero or less: poll once, then timed_out (unless already complete).
    std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
    // The longest sleep between two polls (they start at 20 us and double).
    // Zero or less counts as 1 us: a wait always sleeps between polls.
    std::chrono::microseconds max_poll = std::chrono::milliseconds(2);
};

// Waits for an event by polling its status (clGetEventInfo), never blocking
// in the driver, so the calling thread notices a stop flag or a timeout
// within max_poll. Never throws. Thread-safe.
inline WaitStatus wait_interruptible(cl_event event, const WaitOptions& options = {}) noexcept {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const std::atomic<bool>& stop = options.stop ? *options.stop : detail::interrupt_flag;
    const auto max_poll = std::max(options.max_poll, std::chrono::microseconds(1));  // never a busy loop
    auto sleep = std::chrono::microseconds(20);
    for (;;) {
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
            return WaitStatus::failed;
        if (status == CL_COMPLETE) return WaitStatus::complete;
        if (status < 0) return WaitStatus::failed;
        if (stop.load(std::memory_order_acquire)) return WaitStatus::interrupted;
        const auto elapsed = clock::now() - start;
        if (options.timeout != std::chrono::nanoseconds::max() && elapsed >= options.timeout)
            return WaitStatus::timed_out;
        std::this_thread::sleep_for(sleep);
        sleep = std::min<std::chrono::microseconds>(sleep * 2, max_poll);
    }
}

namespace detail {
// A marker after everything queued on `queue` so far, submitted; nullptr if refused.
inline cl_event submitted_marker(cl_command_queue queue) noexcept {
    cl_event marker = nullptr;
    if (clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) != CL_SUCCESS) return nullptr;
    clFlush(queue);  // submit, or a polled marker may never start
    return marker;
}
}  // namespace detail

// Waits for everything queued on `queue` so far (a marker's event), as
// wait_interruptible does: the calling thread (e.g. the main thread) is never
// stuck inside clFinish and returns `interrupted` soon after the stop flag
// is set, e.g. by Ctrl+C with install_interrupt_handler() or by a handler of
// your own calling request_interrupt(). Never throws. Thread-safe.
inline WaitStatus finish_interruptible(cl_command_queue queue, const WaitOptions& options = {}) noexcept {
    cl_event marker = detail::submitted_marker(queue);
    if (!marker) return WaitStatus::failed;
    const auto s = wait_interruptible(marker, options);
    clReleaseEvent(marker);
    return s;
}
inline WaitStatus finish_interruptible(const cl::CommandQueue& queue, const WaitOptions& options = {}) noexcept {
    return finish_interruptible(queue(), options);
}

}  // namespace clpool
#endif
