// The buffer calls: pooled creation behind clCreateBuffer; counts, queries and callbacks as OpenCL promises them.
#include "next.hpp"
#include "state.hpp"

#include <clpool/interop/detail/poolable.hpp>

#include <cstdio>
#include <cstring>
#include <new>

namespace clpool::interpose {
namespace {

void trace_passthrough(State& st, cl_mem m, cl_context c, cl_mem_flags flags, std::size_t size) {
    ++st.passthrough;
    if (!st.trace) return;
    unsigned token = 0;
    {
        std::lock_guard lock(st.mu);
        if (auto cs = open_context(st, c)) token = cs->token;
    }
    const std::uint64_t id = st.trace->alloc(token, flags, size);
    // The driver says when it frees the buffer; the callback writes only the trace.
    next().clSetMemObjectDestructorCallback(
        m, [](cl_mem, void* p) { state().trace->free(reinterpret_cast<std::uintptr_t>(p)); },
        reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)));
}

// The pooled path; nullptr (with *err untouched) when it cannot serve the call.
// The driver work (a miss's allocation and commit, the COPY_HOST_PTR write)
// runs outside State::mu: a driver thread running an application callback
// that calls the interposer must never wait for a thread that waits for it.
cl_mem create_pooled(State& st, cl_context c, cl_mem_flags flags, std::size_t size, void* host_ptr, cl_int* err,
                     bool empty_properties = false) {
    std::shared_ptr<ContextState> cs;
    std::shared_ptr<PoolT> pool;
    cl_command_queue writer = nullptr;
    std::vector<DueCallbacks> due;
    struct run_at_exit {  // callbacks of buckets unparked below, outside the lock
        std::vector<DueCallbacks>& due;
        ~run_at_exit() { run_due(due); }
    } run_them{due};
    {
        std::lock_guard lock(st.mu);
        cs = open_context(st, c);
        if (!cs) return nullptr;  // a context created before the interposer saw it: pass through
        if (!cs->parked.empty()) unpark(st, *cs, due);
        try {
            pool = pool_for(*cs, flags & ~CL_MEM_COPY_HOST_PTR);
        } catch (...) {  // the context cannot be queried, invalid CLPOOL_MAX_CACHED_GB: the driver answers
            ++st.fallbacks;
            return nullptr;
        }
        if (flags & CL_MEM_COPY_HOST_PTR) {
            cl_int e = CL_SUCCESS;
            if (!cs->writer) cs->writer = next().clCreateCommandQueue(c, cs->device, 0, &e);
            if (!cs->writer || next().clRetainCommandQueue(cs->writer) != CL_SUCCESS) {
                ++st.fallbacks;
                return nullptr;
            }
            writer = cs->writer;  // retained: a context closing meanwhile cannot free it under us
        }
    }
    struct writer_ref {  // released on every way out
        cl_command_queue q;
        ~writer_ref() {
            if (q) next().clReleaseCommandQueue(q);
        }
    } writer_hold{writer};
    PoolT::handle h;
    std::unique_lock lock(st.mu, std::defer_lock);
    // A bucket that must first wait for a fence goes back to its pool, and the
    // pool is asked again (a few times at most, then the driver answers).
    for (int attempt = 0;; ++attempt) {
        if (attempt == 8) {
            ++st.fallbacks;
            return nullptr;
        }
        tl_made = nullptr;
        try {
            try {
                h = pool->allocate(size);
            } catch (const out_of_memory&) {
                {
                    std::lock_guard oom_lock(st.mu);
                    ++st.oom_retries;
                    if (cs->open) give_back(st, *cs);
                }
                h = pool->try_allocate(size);
            }
        } catch (...) {
            // size above the device limit, other driver errors: the driver answers.
        }
        bool known = h && h.buffer()() == tl_made;
        if (h && writer) {
            // The core's write runs on its own queue: it must not overtake the
            // old owner's commands, so check the bucket before writing.
            std::lock_guard check(st.mu);
            const reissue r = check_reissue(st, cs, h, true, known);
            if (r == reissue::wait) continue;
            if (r == reissue::fail) {
                ++st.fallbacks;
                return nullptr;
            }
            known = true;
        }
        cl_int write_err = CL_SUCCESS;
        if (h && writer)
            write_err = clEnqueueWriteBuffer(writer, h.buffer()(), CL_TRUE, 0, size, host_ptr, 0, nullptr, nullptr);

        lock.lock();  // the pool's own trim on out-of-memory dropped its tombstones (pool_adapters.hpp)
        if (!h || write_err != CL_SUCCESS || !cs->open) {
            ++st.fallbacks;
            return nullptr;  // h goes back to its pool (or to the driver, if the context closed meanwhile)
        }
        // Again under this lock: a queue created since may have fenced the bucket.
        const reissue r = check_reissue(st, cs, h, writer != nullptr, known);
        if (r == reissue::ok) break;
        if (r == reissue::fail) {
            ++st.fallbacks;
            return nullptr;
        }
        lock.unlock();
    }
    const cl_mem bucket = h.buffer()();
    MemRec* rec = nullptr;
    if (auto t = st.mems.find(bucket); t != st.mems.end()) {
        rec = t->second.get();  // the bucket's tombstone: it serves again
    } else {
        auto owned = std::make_unique<MemRec>();
        rec = owned.get();
        rec->mem = bucket;
        st.mems[bucket] = std::move(owned);
    }
    rec->ctx = cs;
    rec->flags = flags;
    rec->size = size;
    rec->refs = 1;
    rec->parent = nullptr;
    rec->live_subs = 0;
    rec->holders = 0;
    rec->callbacks.clear();
    rec->pool = pool.get();
    rec->empty_properties = empty_properties;
    rec->reuse.fence.reset();  // completed, if it had one; `unfenced` stays (see reuse::BufferMark)
    rec->block = std::move(h);
    if (st.trace) rec->trace_id = st.trace->alloc(cs->token, flags, size);
    if (err) *err = CL_SUCCESS;
    return rec->mem;
}

