// The context calls: the core tracks each context the application creates and answers its reference count.
#include "next.hpp"
#include "state.hpp"

namespace clpool::interpose::core {

// A context the core cannot track goes back to the driver: CL_OUT_OF_HOST_MEMORY,
// never an exception through the C API.
static cl_context track_context(cl_context c, cl_int* err) {
    if (!c) return c;
    State& st = state();
    st.saw_context = true;
    keep_snapshot_signal();
    try {
        std::lock_guard lock(st.mu);
        auto cs = std::make_shared<ContextState>();
        cs->ctx = c;
        cs->token = st.next_token + 1;
        st.contexts[c] = std::move(cs);
        ++st.next_token;
        return c;
    } catch (...) {
        next().clReleaseContext(c);
        if (err) *err = CL_OUT_OF_HOST_MEMORY;
        return nullptr;
    }
}

cl_context create_context(const cl_context_properties* props, cl_uint ndev, const cl_device_id* devices,
                          context_notify notify, void* user_data, cl_int* err) {
    core_scope guard;
    return track_context(next().clCreateContext(props, ndev, devices, notify, user_data, err), err);
}

cl_context create_context_from_type(const cl_context_properties* props, cl_device_type type, context_notify notify,
                                    void* user_data, cl_int* err) {
    core_scope guard;
    return track_context(next().clCreateContextFromType(props, type, notify, user_data, err), err);
}

cl_int retain_context(cl_context c) {
    core_scope guard;
    State& st = state();
    const cl_int rc = next().clRetainContext(c);
    if (rc == CL_SUCCESS) {
        std::lock_guard lock(st.mu);
        if (auto cs = open_context(st, c)) ++cs->refs;
    }
    return rc;
}

cl_int release_context(cl_context c) {
    core_scope guard;
    State& st = state();
    std::vector<DueCallbacks> due;
    std::map<cl_mem_flags, std::shared_ptr<SVMPoolT>> svm_pools;  // destroyed unlocked (close_context)
    {
        std::lock_guard lock(st.mu);
        // The count first: the application's own reference, released below,
        // keeps the context valid while its pools close.
        if (auto cs = open_context(st, c); cs && --cs->refs == 0) {
            st.contexts.erase(c);
            close_context(st, cs, due);
            svm_pools.swap(cs->svm_pools);
        }
    }
    svm_pools.clear();
    run_due(due);
    app_scope as_app;  // the driver may delete it now and run the application's callbacks inside
    return next().clReleaseContext(c);
}

cl_int get_context_info(cl_context c, cl_context_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    if (param == CL_CONTEXT_REFERENCE_COUNT) {
        State& st = state();
        std::unique_lock lock(st.mu);
        if (auto cs = open_context(st, c)) return answer<cl_uint>(cs->refs, size, value, size_ret);
    }
    return next().clGetContextInfo(c, param, size, value, size_ret);
}

}  // namespace clpool::interpose::core
