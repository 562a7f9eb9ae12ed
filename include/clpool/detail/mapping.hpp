// Mapping pinned buffers into host memory on a queue of clpool's own, and unmapping them after given events.
#pragma once

#include <clpool/backends/opencl.hpp>

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace clpool::detail {

// A private in-order queue for map and unmap: a blocking map on the
// application's in-order queue would wait for all its earlier work (and stall
// the very pipeline it feeds). Creating one costs ~0.2 us on PoCL but far more
// on GPU drivers, so transfers lease one from side_queues instead.
// Throws driver_error.
inline cl::CommandQueue side_queue(const cl::Context& context, cl_device_id device) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(context(), device, 0, &err);
    opencl::check(err, "clCreateCommandQueue (clpool map queue)");
    return cl::CommandQueue(q, false);
}

// Side queues kept per (context, device) for reuse by later transfers. A queue
// comes back with the event of the last command a transfer put on it (its
// last unmap, which may wait for a copy held by the caller's wait_for events);
// acquire hands out only a queue whose last event completed, else makes a new
// one, so a transfer never waits behind another transfer's held unmaps (that
// could deadlock a thread that holds the gate). At most max_idle queues per
// key are kept. Never destroyed (new-ed), so no OpenCL call runs at exit; the
// kept queues hold their context alive for the life of the process.
// Thread-safe (one mutex, held only around the list, never around a driver
// call that may block).
class side_queues {
public:
    static side_queues& instance() {
        static auto* s = new side_queues;  // intentionally never deleted
        return *s;
    }

    // Returns an idle side queue for (context, device), creating one if none
    // is idle. Throws driver_error (creation failed).
    cl::CommandQueue acquire(const cl::Context& context, cl_device_id device) {
        {
            std::lock_guard lock(mutex_);
            auto it = idle_.find(key{context(), device});
            if (it != idle_.end()) {
                auto& list = it->second;
                for (std::size_t i = list.size(); i-- > 0;) {
                    if (!done(list[i].last)) continue;
                    cl::CommandQueue q = std::move(list[i].queue);
                    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
                    return q;
                }
            }
        }
        return side_queue(context, device);
    }

    // Hands q back; `last` is the event of the last command enqueued on it
    // (empty: the queue is idle). Never throws: a queue that cannot be kept
    // is simply released.
    void give_back(const cl::Context& context, cl_device_id device, cl::CommandQueue q, cl::Event last) noexcept {
        try {
            std::lock_guard lock(mutex_);
            auto& list = idle_[key{context(), device}];
            if (list.size() < max_idle) list.push_back(entry{std::move(q), std::move(last)});
        } catch (...) {
        }
    }

private:
    static constexpr std::size_t max_idle = 8;
    using key = std::pair<cl_context, cl_device_id>;
    struct entry {
        cl::CommandQueue queue;
        cl::Event last;
    };
    static bool done(const cl::Event& e) noexcept {
        if (!e()) return true;
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
            return false;  // unknown: do not risk a wait behind it
        return status <= CL_COMPLETE;
    }
    side_queues() = default;
    std::mutex mutex_;
    std::map<key, std::vector<entry>> idle_;
};

// A side queue leased for one transfer; returned on give_back(last), or
// released (not reused) if the transfer ends by an exception.
class side_lease {
public:
    side_lease(const cl::Context& context, cl_device_id device)
        : context_(context), device_(device), queue_(side_queues::instance().acquire(context, device)) {}
    side_lease(const side_lease&) = delete;
    side_lease& operator=(const side_lease&) = delete;
    const cl::CommandQueue& queue() const noexcept { return queue_; }
    void give_back(cl::Event last) noexcept {
        side_queues::instance().give_back(context_, device_, std::move(queue_), std::move(last));
    }

private:
    cl::Context context_;
    cl_device_id device_;
    cl::CommandQueue queue_;
};

// Maps the first n bytes of a pinned (ALLOC_HOST_PTR) buffer for host writes
// and reads, blocking; returns the host pointer (on NVIDIA: the pinned memory
// itself). Throws driver_error.
inline void* map_pinned(const cl::CommandQueue& q, const cl::Buffer& b, std::size_t n) {
    cl_int err = CL_SUCCESS;
    // WRITE_INVALIDATE: the old content is never wanted, so no driver copies it in.
    void* p = clEnqueueMapBuffer(q(), b(), CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0, nullptr, nullptr, &err);
    opencl::check(err, "clEnqueueMapBuffer (pinned staging buffer)");
    return p;
}

// Enqueues a non-blocking map of the first n bytes of a pinned buffer (as
// map_pinned) and returns the pointer; *mapped gets the map's event, which
// must complete before the pointer is used. Several maps on one in-order queue
// then cost one wait instead of one round trip each. Throws driver_error.
inline void* map_pinned_async(const cl::CommandQueue& q, const cl::Buffer& b, std::size_t n, cl::Event& mapped) {
    cl_int err = CL_SUCCESS;
    cl_event ev = nullptr;
    void* p = clEnqueueMapBuffer(q(), b(), CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0, nullptr, &ev, &err);
    opencl::check(err, "clEnqueueMapBuffer (pinned staging buffer)");
    mapped = cl::Event(ev, false);
    return p;
}

// Enqueues the unmap of p after `after` (may be null) and returns its event.
// Never throws: if the unmap cannot be enqueued it waits for `after` and the
// queue, and returns an empty event (the buffer then stays mapped: on PoCL a
// leak of that buffer, never a use after free).
inline cl::Event unmap_after(const cl::CommandQueue& q, const cl::Buffer& b, void* p, const cl::Event* after) noexcept {
    cl_event wait = after ? (*after)() : nullptr;
    cl_event done = nullptr;
    if (clEnqueueUnmapMemObject(q(), b(), p, wait ? 1 : 0, wait ? &wait : nullptr, &done) == CL_SUCCESS)
        return cl::Event(done, false);
    if (wait) clWaitForEvents(1, &wait);
    clFinish(q());
    return cl::Event();
}

}  // namespace clpool::detail
