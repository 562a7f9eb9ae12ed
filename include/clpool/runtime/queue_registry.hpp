// The queues clpool finishes at normal exit and in shutdown(): those of DeviceHandles and registry pools.
#pragma once

#include <clpool/platform/opencl.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/runtime/config.hpp>
#include <clpool/runtime/waits.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <vector>

namespace clpool::detail {

// set_exit_wait()'s value in milliseconds; negative: CLPOOL_EXIT_WAIT_MS or its default.
inline std::atomic<std::int64_t> exit_wait_override_ms{-1};

// How long normal exit waits for the registered queues, in all. Never throws:
// an invalid CLPOOL_EXIT_WAIT_MS is reported on stderr and the default used.
inline std::chrono::milliseconds exit_wait() noexcept {
    const std::int64_t set = exit_wait_override_ms.load(std::memory_order_acquire);
    if (set >= 0) return std::chrono::milliseconds(set);
    try {
        return std::chrono::milliseconds(config::exit_wait_ms());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s; waiting 5000 ms at exit\n", e.what());
    }
    return std::chrono::milliseconds(5000);
}

// Holds one reference to each registered queue for the life of the process
// (or until its context's pools are released). Never destroyed, so no OpenCL
// call runs from a static destructor; a fork child gets a fresh, empty one
// and never touches the parent's queues.
class queue_registry {
public:
    // The registry of this process (fork generation). Thread-safe.
    static queue_registry& instance() {
        queue_registry* r = current().load(std::memory_order_acquire);
        const auto gen = fork_generation();
        if (r && r->generation_ == gen) return *r;
        auto* fresh = new queue_registry(gen);  // the parent's is leaked whole in a fork child
        if (current().compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return *fresh;
        delete fresh;  // another thread won; r is its registry
        return *r;
    }

    // Registers q (retaining it) unless it is already registered. The first
    // registration in a process registers the exit handler. Never throws: a
    // queue that cannot be recorded (out of host memory) is not finished at
    // exit. Returns whether q is registered now.
    bool add(cl_command_queue q) noexcept {
        if (!q) return false;
        // Registered after the first OpenCL call (a queue exists, so the ICD
        // loader and the driver are loaded and initialised): exit() runs
        // atexit handlers in reverse order of registration, so this one runs
        // before the destructors the loader and driver registered earlier,
        // and before their DSO finalisers, which _dl_fini runs last.
        arm_exit_mark();  // runs after finish_at_exit, registered next
        static const bool registered = std::atexit(&finish_at_exit) == 0;
        (void)registered;
        std::lock_guard lock(mutex_);
        if (std::find(queues_.begin(), queues_.end(), q) != queues_.end()) return true;
        try {
            queues_.push_back(q);
        } catch (...) {
            return false;
        }
        clRetainCommandQueue(q);
        return true;
    }

    // Releases the registered queues of ctx (their context is going away).
    void forget(cl_context ctx) noexcept {
        std::vector<cl_command_queue> doomed;
        {
            std::lock_guard lock(mutex_);
            auto it = std::stable_partition(queues_.begin(), queues_.end(),
                                            [&](cl_command_queue q) { return context_of(q) != ctx; });
            try {
                doomed.assign(it, queues_.end());
            } catch (...) {
                return;  // keep them registered: a leak, never a dangling queue
            }
            queues_.erase(it, queues_.end());
        }
        for (auto q : doomed) clReleaseCommandQueue(q);
    }

    // clFinish on every registered queue, outside the lock. Returns the
    // number of queues that failed to finish. Never throws.
    std::size_t finish_all() noexcept {
        const auto qs = retained_copy();
        std::size_t failed = 0;
        for (auto q : qs) {
            failed += clFinish(q) != CL_SUCCESS;
            clReleaseCommandQueue(q);
        }
        return failed;
    }

    // As finish_all, but waits `budget` in all (polling, never inside
    // clFinish): a queue still busy after that is left, counted, and named on
    // stderr. Returns the number of queues left or failed. Never throws.
    std::size_t finish_all_within(std::chrono::milliseconds budget) noexcept {
        const wait_budget left(budget);
        const auto qs = retained_copy();
        // Every queue's marker first: each queue gets the whole budget, and
        // one found busy is checked, never assumed, once the budget is spent.
        std::vector<cl_event> markers;
        try {
            markers.resize(qs.size(), nullptr);
        } catch (...) {}  // no room: each marker comes at its queue's turn
        for (std::size_t i = 0; i < markers.size(); ++i) markers[i] = submitted_marker(qs[i]);
        static const std::atomic<bool> never{false};
        std::size_t failed = 0, busy = 0;
        for (std::size_t i = 0; i < qs.size(); ++i) {
            WaitOptions w;
            w.stop = &never;
            w.timeout = left.left();
            const cl_event marker = i < markers.size() ? markers[i] : submitted_marker(qs[i]);
            const auto status = marker ? wait_interruptible(marker, w) : WaitStatus::failed;
            if (marker) clReleaseEvent(marker);
            busy += status == WaitStatus::timed_out;
            failed += status == WaitStatus::failed;
            clReleaseCommandQueue(qs[i]);
        }
        if (busy)
            std::fprintf(stderr,
                         "clpool: at exit, %zu of %zu registered command queues still busy after %lld ms "
                         "(CLPOOL_EXIT_WAIT_MS or clpool::set_exit_wait); exiting without waiting for them\n",
                         busy, qs.size(), static_cast<long long>(budget.count()));
        return failed + busy;
    }

    // A copy of the registered queues (not retained). Thread-safe.
    std::vector<cl_command_queue> queues() const {
        std::lock_guard lock(mutex_);
        return queues_;
    }

    // A copy of the registered queues, each retained for the caller, who
    // releases them: release_pools may forget one meanwhile. Throws bad_alloc.
    std::vector<cl_command_queue> retained() const {
        std::lock_guard lock(mutex_);
        std::vector<cl_command_queue> qs = queues_;
        for (auto q : qs) clRetainCommandQueue(q);
        return qs;
    }

    // The registry of this process if one was made, without making one.
    static queue_registry* existing() noexcept {
        queue_registry* r = current().load(std::memory_order_acquire);
        return r && r->generation_ == fork_generation() ? r : nullptr;
    }

private:
    explicit queue_registry(std::uint32_t gen) : generation_(gen) {}

    static std::atomic<queue_registry*>& current() noexcept {
        static std::atomic<queue_registry*> r{nullptr};  // trivially destructible
        return r;
    }

    // As retained(), but none (nothing finished) where there is no room for the copy.
    std::vector<cl_command_queue> retained_copy() const noexcept {
        try {
            return retained();
        } catch (...) {
            return {};
        }
    }

    static cl_context context_of(cl_command_queue q) noexcept {
        cl_context ctx = nullptr;
        clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr);
        return ctx;
    }

    // Normal exit: finish what is still queued so the driver is not torn
    // down under running commands, for at most exit_wait(): a command that
    // waits on an event nobody will set must not hang the exit. A fork child
    // whose registry is the parent's finishes nothing.
    static void finish_at_exit() noexcept {
        if (auto* r = existing()) r->finish_all_within(exit_wait());
    }

    const std::uint32_t generation_;
    mutable std::mutex mutex_;
    std::vector<cl_command_queue> queues_;
};

}  // namespace clpool::detail
