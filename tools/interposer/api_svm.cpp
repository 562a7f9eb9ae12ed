// Shared virtual memory: clSVMAlloc served by a pool per (context, access flags) as whole
// allocations; clSVMFree and clEnqueueSVMFree hand pooled pointers back, the rest goes to the driver.
#include "clpool_interpose.h"
#include "next.hpp"
#include "state.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

namespace clpool::interpose {
namespace {

constexpr cl_svm_mem_flags fine_grained = CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
// What clSVMAlloc gives for alignment 0: the size of the largest OpenCL C type (long16, double16).
constexpr std::size_t default_alignment = 128;

void arm_svm_report(State& st) noexcept;

// The context's pool for `flags`, made on first use; nullptr when the driver must serve them: flags
// clSVMAlloc refuses (the driver's answer), a device without coarse-grained SVM, an invalid
// CLPOOL_MAX_CACHED_GB. A pool that cannot be made is not tried again.
std::shared_ptr<SVMPoolT> svm_pool_for(ContextState& cs, cl_svm_mem_flags flags) {
    cl_mem_flags key = 0;
    try {
        key = opencl::checked_svm_flags(flags);
    } catch (...) {
        return nullptr;
    }
    if (auto it = cs.svm_pools.find(key); it != cs.svm_pools.end()) return it->second;
    std::shared_ptr<SVMPoolT> pool;
    try {
        if (!cs.device) cs.device = opencl::context_devices(cs.ctx)[0];
        pool = std::make_shared<SVMPoolT>(SVMBackend(cl::Context(cs.ctx, true), cs.device, key), EnvironmentCapped{});
    } catch (...) {}
    cs.svm_pools.emplace(key, pool);
    return pool;
}

// The pooled path; nullptr when the call is the driver's (counted as a pass-through or a fallback).
void* alloc_pooled(State& st, cl_context c, cl_svm_mem_flags flags, std::size_t size, std::size_t alignment) {
    std::shared_ptr<ContextState> cs;
    std::shared_ptr<SVMPoolT> pool;
    {
        std::lock_guard lock(st.mu);
        cs = open_context(st, c);
        if (cs) pool = svm_pool_for(*cs, flags);
    }
    // Every allocation of the pool starts at its alignment (clSVMAlloc's, at the device's base-address
    // alignment): a larger one is the driver's to give.
    if (!pool || alignment > pool->backend().sub_alignment()) {
        ++st.svm_passthrough;
        return nullptr;
    }
    SVMPoolT::handle h;
    try {
        try {
            h = pool->allocate(size);
        } catch (const out_of_memory&) {  // the pool trimmed itself already: give back the context's other caches
            {
                std::lock_guard lock(st.mu);
                ++st.oom_retries;
                if (cs->open) give_back(st, *cs);
            }
            give_back_svm(st, *cs);
            h = pool->try_allocate(size);
        }
    } catch (...) {  // above the device's limit, other driver errors: the driver answers
    }
    if (!h) {
        ++st.svm_fallbacks;
        return nullptr;
    }
    void* p = h.buffer().get();
    std::lock_guard lock(st.mu);
    st.svm.emplace(p, SVMRec{std::move(h), cs});  // on bad_alloc the allocation goes back with the temporary
    ++st.svm_pooled;
    return p;
}

// One clEnqueueSVMFree in flight: the driver calls on_svm_free when the command runs.
struct SVMFreeCall {
    core::svm_free_notify app_fn = nullptr;
    void* app_data = nullptr;
    cl_context ctx = nullptr;     // no app_fn: for the driver's clSVMFree of the pointers not pooled
    std::vector<void*> unpooled;  // no app_fn: the pointers the driver frees
};

void CL_CALLBACK on_svm_free(cl_command_queue q, cl_uint n, void* ptrs[], void* p) {
    std::unique_ptr<SVMFreeCall> call(static_cast<SVMFreeCall*>(p));
    if (call->app_fn) {
        app_scope as_app;  // its clSVMFree calls are the application's: pooled pointers go back to their pools
        call->app_fn(q, n, ptrs, call->app_data);
        return;
    }
    core_scope guard;
    for (void* u : call->unpooled) next().clSVMFree(call->ctx, u);
}

}  // namespace

namespace core {

void* svm_alloc(cl_context c, cl_svm_mem_flags flags, size_t size, cl_uint alignment) {
    core_scope guard;
    State& st = state();
    arm_svm_report(st);
    // Fine-grained memory is the driver's (host and device share it without a map); size 0 and an
    // alignment that is not a power of two are the driver's to refuse.
    if (size != 0 && (flags & fine_grained) == 0 && (alignment & (alignment - 1)) == 0) {
        try {
            if (void* p = alloc_pooled(st, c, flags, size, alignment == 0 ? default_alignment : alignment)) return p;
        } catch (const std::bad_alloc&) {  // no record for it: the allocation went back; the driver serves
            ++st.svm_fallbacks;
        }
    } else {
        ++st.svm_passthrough;
    }
    return next().clSVMAlloc(c, flags, size, alignment);
}

void svm_free(cl_context c, void* p) {
    core_scope guard;
    if (!p) return;  // a no-op, as OpenCL says
    State& st = state();
    SVMPoolT::handle h;
    {
        std::lock_guard lock(st.mu);
        if (auto it = st.svm.find(p); it != st.svm.end()) {
            h = std::move(it->second.block);
            st.svm.erase(it);
        }
    }
    if (h) {
        // Reusable at once: OpenCL makes the caller ensure no command still uses the pointer.
        h.release();
        return;
    }
    // Not handed out by the core (passed through, from before the interposer, or inside a pooled
    // allocation, which OpenCL does not allow): the driver's.
    ++st.svm_driver_frees;
    next().clSVMFree(c, p);
}

cl_int enqueue_svm_free(cl_command_queue q, cl_uint n, void* ptrs[], svm_free_notify pfn_free_func, void* user_data,
                        cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    State& st = state();
    if (n == 0 || !ptrs) return next().clEnqueueSVMFree(q, n, ptrs, pfn_free_func, user_data, nwait, wait, event);
    std::unique_ptr<SVMFreeCall> call(new (std::nothrow) SVMFreeCall);
    if (!call) return CL_OUT_OF_HOST_MEMORY;
    if (pfn_free_func) {
        // The application frees them in its callback (pooled ones through the core); the driver frees none.
        call->app_fn = pfn_free_func;
        call->app_data = user_data;
        SVMFreeCall* raw = call.release();  // the callback may run before the call returns
        const cl_int rc = next().clEnqueueSVMFree(q, n, ptrs, on_svm_free, raw, nwait, wait, event);
        if (rc != CL_SUCCESS) delete raw;
        return rc;
    }
    std::vector<std::pair<void*, SVMRec>> pooled;
    try {
        std::lock_guard lock(st.mu);
        for (cl_uint i = 0; i < n; ++i) {
            void* p = ptrs[i];
            if (auto it = st.svm.find(p); it != st.svm.end()) {
                pooled.emplace_back(p, std::move(it->second));
                st.svm.erase(it);
            } else if (p && std::none_of(pooled.begin(), pooled.end(), [&](const auto& r) { return r.first == p; })) {
                call->unpooled.push_back(p);
            }
        }
    } catch (...) {  // out of host memory: give back what was taken; the driver frees them all
        std::lock_guard lock(st.mu);
        for (auto& [p, rec] : pooled) st.svm.emplace(p, std::move(rec));
        return CL_OUT_OF_HOST_MEMORY;
    }
    if (pooled.empty()) {  // none of the core's: the driver frees them all, as without it
        st.svm_driver_frees += n;
        return next().clEnqueueSVMFree(q, n, ptrs, nullptr, nullptr, nwait, wait, event);
    }
    // The driver must free only the others: it is given every pointer (the command and its event are
    // the application's) and a callback that frees those when the command runs.
    cl_int rc = call->unpooled.empty()
                    ? CL_SUCCESS
                    : next().clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof call->ctx, &call->ctx, nullptr);
    cl_event done = nullptr;
    const std::size_t unpooled = call->unpooled.size();
    SVMFreeCall* raw = call.release();
    if (rc == CL_SUCCESS) rc = next().clEnqueueSVMFree(q, n, ptrs, on_svm_free, raw, nwait, wait, &done);
    if (rc != CL_SUCCESS) {
        delete raw;
        std::lock_guard lock(st.mu);
        for (auto& [p, rec] : pooled) st.svm.emplace(p, std::move(rec));
        return rc;
    }
    st.svm_driver_frees += unpooled;
    // Reused once the command has run: after its wait list, and on an in-order queue after every
    // command enqueued before it.
    const cl::Event e(done, false);
    for (auto& [p, rec] : pooled) rec.block.release_after(&e, 1);
    if (event) {
        clRetainEvent(done);
        *event = done;
    }
    return CL_SUCCESS;
}

}  // namespace core

