// clpool::Buffer: a pooled stand-in for cl::Buffer with the same constructor (docs/DROPIN.md).
#pragma once

#include <clpool/interop/detail/dropin_pools.hpp>
#include <clpool/core/stats.hpp>

#include <cstddef>
#include <optional>

namespace clpool {

// Stands where cl::Buffer stands: the same constructor arguments, and it is a
// cl::Buffer (setArg, every enqueue call, copies that share the object). Its
// memory comes from the pool for (context, flags) and goes back there when
// the driver deletes the object, after the last copy is gone. CL_MEM_SIZE
// reports the size asked for. Reuse is ordered by the queue: on one in-order
// queue the old owner's commands run before the new owner's. Drivers differ
// on whether deletion waits for queued commands (PoCL's does not), so an
// application that hands buffers between queues should release through the
// interposer or clpool::release_after(handle, queue) instead.
// CL_MEM_USE_HOST_PTR (the storage is the application's), CL_MEM_COPY_HOST_PTR
// (its write could not be ordered after a reused bucket's old owner; write on
// your queue instead), other rare flags and invalid arguments are handed to
// cl::Buffer's own constructor, so errors (and CL-HPP exceptions, if enabled)
// are the driver's. It is a sub-buffer of its bucket: createSubBuffer on it fails.
// Thread safety: as cl::Buffer. Pools are created on first use per (context,
// flags); each keeps its context alive, so those of at most 16 contexts are
// kept, the least recently used let go first (dropin_pools::max_contexts).
// Some drivers mishandle rectangular and image copies of sub-buffers
// (docs/DROPIN.md); the interposer, which hands out whole buffers, avoids them.
class Buffer : public cl::Buffer {
public:
    Buffer() = default;

    // As cl::Buffer(context, flags, size, host_ptr, err): *err is CL_SUCCESS
    // on success, else the driver's code (throws cl::Error instead with
    // CL_HPP_ENABLE_EXCEPTIONS, as cl::Buffer does).
    Buffer(const cl::Context& context, cl_mem_flags flags, cl::size_type size, void* host_ptr = nullptr,
           cl_int* err = nullptr) {
        if (cl_mem m = detail::dropin_pools::instance().create(context(), flags, size, host_ptr)) {
            cl::Buffer::operator=(cl::Buffer(m, false));  // adopt the creation reference
            if (err) *err = CL_SUCCESS;
        } else {
            cl::Buffer::operator=(cl::Buffer(context, flags, size, host_ptr, err));
        }
    }

    // As cl::Buffer(flags, size, host_ptr, err): on the default context.
    Buffer(cl_mem_flags flags, cl::size_type size, void* host_ptr = nullptr, cl_int* err = nullptr)
        : Buffer(cl::Context::getDefault(), flags, size, host_ptr, err) {}
};

// The statistics of the drop-in pool for (context, flags); nullopt if no
// buffer was made there yet.
inline std::optional<PoolStats> dropin_stats(const cl::Context& context, cl_mem_flags flags) {
    if (auto p = detail::dropin_pools::instance().find(context(), flags)) return p->stats();
    return std::nullopt;
}

}  // namespace clpool

// The C-callable pair (declared for C in <clpool/interop/dropin_c.h>). Define
// CLPOOL_DROPIN_IMPLEMENTATION in exactly one C++ file before including
// this header to emit them.
#ifdef CLPOOL_DROPIN_IMPLEMENTATION
#include <clpool/interop/dropin_c.h>  // the declarations these definitions must match
extern "C" {
// As clCreateBuffer, through the pools.
cl_mem clpool_create_buffer(cl_context context, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* errcode_ret) {
    cl_mem m = nullptr;
    try {  // nothing may unwind into C: the first call allocates the pools' set (std::bad_alloc)
        m = clpool::detail::dropin_pools::instance().create(context, flags, size, host_ptr);
    } catch (...) {
        m = nullptr;  // served unpooled, below
    }
    if (m) {
        if (errcode_ret) *errcode_ret = CL_SUCCESS;
        return m;
    }
    return clCreateBuffer(context, flags, size, host_ptr, errcode_ret);
}
// As clReleaseMemObject: the memory returns to its pool once the driver deletes the buffer.
cl_int clpool_release_buffer(cl_mem buffer) { return clReleaseMemObject(buffer); }
}
#endif
