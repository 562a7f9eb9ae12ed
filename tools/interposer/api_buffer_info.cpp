// clGetMemObjectInfo: a pooled buffer's count, size, properties and flags are the application's,
// not the bucket's; the rest is the driver's answer.
#include "next.hpp"
#include "state.hpp"

namespace clpool::interpose::core {

namespace {

constexpr cl_mem_flags access_flags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;

// CL_MEM_FLAGS as the driver would report it for the buffer the application asked for, from
// the driver's answer for the bucket (or the sub-buffer made on it). The bucket was made with
// the asked flags less COPY_HOST_PTR, which the core did by hand. Only COPY_HOST_PTR alone
// makes the bucket's flags 0, which a driver may report with its default access (PoCL:
// READ_WRITE); the application asked for no access flag, so none is reported. A sub-buffer
// made with no access flag inherits its parent's, so it gets the parent's answer's.
cl_mem_flags pooled_flags(const MemRec& rec, cl_mem_flags driver) noexcept {
    const cl_mem_flags copy = rec.flags & CL_MEM_COPY_HOST_PTR;
    if (copy && (rec.flags & ~CL_MEM_COPY_HOST_PTR) == 0) driver &= ~access_flags;
    return driver | copy;
}

cl_mem_flags flags_as_made(const MemRec& rec, cl_mem_flags driver) {
    if (!rec.parent) return pooled_flags(rec, driver);
    if (!(rec.flags & access_flags)) {
        cl_mem_flags bucket = 0;
        if (next().clGetMemObjectInfo(rec.parent->mem, CL_MEM_FLAGS, sizeof bucket, &bucket, nullptr) == CL_SUCCESS)
            driver = (driver & ~access_flags) | (pooled_flags(*rec.parent, bucket) & access_flags);
    }
    return driver | (rec.parent->flags & CL_MEM_COPY_HOST_PTR);
}

}  // namespace

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
    if (!alive(*rec)) return CL_INVALID_MEM_OBJECT;
    switch (param) {
        case CL_MEM_REFERENCE_COUNT: return answer<cl_uint>(rec->refs, size, value, size_ret);
        case CL_MEM_SIZE: return answer<size_t>(rec->size, size, value, size_ret);
        case CL_MEM_PROPERTIES:  // the list it was made with: {0}, or none (the bucket's own is not the application's)
            if (rec->parent) return next().clGetMemObjectInfo(m, param, size, value, size_ret);
            if (rec->empty_properties) return answer<cl_mem_properties>(0, size, value, size_ret);
            if (size_ret) *size_ret = 0;
            return CL_SUCCESS;
        case CL_MEM_FLAGS: {
            cl_mem_flags f = 0;
            const cl_int rc = next().clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof f, &f, nullptr);
            if (rc != CL_SUCCESS) return rc;
            return answer<cl_mem_flags>(flags_as_made(*rec, f), size, value, size_ret);
        }
        default:  // CL_MEM_OFFSET, CL_MEM_TYPE, CL_MEM_CONTEXT, CL_MEM_ASSOCIATED_MEMOBJECT, ...: the driver's are right
            return next().clGetMemObjectInfo(m, param, size, value, size_ret);
    }
}

}  // namespace clpool::interpose::core