namespace {

// Under State::mu. Reading a pool's stats allocates: may throw std::bad_alloc.
void fill_svm_counters(State& st, clpool_interpose_svm_counters& c) {
    c.pooled = st.svm_pooled.load();
    c.passthrough = st.svm_passthrough.load();
    c.fallbacks = st.svm_fallbacks.load();
    c.driver_frees = st.svm_driver_frees.load();
    c.hits = st.svm_closed.hits;
    c.misses = st.svm_closed.misses;
    c.live = st.svm.size();
    for (auto& [ctx, cs] : st.contexts)
        for (auto& [flags, pool] : cs->svm_pools) {
            if (!pool) continue;
            const auto s = pool->stats();
            c.hits += s.hits;
            c.misses += s.misses;
            c.bytes_held += s.bytes_allocated;
            c.bytes_cached += s.bytes_cached;
            c.bytes_pending += s.bytes_pending;
        }
}

// The SVM line of the exit report (CLPOOL_REPORT=1), after the buffer pools' lines. Makes no OpenCL
// call: runs at exit. Waits briefly for the lock, then gives up.
void svm_report() noexcept {
    State& st = state();
    std::unique_lock lock(st.mu, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!lock.owns_lock()) return;
    clpool_interpose_svm_counters c{};
    try {
        fill_svm_counters(st, c);
    } catch (...) {
        return;
    }
    std::fprintf(stderr,
                 "clpool: interposer (%s) svm: hits %" PRIu64 " misses %" PRIu64 " held %" PRIu64 " B cached %" PRIu64
                 " B pending %" PRIu64 " B pooled %" PRIu64 " passthrough %" PRIu64 " fallbacks %" PRIu64
                 " driver_frees %" PRIu64 " live %" PRIu64 "\n",
                 st.mode, c.hits, c.misses, c.bytes_held, c.bytes_cached, c.bytes_pending, c.pooled, c.passthrough,
                 c.fallbacks, c.driver_frees, c.live);
}

void arm_svm_report(State& st) noexcept {
    static std::once_flag once;
    std::call_once(once, [&] {
        if (st.report) std::atexit(svm_report);  // registered after the buffer report: printed before it
    });
}

}  // namespace

}  // namespace clpool::interpose

extern "C" __attribute__((visibility("default"))) int clpool_interpose_get_svm_counters(
    clpool_interpose_svm_counters* out) {
    using namespace clpool::interpose;
    State& st = state();
    clpool_interpose_svm_counters c{};
    try {
        std::lock_guard lock(st.mu);
        fill_svm_counters(st, c);
    } catch (...) {
        return 1;
    }
    *out = c;
    return 0;
}
