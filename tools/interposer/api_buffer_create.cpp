// Buffer creation: clCreateBuffer and clCreateBufferWithProperties served from the pool when the
// call is poolable, by the driver otherwise (traced either way).
#include "next.hpp"
#include "state.hpp"

#include <clpool/interop/detail/poolable.hpp>

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
                give_back_svm(st, *cs);  // device memory too
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

}  // namespace core

}  // namespace clpool::interpose
