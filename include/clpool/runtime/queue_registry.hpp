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

// Holds one reference to each registered queue until its context's pools are
// released, or until the application has released the queue and nothing is
// pending on it (prune(), run by add() as the list grows): a program that
// makes and drops queues keeps only those still in use. Never destroyed, so
// no OpenCL call runs from a static destructor; a fork child gets a fresh,
// empty one and never touches the parent's queues.
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
        if (std::find_if(queues_.begin(), queues_.end(), [q](const entry& e) { return e.queue == q; }) != queues_.end())
            return true;
        // Each prune walks the list once and the next waits until it has
        // doubled: the walks cost O(1) per registration, amortised, and the
        // list stays within twice the queues still in use (plus a floor).
        if (queues_.size() >= prune_at_) {
            prune_locked();
            prune_at_ = std::max(min_prune_at, 2 * queues_.size());
        }
        try {
            queues_.push_back({q, nullptr});
        } catch (...) {
            return false;
        }
        clRetainCommandQueue(q);
        return true;
    }

    // Lets go of every registered queue that only this registry still holds
    // (the application released it) and that has nothing pending: the first
    // prune that finds it alone enqueues a marker, a later one that finds the
    // marker complete releases it. A queue still busy stays. Returns the
    // number let go. Never throws.
    std::size_t prune() noexcept {
        std::lock_guard lock(mutex_);
        return prune_locked();
    }

    // Queues looked at by prunes so far, in all (the work registration does
    // beyond its own queue), and queues let go. Thread-safe.
    std::size_t examined() const noexcept { return examined_.load(std::memory_order_relaxed); }
    std::size_t let_go() const noexcept { return let_go_.load(std::memory_order_relaxed); }

    // Releases the registered queues of ctx (their context is going away).
    void forget(cl_context ctx) noexcept {
        std::vector<cl_command_queue> doomed;
        {
            std::lock_guard lock(mutex_);
            auto it = std::stable_partition(queues_.begin(), queues_.end(),
                                            [&](const entry& e) { return context_of(e.queue) != ctx; });
            try {
                doomed.reserve(static_cast<std::size_t>(queues_.end() - it));
            } catch (...) {
                return;  // keep them registered: a leak, never a dangling queue
            }
            for (auto e = it; e != queues_.end(); ++e) {
                doomed.push_back(e->queue);
                if (e->marker) clReleaseEvent(e->marker);
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
        std::vector<cl_command_queue> qs;
        qs.reserve(queues_.size());
        for (const auto& e : queues_) qs.push_back(e.queue);
        return qs;
    }

    // A copy of the registered queues, each retained for the caller, who
    // releases them: release_pools may forget one meanwhile. Throws bad_alloc.
    std::vector<cl_command_queue> retained() const {
        std::lock_guard lock(mutex_);
        std::vector<cl_command_queue> qs;
        qs.reserve(queues_.size());
        for (const auto& e : queues_) qs.push_back(e.queue);
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

    static constexpr std::size_t min_prune_at = 64;

    // A registered queue, and the marker a prune left on it once only the
    // registry held it (a marker just enqueued is rarely complete at once).
    struct entry {
        cl_command_queue queue;
        cl_event marker;
    };

    // prune() under the lock: the reference count is read where no other
    // thread of this registry can take one (retained() copies under it), and
    // a queue only the registry holds can gain no reference but through it,
    // so once seen alone it stays the registry's alone. The driver calls
    // (queries, and a marker per candidate) never wait.
    std::size_t prune_locked() noexcept {
        examined_.fetch_add(queues_.size(), std::memory_order_relaxed);
        std::size_t out = 0;
        for (std::size_t in = 0; in < queues_.size(); ++in) {
            entry& e = queues_[in];
            if (!let_go_of(e)) queues_[out++] = e;
        }
        const std::size_t n = queues_.size() - out;
        queues_.resize(out);
        let_go_.fetch_add(n, std::memory_order_relaxed);
        return n;
    }

    // Whether e's queue was let go (released, with its marker).
    static bool let_go_of(entry& e) noexcept {
        if (!e.marker) {
            cl_uint refs = 0;
            if (clGetCommandQueueInfo(e.queue, CL_QUEUE_REFERENCE_COUNT, sizeof refs, &refs, nullptr) != CL_SUCCESS ||
                refs != 1)
                return false;  // still the application's (or the query failed: keep it)
            // Everything queued so far, in order or not, comes before it.
            if (clEnqueueMarkerWithWaitList(e.queue, 0, nullptr, &e.marker) != CL_SUCCESS) {
                e.marker = nullptr;
                return false;
            }
            clFlush(e.queue);  // submitted: an idle queue's marker may be done at once, else by a later prune
        }
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(e.marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) !=
                CL_SUCCESS ||
            status > CL_COMPLETE)
            return false;  // still pending: looked at again next time
        // Complete, or failed (negative): nothing of it runs any more.
        clReleaseEvent(e.marker);
        clReleaseCommandQueue(e.queue);  // the last reference: the queue goes
        return true;
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
    std::vector<entry> queues_;
    std::size_t prune_at_ = min_prune_at;  // the list's size at which add() prunes next
    std::atomic<std::size_t> examined_{0}, let_go_{0};
};

}  // namespace clpool::detail
