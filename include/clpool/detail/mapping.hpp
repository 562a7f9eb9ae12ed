// Mapping pinned buffers into host memory on a queue of clpool's own, and unmapping them after given events.
#pragma once

#include <clpool/backends/opencl.hpp>

#include <cstddef>

namespace clpool::detail {

// A private in-order queue for map and unmap: a blocking map on the
// application's in-order queue would wait for all its earlier work (and stall
// the very pipeline it feeds). Creating one costs ~0.2 us on PoCL; it is made
// per transfer (not cached) so clpool never keeps a context alive.
// Throws driver_error.
inline cl::CommandQueue side_queue(const cl::Context& context, cl_device_id device) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(context(), device, 0, &err);
    opencl::check(err, "clCreateCommandQueue (clpool map queue)");
    return cl::CommandQueue(q, false);
}

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
