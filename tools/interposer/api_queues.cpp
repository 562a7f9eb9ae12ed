// The queue calls: the core tracks the application's queues and tells the reuse-ordering protocol what changes.
#include "next.hpp"
#include "state.hpp"

namespace clpool::interpose::core {

// A queue the reuse order cannot know would not be fenced: it goes back to the
// driver, and the application gets CL_OUT_OF_HOST_MEMORY.
static cl_command_queue track_queue(cl_context c, cl_command_queue q, cl_int* err) {
    if (!q) return q;
    State& st = state();
    cl_command_queue_properties props = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;  // if the driver cannot say
    next().clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, nullptr);
    std::unique_lock lock(st.mu);
    if (auto cs = open_context(st, c)) {
        try {
            auto it = st.queues.try_emplace(q, QueueRec{cs, 1}).first;
            try {
                ContextBuffers buffers(st, *cs);
                cs->order.add_queue(q, (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) == 0, buffers);
            } catch (...) {
                st.queues.erase(it);
                throw;
            }
        } catch (...) {
            lock.unlock();
            next().clReleaseCommandQueue(q);
            if (err) *err = CL_OUT_OF_HOST_MEMORY;
            return nullptr;
        }
    }
    return q;
}

cl_command_queue create_queue(cl_context c, cl_device_id d, cl_command_queue_properties props, cl_int* err) {
    core_scope guard;
    return track_queue(c, next().clCreateCommandQueue(c, d, props, err), err);
}

cl_command_queue create_queue_with_properties(cl_context c, cl_device_id d, const cl_queue_properties* props,
                                              cl_int* err) {
    core_scope guard;
    return track_queue(c, next().clCreateCommandQueueWithProperties(c, d, props, err), err);
}

cl_int retain_queue(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    const cl_int rc = next().clRetainCommandQueue(q);
    if (rc == CL_SUCCESS) {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end()) ++it->second.refs;
    }
    return rc;
}

cl_int release_queue(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    {
        std::lock_guard lock(st.mu);
        auto it = st.queues.find(q);
        if (it != st.queues.end() && --it->second.refs == 0) {
            ContextState& cs = *it->second.ctx;
            ContextBuffers buffers(st, cs);
            cs.order.remove_queue(q, buffers);
            st.queues.erase(it);
        }
    }
    app_scope as_app;  // callbacks the driver runs inside are the application's
    return next().clReleaseCommandQueue(q);
}

cl_int set_queue_property(cl_command_queue q, cl_command_queue_properties props, cl_bool enable,
                          cl_command_queue_properties* old) {
    core_scope guard;
    if (!next().clSetCommandQueueProperty) return CL_INVALID_OPERATION;
    State& st = state();
    if (enable && (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end()) {
            ContextState& cs = *it->second.ctx;
            ContextBuffers buffers(st, cs);
            try {
                cs.order.set_out_of_order(q, buffers);
            } catch (...) {  // out of host memory: what went back unfenced cannot be fenced; wait for it
                cs.order.finish_all();
            }
        }
    }
    return next().clSetCommandQueueProperty(q, props, enable, old);
}

cl_int finish(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    std::shared_ptr<ContextState> cs;
    std::uint64_t count = 0;
    {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end()) {
            cs = it->second.ctx;
            count = cs->order.finish_begins(q);
        }
    }
    cl_int rc = CL_SUCCESS;
    {
        app_scope as_app;  // callbacks the driver runs inside are the application's
        rc = next().clFinish(q);
    }
    if (rc == CL_SUCCESS && count) {
        std::lock_guard lock(st.mu);
        cs->order.finished(count);
    }
    if (rc == CL_SUCCESS && cs) look_at_parked(cs);  // its commands are done: parked buckets may be free
    return rc;
}

cl_int get_queue_info(cl_command_queue q, cl_command_queue_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    if (param == CL_QUEUE_REFERENCE_COUNT) {
        State& st = state();
        std::unique_lock lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end())
            return answer<cl_uint>(it->second.refs, size, value, size_ret);
    }
    return next().clGetCommandQueueInfo(q, param, size, value, size_ret);
}

}  // namespace clpool::interpose::core
