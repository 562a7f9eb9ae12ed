// clGetMemObjectInfo: a pooled buffer's count, size, properties and flags are the application's,
// not the bucket's; the rest is the driver's answer.
#include "next.hpp"
#include "state.hpp"

namespace clpool::interpose::core {

cl_int get_mem_info(cl_mem m, cl_mem_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clGetMemObjectInfo(m, param, size, value, size_ret);
    }
    const MemRec* rec = it->second.get();
    if (rec->refs == 0) return CL_INVALID_MEM_OBJECT;
    switch (param) {
        case CL_MEM_REFERENCE_COUNT: return answer<cl_uint>(rec->refs, size, value, size_ret);
        case CL_MEM_SIZE: return answer<size_t>(rec->size, size, value, size_ret);
        case CL_MEM_PROPERTIES:  // the list it was made with: {0}, or none (the bucket's own is not the application's)
            if (rec->parent) return next().clGetMemObjectInfo(m, param, size, value, size_ret);
            if (rec->empty_properties) return answer<cl_mem_properties>(0, size, value, size_ret);
            if (size_ret) *size_ret = 0;
            return CL_SUCCESS;
        case CL_MEM_FLAGS: {
            // The driver's answer (the bucket was made with the application's flags),
            // plus the COPY_HOST_PTR the core did by hand.
            cl_mem_flags f = 0;
            const cl_int rc = next().clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof f, &f, nullptr);
            if (rc != CL_SUCCESS) return rc;
            const cl_mem_flags asked = rec->parent ? rec->parent->flags : rec->flags;
            return answer<cl_mem_flags>(f | (asked & CL_MEM_COPY_HOST_PTR), size, value, size_ret);
        }
        default:  // CL_MEM_OFFSET, CL_MEM_TYPE, CL_MEM_CONTEXT, CL_MEM_ASSOCIATED_MEMOBJECT, ...: the driver's are right
            return next().clGetMemObjectInfo(m, param, size, value, size_ret);
    }
}

}  // namespace clpool::interpose::core
