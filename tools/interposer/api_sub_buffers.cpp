// Sub-buffers of a pooled buffer: checked against the size the application asked (the driver
// sees the larger bucket), made by the driver, and tracked so the parent's bucket waits for them.
#include "next.hpp"
#include "state.hpp"

#include <new>

namespace clpool::interpose::core {

cl_mem create_sub_buffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type, const void* info, cl_int* err) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(parent);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clCreateSubBuffer(parent, flags, type, info, err);
    }
    MemRec* rec = it->second.get();
    auto fail = [&](cl_int code) -> cl_mem {
        if (err) *err = code;
        return nullptr;
    };
    if (!alive(*rec) || rec->parent) return fail(CL_INVALID_MEM_OBJECT);  // freed, or a sub-buffer's sub-buffer
    if (type != CL_BUFFER_CREATE_TYPE_REGION || !info) return fail(CL_INVALID_VALUE);
    const auto* region = static_cast<const cl_buffer_region*>(info);
    if (region->size == 0) return fail(CL_INVALID_BUFFER_SIZE);
    if (region->origin > rec->size || region->size > rec->size - region->origin) return fail(CL_INVALID_VALUE);
    cl_mem sub = next().clCreateSubBuffer(parent, flags, type, info, err);
    if (!sub) return nullptr;
    try {
        auto owned = std::make_unique<MemRec>();
        owned->mem = sub;
        owned->ctx = rec->ctx;
        owned->flags = flags;
        owned->size = region->size;
        owned->parent = rec;
        st.mems[sub] = std::move(owned);
    } catch (const std::bad_alloc&) {  // untracked, it would not hold its parent: the driver takes it back
        lock.unlock();
        next().clReleaseMemObject(sub);
        return fail(CL_OUT_OF_HOST_MEMORY);
    }
    ++rec->live_subs;
    ++st.sub_buffers;
    return sub;
}

}  // namespace clpool::interpose::core
