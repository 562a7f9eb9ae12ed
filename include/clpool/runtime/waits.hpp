// Waits for a queue or an event that a stop flag (Ctrl+C, request_interrupt()) or a timeout can end.
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/runtime/detail/interrupt_flag.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/backends/opencl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace clpool {

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

}  // namespace clpool
#endif