// The application's own release, passed down: the driver may run the
// application's destructor callbacks inside it, and their OpenCL calls must
// reach the core as the application's (not bypass it under the core's guard).
cl_int release_as_application(cl_mem m) {
    app_scope as_app;
    return next().clReleaseMemObject(m);
}

// The driver deleted an image made from a pooled buffer: one holder less.
void CL_CALLBACK on_image_deleted(cl_mem /*image*/, void* bucket) {
    core_scope guard;  // a driver thread, or the application's release: the core's calls go down
    State& st = state();
    std::vector<DueCallbacks> due;
    try {
        due.reserve(2);  // before the lock, as in release_mem
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
    if (it == st.mems.end() || it->second->refs == 0) return nullptr;  // the driver's, or freed (the driver answers)
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

cl_mem create_buffer(cl_context c, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* err) {
    core_scope guard;
    State& st = state();
    if (detail::poolable(flags, size, host_ptr)) {
        try {
            if (cl_mem m = create_pooled(st, c, flags, size, host_ptr, err)) return m;
        } catch (const std::bad_alloc&) {  // no record for it: the bucket went back as it came
            if (err) *err = CL_OUT_OF_HOST_MEMORY;
            return nullptr;
        }
    }
    cl_mem m = next().clCreateBuffer(c, flags, size, host_ptr, err);
    if (m) trace_passthrough(st, m, c, flags, size);
    return m;
}

cl_mem create_buffer_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags, size_t size,
                                     void* host_ptr, cl_int* err) {
    core_scope guard;
    State& st = state();
    // No properties: pooled like clCreateBuffer. An empty list {0} is remembered, since
    // CL_MEM_PROPERTIES must return it (OpenCL 3.0) and the bucket was made without one.
    if ((!props || props[0] == 0) && detail::poolable(flags, size, host_ptr)) {
        try {
            if (cl_mem m = create_pooled(st, c, flags, size, host_ptr, err, props != nullptr)) return m;
        } catch (const std::bad_alloc&) {  // as in create_buffer
            if (err) *err = CL_OUT_OF_HOST_MEMORY;
            return nullptr;
        }
    }
    cl_mem m = next().clCreateBufferWithProperties(c, props, flags, size, host_ptr, err);
    if (m) trace_passthrough(st, m, c, flags, size);
    return m;
}

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
    if (rec->refs == 0 || rec->parent) return fail(CL_INVALID_MEM_OBJECT);  // freed, or a sub-buffer's sub-buffer
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

// The cl_khr_command_buffer entry points record buffers the core never sees:
// once the application asks for one, releases ask the driver's count (let_go).
static void note_extension(State& st, const char* name) noexcept {
    if (name && (std::strstr(name, "CommandBuffer") || std::strncmp(name, "clCommand", 9) == 0))
        st.watch_driver_refs.store(true, std::memory_order_relaxed);
}

void* get_extension_function_address_for_platform(cl_platform_id p, const char* name) {
    core_scope guard;
    note_extension(state(), name);
    return next().clGetExtensionFunctionAddressForPlatform(p, name);
}

void* get_extension_function_address(const char* name) {
    core_scope guard;
    note_extension(state(), name);
    return next().clGetExtensionFunctionAddress(name);
}

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

cl_int retain_mem(cl_mem m) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clRetainMemObject(m);
    }
    if (it->second->refs == 0) return CL_INVALID_MEM_OBJECT;
    ++it->second->refs;
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
        if (rec->refs == 0) return CL_INVALID_MEM_OBJECT;  // released already: the handle is a tombstone
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
    if (it->second->refs == 0) return CL_INVALID_MEM_OBJECT;
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
