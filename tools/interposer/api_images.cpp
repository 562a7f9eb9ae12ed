// Images made from a buffer: one made from a pooled buffer holds that buffer's bucket until the
// driver deletes the image.
#include "next.hpp"
#include "state.hpp"

#include <cstdio>

namespace clpool::interpose {
namespace {

// The driver deleted an image made from a pooled buffer: one holder less.
void CL_CALLBACK on_image_deleted(cl_mem /*image*/, void* bucket) {
    core_scope guard;  // a driver thread, or the application's release: the core's calls go down
    State& st = state();
    std::vector<DueCallbacks> due;
    try {
        due.reserve(2);  // before the lock, as release_mem does (api_buffer_lifetime.cpp)
    } catch (...) {}
    {
        std::lock_guard lock(st.mu);
        auto it = st.mems.find(static_cast<cl_mem>(bucket));
        if (it == st.mems.end()) return;  // cannot be: a held record is never dropped
        MemRec* rec = it->second.get();
        if (rec->holders > 0) --rec->holders;
        if (unheld(*rec)) {
            try {
                let_go(st, rec, due);
            } catch (...) {  // cannot order the reuse: the bucket stays out of the pool for good
            }
        }
    }
    run_due(due);
}

// An image is being made from `storage`: if that is a live pooled buffer (or a
// sub-buffer of one) the bucket gains a holder. Its record's handle, or nullptr.
cl_mem hold_storage(State& st, cl_mem storage) {
    if (!storage) return nullptr;
    std::lock_guard lock(st.mu);
    auto it = st.mems.find(storage);
    if (it == st.mems.end() || !alive(*it->second)) return nullptr;  // the driver's, or freed (the driver answers)
    MemRec* root = it->second->parent ? it->second->parent : it->second.get();
    ++root->holders;
    return root->mem;
}

// The image exists (or not): its deletion will drop the holder, or the holder goes now.
cl_mem image_made(cl_mem image, cl_mem bucket) {
    if (!bucket) return image;
    if (image && next().clSetMemObjectDestructorCallback(image, on_image_deleted, bucket) == CL_SUCCESS) return image;
    if (image) {  // untrackable: the bucket never goes back (leaked, never reused under the image)
        std::fprintf(stderr, "clpool: cannot watch an image made from a pooled buffer; its bucket is kept\n");
        return image;
    }
    on_image_deleted(nullptr, bucket);  // not made: the holder goes
    return image;
}

}  // namespace

namespace core {

cl_mem create_image(cl_context c, cl_mem_flags flags, const cl_image_format* format, const cl_image_desc* desc,
                    void* host_ptr, cl_int* err) {
    core_scope guard;
    State& st = state();
    const cl_mem bucket = hold_storage(st, desc ? desc->buffer : nullptr);
    return image_made(next().clCreateImage(c, flags, format, desc, host_ptr, err), bucket);
}

cl_mem create_image_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags,
                                    const cl_image_format* format, const cl_image_desc* desc, void* host_ptr,
                                    cl_int* err) {
    core_scope guard;
    State& st = state();
    const cl_mem bucket = hold_storage(st, desc ? desc->buffer : nullptr);
    return image_made(next().clCreateImageWithProperties(c, props, flags, format, desc, host_ptr, err), bucket);
}

}  // namespace core

}  // namespace clpool::interpose
