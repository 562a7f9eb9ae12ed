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
        find(preload_next.clSetCommandQueueProperty, "clSetCommandQueueProperty");
        find(preload_next.clFinish, "clFinish");
        find(preload_next.clCreateBuffer, "clCreateBuffer");
        find(preload_next.clCreateBufferWithProperties, "clCreateBufferWithProperties");
        find(preload_next.clCreateSubBuffer, "clCreateSubBuffer");
        find(preload_next.clGetExtensionFunctionAddress, "clGetExtensionFunctionAddress");
        find(preload_next.clGetExtensionFunctionAddressForPlatform, "clGetExtensionFunctionAddressForPlatform");
        find(preload_next.clCreateImage, "clCreateImage");
        find(preload_next.clCreateImageWithProperties, "clCreateImageWithProperties");
        find(preload_next.clRetainMemObject, "clRetainMemObject");
        find(preload_next.clReleaseMemObject, "clReleaseMemObject");
        find(preload_next.clGetMemObjectInfo, "clGetMemObjectInfo");
        find(preload_next.clSetMemObjectDestructorCallback, "clSetMemObjectDestructorCallback");
        find(preload_next.clEnqueueReadBuffer, "clEnqueueReadBuffer");
        find(preload_next.clEnqueueWriteBuffer, "clEnqueueWriteBuffer");
        find(preload_next.clEnqueueCopyBuffer, "clEnqueueCopyBuffer");
        find(preload_next.clEnqueueFillBuffer, "clEnqueueFillBuffer");
        find(preload_next.clEnqueueMapBuffer, "clEnqueueMapBuffer");
        find(preload_next.clEnqueueReadBufferRect, "clEnqueueReadBufferRect");
        find(preload_next.clEnqueueWriteBufferRect, "clEnqueueWriteBufferRect");
        find(preload_next.clEnqueueCopyBufferRect, "clEnqueueCopyBufferRect");
        find(preload_next.clEnqueueCopyImageToBuffer, "clEnqueueCopyImageToBuffer");
        find(preload_next.clEnqueueCopyBufferToImage, "clEnqueueCopyBufferToImage");
        find(preload_next.clSVMAlloc, "clSVMAlloc");
        find(preload_next.clSVMFree, "clSVMFree");
        find(preload_next.clEnqueueSVMFree, "clEnqueueSVMFree");
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
CLPOOL_EXPORT cl_int CL_API_CALL clFinish(cl_command_queue q) {
    CLPOOL_FORWARD(clFinish, q);
    return core::finish(q);
}
CLPOOL_EXPORT cl_int CL_API_CALL clSetCommandQueueProperty(cl_command_queue q, cl_command_queue_properties p,
                                                           cl_bool en, cl_command_queue_properties* old) {
    CLPOOL_FORWARD(clSetCommandQueueProperty, q, p, en, old);
    return core::set_queue_property(q, p, en, old);
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
CLPOOL_EXPORT void* CL_API_CALL clGetExtensionFunctionAddressForPlatform(cl_platform_id p, const char* name) {
    if (forward() || !down().clGetExtensionFunctionAddressForPlatform)
        return down().clGetExtensionFunctionAddressForPlatform
                   ? down().clGetExtensionFunctionAddressForPlatform(p, name)
                   : nullptr;
    return core::get_extension_function_address_for_platform(p, name);
}
CLPOOL_EXPORT void* CL_API_CALL clGetExtensionFunctionAddress(const char* name) {
    if (forward() || !down().clGetExtensionFunctionAddress)
        return down().clGetExtensionFunctionAddress ? down().clGetExtensionFunctionAddress(name) : nullptr;
    return core::get_extension_function_address(name);
}
CLPOOL_EXPORT cl_mem CL_API_CALL clCreateImage(cl_context c, cl_mem_flags f, const cl_image_format* fmt,
                                               const cl_image_desc* d, void* h, cl_int* e) {
    if (forward() || !down().clCreateImage) {
        if (down().clCreateImage) return down().clCreateImage(c, f, fmt, d, h, e);
        if (e) *e = CL_INVALID_OPERATION;
        return nullptr;
    }
    return core::create_image(c, f, fmt, d, h, e);
}
CLPOOL_EXPORT cl_mem CL_API_CALL clCreateImageWithProperties(cl_context c, const cl_mem_properties* p, cl_mem_flags f,
                                                             const cl_image_format* fmt, const cl_image_desc* d,
                                                             void* h, cl_int* e) {
    if (forward() || !down().clCreateImageWithProperties) {
        if (down().clCreateImageWithProperties) return down().clCreateImageWithProperties(c, p, f, fmt, d, h, e);
        if (e) *e = CL_INVALID_OPERATION;
        return nullptr;
    }
    return core::create_image_with_properties(c, p, f, fmt, d, h, e);
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
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueReadBufferRect(cl_command_queue q, cl_mem m, cl_bool b, const size_t* bo,
                                                         const size_t* ho, const size_t* r, size_t brp, size_t bsp,
                                                         size_t hrp, size_t hsp, void* p, cl_uint n, const cl_event* w,
                                                         cl_event* e) {
    CLPOOL_FORWARD(clEnqueueReadBufferRect, q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
    return core::enqueue_read_buffer_rect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueWriteBufferRect(cl_command_queue q, cl_mem m, cl_bool b, const size_t* bo,
                                                          const size_t* ho, const size_t* r, size_t brp, size_t bsp,
                                                          size_t hrp, size_t hsp, const void* p, cl_uint n,
                                                          const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueWriteBufferRect, q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
    return core::enqueue_write_buffer_rect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueCopyBufferRect(cl_command_queue q, cl_mem s, cl_mem d, const size_t* so,
                                                         const size_t* dO, const size_t* r, size_t srp, size_t ssp,
                                                         size_t drp, size_t dsp, cl_uint n, const cl_event* w,
                                                         cl_event* e) {
    CLPOOL_FORWARD(clEnqueueCopyBufferRect, q, s, d, so, dO, r, srp, ssp, drp, dsp, n, w, e);
    return core::enqueue_copy_buffer_rect(q, s, d, so, dO, r, srp, ssp, drp, dsp, n, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueCopyImageToBuffer(cl_command_queue q, cl_mem s, cl_mem d, const size_t* so,
                                                            const size_t* r, size_t dO, cl_uint n, const cl_event* w,
                                                            cl_event* e) {
    CLPOOL_FORWARD(clEnqueueCopyImageToBuffer, q, s, d, so, r, dO, n, w, e);
    return core::enqueue_copy_image_to_buffer(q, s, d, so, r, dO, n, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueCopyBufferToImage(cl_command_queue q, cl_mem s, cl_mem d, size_t so,
                                                            const size_t* dO, const size_t* r, cl_uint n,
                                                            const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueCopyBufferToImage, q, s, d, so, dO, r, n, w, e);
    return core::enqueue_copy_buffer_to_image(q, s, d, so, dO, r, n, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n,
                                                     void* p, cl_uint nw, const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueReadBuffer, q, m, b, o, n, p, nw, w, e);
    return core::enqueue_read_buffer(q, m, b, o, n, p, nw, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n,
                                                      const void* p, cl_uint nw, const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueWriteBuffer, q, m, b, o, n, p, nw, w, e);
    return core::enqueue_write_buffer(q, m, b, o, n, p, nw, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dO,
                                                     size_t n, cl_uint nw, const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueCopyBuffer, q, s, d, so, dO, n, nw, w, e);
    return core::enqueue_copy_buffer(q, s, d, so, dO, n, nw, w, e);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void* p, size_t ps, size_t o,
                                                     size_t n, cl_uint nw, const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueFillBuffer, q, m, p, ps, o, n, nw, w, e);
    return core::enqueue_fill_buffer(q, m, p, ps, o, n, nw, w, e);
}
CLPOOL_EXPORT void* CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o,
                                                   size_t n, cl_uint nw, const cl_event* w, cl_event* e, cl_int* err) {
    if (forward() || !down().clEnqueueMapBuffer) {
        if (down().clEnqueueMapBuffer) return down().clEnqueueMapBuffer(q, m, b, f, o, n, nw, w, e, err);
        if (err) *err = CL_INVALID_OPERATION;
        return nullptr;
    }
    return core::enqueue_map_buffer(q, m, b, f, o, n, nw, w, e, err);
}
CLPOOL_EXPORT void* CL_API_CALL clSVMAlloc(cl_context c, cl_svm_mem_flags f, size_t n, cl_uint a) {
    if (forward() || !down().clSVMAlloc) return down().clSVMAlloc ? down().clSVMAlloc(c, f, n, a) : nullptr;
    return core::svm_alloc(c, f, n, a);
}
CLPOOL_EXPORT void CL_API_CALL clSVMFree(cl_context c, void* p) {
    if (forward() || !down().clSVMFree) {
        if (down().clSVMFree) down().clSVMFree(c, p);
        return;
    }
    core::svm_free(c, p);
}
CLPOOL_EXPORT cl_int CL_API_CALL clEnqueueSVMFree(cl_command_queue q, cl_uint n, void* p[], core::svm_free_notify f,
                                                  void* u, cl_uint nw, const cl_event* w, cl_event* e) {
    CLPOOL_FORWARD(clEnqueueSVMFree, q, n, p, f, u, nw, w, e);
    return core::enqueue_svm_free(q, n, p, f, u, nw, w, e);
}
