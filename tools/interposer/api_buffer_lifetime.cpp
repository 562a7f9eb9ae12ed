// A buffer's lifetime: clRetainMemObject, clReleaseMemObject and destructor callbacks. A pooled
// buffer's count is the core's, and its release returns the bucket to the pool, not the driver.
#include "next.hpp"
#include "state.hpp"

#include <new>

namespace clpool::interpose {
namespace {

// The application's own release, passed down: the driver may run the
// application's destructor callbacks inside it, and their OpenCL calls must
// reach the core as the application's (not bypass it under the core's guard).
cl_int release_as_application(cl_mem m) {
    app_scope as_app;
    return next().clReleaseMemObject(m);
}

}  // namespace

namespace core {

cl_int retain_mem(cl_mem m) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clRetainMemObject(m);
    }
    MemRec* rec = it->second.get();
    if (!alive(*rec)) return CL_INVALID_MEM_OBJECT;
    // Released, but kept alive by a sub-buffer or an image: the application holds it again (CL-HPP's
    // getInfo of a sub-buffer's CL_MEM_ASSOCIATED_MEMOBJECT does), and the trace sees a new buffer.
    if (rec->refs++ == 0 && st.trace) rec->trace_id = st.trace->alloc(rec->ctx->token, rec->flags, rec->size);
    return CL_SUCCESS;
}

cl_int release_mem(cl_mem m) {
    core_scope guard;
    State& st = state();
    std::vector<DueCallbacks> due;
    try {
        due.reserve(1);  // before the lock: callbacks are deferred without allocating under it
    } catch (...) {}
    cl_mem driver_sub = nullptr;
    {
        std::unique_lock lock(st.mu);
        auto it = st.mems.find(m);
        if (it == st.mems.end()) {
            lock.unlock();
            return release_as_application(m);
        }
        MemRec* rec = it->second.get();
        // Released already: a tombstone, or kept only by its sub-buffers or images, whose references are not the
        // application's to release.
        if (rec->refs == 0) return CL_INVALID_MEM_OBJECT;
        if (--rec->refs > 0) return CL_SUCCESS;
        if (MemRec* parent = rec->parent) {
            // A sub-buffer is the driver's own object: it goes back to the driver
            // now (which deletes it once its commands are done), not with its parent.
            --parent->live_subs;
            st.mems.erase(it);  // destroys rec; the handle stays the driver's until released below
            driver_sub = m;
            if (unheld(*parent)) let_go(st, parent, due);
        } else {
            if (st.trace) st.trace->free(rec->trace_id);
            if (unheld(*rec)) let_go(st, rec, due);
        }
    }
    if (driver_sub) release_as_application(driver_sub);  // its destructor callbacks are the driver's to run
    run_due(due);
    return CL_SUCCESS;
}

// An application callback the driver runs: as the application, whichever
// thread and whichever of the core's own driver calls it runs inside.
struct AppCallback {
    mem_notify notify;
    void* user_data;
};
static void CL_CALLBACK run_as_application(cl_mem m, void* p) {
    auto* cb = static_cast<AppCallback*>(p);
    {
        app_scope as_app;
        cb->notify(m, cb->user_data);
    }
    delete cb;
}
static cl_int driver_callback(cl_mem m, mem_notify notify, void* user_data) {
    if (!notify) return next().clSetMemObjectDestructorCallback(m, notify, user_data);  // the driver's error
    auto* cb = new (std::nothrow) AppCallback{notify, user_data};
    if (!cb) return CL_OUT_OF_HOST_MEMORY;
    const cl_int rc = next().clSetMemObjectDestructorCallback(m, run_as_application, cb);
    if (rc != CL_SUCCESS) delete cb;
    return rc;
}

cl_int set_mem_destructor_callback(cl_mem m, mem_notify notify, void* user_data) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return driver_callback(m, notify, user_data);
    }
    if (!notify) return CL_INVALID_VALUE;
    if (!alive(*it->second)) return CL_INVALID_MEM_OBJECT;
    if (it->second->parent) {  // a sub-buffer: the driver deletes it, and runs the callback then
        lock.unlock();
        return driver_callback(m, notify, user_data);
    }
    try {
        it->second->callbacks.emplace_back(notify, user_data);
    } catch (...) {
        return CL_OUT_OF_HOST_MEMORY;
    }
    return CL_SUCCESS;
}

}  // namespace core

}  // namespace clpool::interpose
