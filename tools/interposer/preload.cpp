// The LD_PRELOAD front: exported clXxx symbols that stand before the ICD loader's, over the core.
#include "core.hpp"
#include "next.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace clpool::interpose {
namespace {

cl_icd_dispatch preload_next{};  // the loader's own functions, found after this library

template <class Fn>
void find(Fn& slot, const char* name) noexcept {
    slot = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// The next table: the layer front's if it came first, else the loader's.
const cl_icd_dispatch& down() noexcept {
    static std::once_flag once;
    std::call_once(once, [] {
        if (g_next) return;  // loaded as a layer: the layer front already set the way down
        find(preload_next.clCreateContext, "clCreateContext");
        find(preload_next.clCreateContextFromType, "clCreateContextFromType");
        find(preload_next.clRetainContext, "clRetainContext");
        find(preload_next.clReleaseContext, "clReleaseContext");
        find(preload_next.clGetContextInfo, "clGetContextInfo");
        find(preload_next.clCreateCommandQueue, "clCreateCommandQueue");
        find(preload_next.clCreateCommandQueueWithProperties, "clCreateCommandQueueWithProperties");
        find(preload_next.clRetainCommandQueue, "clRetainCommandQueue");
        find(preload_next.clReleaseCommandQueue, "clReleaseCommandQueue");
        find(preload_next.clGetCommandQueueInfo, "clGetCommandQueueInfo");
        find(preload_next.clCreateBuffer, "clCreateBuffer");
        find(preload_next.clCreateBufferWithProperties, "clCreateBufferWithProperties");
        find(preload_next.clCreateSubBuffer, "clCreateSubBuffer");
        find(preload_next.clRetainMemObject, "clRetainMemObject");
        find(preload_next.clReleaseMemObject, "clReleaseMemObject");
        find(preload_next.clGetMemObjectInfo, "clGetMemObjectInfo");
        find(preload_next.clSetMemObjectDestructorCallback, "clSetMemObjectDestructorCallback");
        if (!preload_next.clCreateBuffer || !preload_next.clReleaseMemObject) {
            std::fprintf(stderr, "clpool: libclpool_interpose found no OpenCL library below it (%s)\n", dlerror());
            std::abort();  // nothing to forward to: every OpenCL call would fail
        }
        g_next = &preload_next;
        core::set_mode("preload");
    });
    return *g_next;
}

// True while the core itself is calling (forward to the loader); sets up the
// way down on the first call either way.
bool forward() noexcept {
    (void)down();
    return in_core();
}

}  // namespace
}  // namespace clpool::interpose

using namespace clpool::interpose;
#define CLPOOL_EXPORT extern "C" __attribute__((visibility("default")))
// Forward while the core itself calls, and for a function the loader lacks.
#define CLPOOL_FORWARD(fn, ...) \
    if (forward() || !down().fn) return down().fn ? down().fn(__VA_ARGS__) : CL_INVALID_OPERATION

CLPOOL_EXPORT cl_context CL_API_CALL clCreateContext(const cl_context_properties* p, cl_uint n, const cl_device_id* d,
                                                     core::context_notify f, void* u, cl_int* e) {
    if (forward()) return down().clCreateContext(p, n, d, f, u, e);
    return core::create_context(p, n, d, f, u, e);
}
CLPOOL_EXPORT cl_context CL_API_CALL clCreateContextFromType(const cl_context_properties* p, cl_device_type t,
                                                             core::context_notify f, void* u, cl_int* e) {
    if (forward()) return down().clCreateContextFromType(p, t, f, u, e);
    return core::create_context_from_type(p, t, f, u, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clRetainContext(cl_context c) {
    CLPOOL_FORWARD(clRetainContext, c);
    return core::retain_context(c);
}
CLPOOL_EXPORT cl_int CL_API_CALL clReleaseContext(cl_context c) {
    CLPOOL_FORWARD(clReleaseContext, c);
    return core::release_context(c);
}
CLPOOL_EXPORT cl_int CL_API_CALL clGetContextInfo(cl_context c, cl_context_info i, size_t n, void* v, size_t* r) {
    CLPOOL_FORWARD(clGetContextInfo, c, i, n, v, r);
    return core::get_context_info(c, i, n, v, r);
}
CLPOOL_EXPORT cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context c, cl_device_id d,
                                                                cl_command_queue_properties p, cl_int* e) {
    if (forward()) return down().clCreateCommandQueue(c, d, p, e);
    return core::create_queue(c, d, p, e);
}
CLPOOL_EXPORT cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(cl_context c, cl_device_id d,
                                                                              const cl_queue_properties* p, cl_int* e) {
    if (forward() || !down().clCreateCommandQueueWithProperties) {
        if (down().clCreateCommandQueueWithProperties) return down().clCreateCommandQueueWithProperties(c, d, p, e);
        if (e) *e = CL_INVALID_OPERATION;
        return nullptr;
    }
    return core::create_queue_with_properties(c, d, p, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clRetainCommandQueue(cl_command_queue q) {
    CLPOOL_FORWARD(clRetainCommandQueue, q);
    return core::retain_queue(q);
}
CLPOOL_EXPORT cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue q) {
    CLPOOL_FORWARD(clReleaseCommandQueue, q);
    return core::release_queue(q);
}
CLPOOL_EXPORT cl_int CL_API_CALL clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info i, size_t n, void* v,
                                                       size_t* r) {
    CLPOOL_FORWARD(clGetCommandQueueInfo, q, i, n, v, r);
    return core::get_queue_info(q, i, n, v, r);
}
CLPOOL_EXPORT cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void* h, cl_int* e) {
    if (forward()) return down().clCreateBuffer(c, f, n, h, e);
    return core::create_buffer(c, f, n, h, e);
}
CLPOOL_EXPORT cl_mem CL_API_CALL clCreateBufferWithProperties(cl_context c, const cl_mem_properties* p, cl_mem_flags f,
                                                              size_t n, void* h, cl_int* e) {
    if (forward() || !down().clCreateBufferWithProperties) {
        if (down().clCreateBufferWithProperties) return down().clCreateBufferWithProperties(c, p, f, n, h, e);
        if (e) *e = CL_INVALID_OPERATION;
        return nullptr;
    }
    return core::create_buffer_with_properties(c, p, f, n, h, e);
}
CLPOOL_EXPORT cl_mem CL_API_CALL clCreateSubBuffer(cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void* i,
                                                   cl_int* e) {
    if (forward()) return down().clCreateSubBuffer(m, f, t, i, e);
    return core::create_sub_buffer(m, f, t, i, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clRetainMemObject(cl_mem m) {
    CLPOOL_FORWARD(clRetainMemObject, m);
    return core::retain_mem(m);
}
CLPOOL_EXPORT cl_int CL_API_CALL clReleaseMemObject(cl_mem m) {
    CLPOOL_FORWARD(clReleaseMemObject, m);
    return core::release_mem(m);
}
CLPOOL_EXPORT cl_int CL_API_CALL clGetMemObjectInfo(cl_mem m, cl_mem_info i, size_t n, void* v, size_t* r) {
    CLPOOL_FORWARD(clGetMemObjectInfo, m, i, n, v, r);
    return core::get_mem_info(m, i, n, v, r);
}
CLPOOL_EXPORT cl_int CL_API_CALL clSetMemObjectDestructorCallback(cl_mem m, core::mem_notify f, void* u) {
    CLPOOL_FORWARD(clSetMemObjectDestructorCallback, m, f, u);
    return core::set_mem_destructor_callback(m, f, u);
}
