// The reuse-ordering protocol's way to the driver: its Driver table over the real OpenCL calls.
#include "reuse_order.hpp"

#include <clpool/pools/opencl_pools.hpp>

namespace clpool::interpose::reuse {
namespace {

// Flushed: an unflushed marker might never complete.
cl_event marker(cl_command_queue q) {
    cl_event marker = nullptr;
    if (clEnqueueMarkerWithWaitList(q, 0, nullptr, &marker) != CL_SUCCESS) return nullptr;
    clFlush(q);
    return marker;
}

cl_event barrier(cl_command_queue q) {
    cl_event barrier = nullptr;
    if (clEnqueueBarrierWithWaitList(q, 0, nullptr, &barrier) != CL_SUCCESS) return nullptr;
    clFlush(q);
    return barrier;
}

void wait_behind(cl_command_queue q, cl_uint n, const cl_event* events) {
    clEnqueueBarrierWithWaitList(q, n, events, nullptr);
}

void finish(cl_command_queue q) { clFinish(q); }
bool complete(cl_event e) { return OpenCLBackend::event_complete(cl::Event(e, true)); }
bool retain(cl_event e) { return clRetainEvent(e) == CL_SUCCESS; }
void release(cl_event e) { clReleaseEvent(e); }

constexpr Driver table{marker, barrier, wait_behind, finish, complete, retain, release};

}  // namespace

const Driver& opencl_driver() noexcept { return table; }

}  // namespace clpool::interpose::reuse
