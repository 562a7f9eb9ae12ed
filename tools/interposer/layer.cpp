// The OpenCL layer front (OPENCL_LAYERS): clGetLayerInfo / clInitLayer and a dispatch table over the core.
#include "core.hpp"
#include "next.hpp"

#include <CL/cl_layer.h>

#include <algorithm>
#include <cstring>

namespace clpool::interpose {
namespace {

cl_icd_dispatch layer_next{};   // the table below this layer (zero past what the loader gave)
cl_icd_dispatch layer_table{};  // what the loader calls: layer_next with the core's entries

const cl_icd_dispatch& below() noexcept { return layer_next; }

cl_context CL_API_CALL l_create_context(const cl_context_properties* p, cl_uint n, const cl_device_id* d,
                                        core::context_notify f, void* u, cl_int* e) {
    if (in_core()) return below().clCreateContext(p, n, d, f, u, e);
    return core::create_context(p, n, d, f, u, e);
}
cl_context CL_API_CALL l_create_context_from_type(const cl_context_properties* p, cl_device_type t,
                                                  core::context_notify f, void* u, cl_int* e) {
    if (in_core()) return below().clCreateContextFromType(p, t, f, u, e);
    return core::create_context_from_type(p, t, f, u, e);
}
cl_int CL_API_CALL l_retain_context(cl_context c) {
    return in_core() ? below().clRetainContext(c) : core::retain_context(c);
}
cl_int CL_API_CALL l_release_context(cl_context c) {
    return in_core() ? below().clReleaseContext(c) : core::release_context(c);
}
cl_int CL_API_CALL l_get_context_info(cl_context c, cl_context_info i, size_t n, void* v, size_t* r) {
    return in_core() ? below().clGetContextInfo(c, i, n, v, r) : core::get_context_info(c, i, n, v, r);
}
cl_command_queue CL_API_CALL l_create_queue(cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int* e) {
    return in_core() ? below().clCreateCommandQueue(c, d, p, e) : core::create_queue(c, d, p, e);
}
cl_command_queue CL_API_CALL l_create_queue_with_properties(cl_context c, cl_device_id d, const cl_queue_properties* p,
                                                            cl_int* e) {
    return in_core() ? below().clCreateCommandQueueWithProperties(c, d, p, e)
                     : core::create_queue_with_properties(c, d, p, e);
}
cl_int CL_API_CALL l_retain_queue(cl_command_queue q) {
    return in_core() ? below().clRetainCommandQueue(q) : core::retain_queue(q);
}
cl_int CL_API_CALL l_release_queue(cl_command_queue q) {
    return in_core() ? below().clReleaseCommandQueue(q) : core::release_queue(q);
}
cl_int CL_API_CALL l_finish(cl_command_queue q) { return in_core() ? below().clFinish(q) : core::finish(q); }
cl_int CL_API_CALL l_set_queue_property(cl_command_queue q, cl_command_queue_properties p, cl_bool en,
                                        cl_command_queue_properties* old) {
    return in_core() ? below().clSetCommandQueueProperty(q, p, en, old) : core::set_queue_property(q, p, en, old);
}
cl_int CL_API_CALL l_get_queue_info(cl_command_queue q, cl_command_queue_info i, size_t n, void* v, size_t* r) {
    return in_core() ? below().clGetCommandQueueInfo(q, i, n, v, r) : core::get_queue_info(q, i, n, v, r);
}
cl_mem CL_API_CALL l_create_buffer(cl_context c, cl_mem_flags f, size_t n, void* h, cl_int* e) {
    return in_core() ? below().clCreateBuffer(c, f, n, h, e) : core::create_buffer(c, f, n, h, e);
}
cl_mem CL_API_CALL l_create_buffer_with_properties(cl_context c, const cl_mem_properties* p, cl_mem_flags f, size_t n,
                                                   void* h, cl_int* e) {
    return in_core() ? below().clCreateBufferWithProperties(c, p, f, n, h, e)
                     : core::create_buffer_with_properties(c, p, f, n, h, e);
}
cl_mem CL_API_CALL l_create_sub_buffer(cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void* i, cl_int* e) {
    return in_core() ? below().clCreateSubBuffer(m, f, t, i, e) : core::create_sub_buffer(m, f, t, i, e);
}
void* CL_API_CALL l_extension_for_platform(cl_platform_id p, const char* name) {
    return in_core() ? below().clGetExtensionFunctionAddressForPlatform(p, name)
                     : core::get_extension_function_address_for_platform(p, name);
}
void* CL_API_CALL l_extension(const char* name) {
    return in_core() ? below().clGetExtensionFunctionAddress(name) : core::get_extension_function_address(name);
}
cl_mem CL_API_CALL l_create_image(cl_context c, cl_mem_flags f, const cl_image_format* fmt, const cl_image_desc* d,
                                  void* h, cl_int* e) {
    return in_core() ? below().clCreateImage(c, f, fmt, d, h, e) : core::create_image(c, f, fmt, d, h, e);
}
cl_mem CL_API_CALL l_create_image_with_properties(cl_context c, const cl_mem_properties* p, cl_mem_flags f,
                                                  const cl_image_format* fmt, const cl_image_desc* d, void* h,
                                                  cl_int* e) {
    return in_core() ? below().clCreateImageWithProperties(c, p, f, fmt, d, h, e)
                     : core::create_image_with_properties(c, p, f, fmt, d, h, e);
}
cl_int CL_API_CALL l_retain_mem(cl_mem m) { return in_core() ? below().clRetainMemObject(m) : core::retain_mem(m); }
cl_int CL_API_CALL l_release_mem(cl_mem m) { return in_core() ? below().clReleaseMemObject(m) : core::release_mem(m); }
cl_int CL_API_CALL l_get_mem_info(cl_mem m, cl_mem_info i, size_t n, void* v, size_t* r) {
    return in_core() ? below().clGetMemObjectInfo(m, i, n, v, r) : core::get_mem_info(m, i, n, v, r);
}
cl_int CL_API_CALL l_set_mem_destructor_callback(cl_mem m, core::mem_notify f, void* u) {
    return in_core() ? below().clSetMemObjectDestructorCallback(m, f, u) : core::set_mem_destructor_callback(m, f, u);
}

cl_int CL_API_CALL l_read(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, void* p, cl_uint nw,
                          const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueReadBuffer(q, m, b, o, n, p, nw, w, e)
                     : core::enqueue_read_buffer(q, m, b, o, n, p, nw, w, e);
}
cl_int CL_API_CALL l_write(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, const void* p, cl_uint nw,
                           const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueWriteBuffer(q, m, b, o, n, p, nw, w, e)
                     : core::enqueue_write_buffer(q, m, b, o, n, p, nw, w, e);
}
cl_int CL_API_CALL l_copy(cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dO, size_t n, cl_uint nw,
                          const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueCopyBuffer(q, s, d, so, dO, n, nw, w, e)
                     : core::enqueue_copy_buffer(q, s, d, so, dO, n, nw, w, e);
}
cl_int CL_API_CALL l_fill(cl_command_queue q, cl_mem m, const void* p, size_t ps, size_t o, size_t n, cl_uint nw,
                          const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueFillBuffer(q, m, p, ps, o, n, nw, w, e)
                     : core::enqueue_fill_buffer(q, m, p, ps, o, n, nw, w, e);
}
void* CL_API_CALL l_map(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o, size_t n, cl_uint nw,
                        const cl_event* w, cl_event* e, cl_int* err) {
    return in_core() ? below().clEnqueueMapBuffer(q, m, b, f, o, n, nw, w, e, err)
                     : core::enqueue_map_buffer(q, m, b, f, o, n, nw, w, e, err);
}
cl_int CL_API_CALL l_read_rect(cl_command_queue q, cl_mem m, cl_bool b, const size_t* bo, const size_t* ho,
                               const size_t* r, size_t brp, size_t bsp, size_t hrp, size_t hsp, void* p, cl_uint n,
                               const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueReadBufferRect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e)
                     : core::enqueue_read_buffer_rect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
}
cl_int CL_API_CALL l_write_rect(cl_command_queue q, cl_mem m, cl_bool b, const size_t* bo, const size_t* ho,
                                const size_t* r, size_t brp, size_t bsp, size_t hrp, size_t hsp, const void* p,
                                cl_uint n, const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueWriteBufferRect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e)
                     : core::enqueue_write_buffer_rect(q, m, b, bo, ho, r, brp, bsp, hrp, hsp, p, n, w, e);
}
cl_int CL_API_CALL l_copy_rect(cl_command_queue q, cl_mem s, cl_mem d, const size_t* so, const size_t* dO,
                               const size_t* r, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint n,
                               const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueCopyBufferRect(q, s, d, so, dO, r, srp, ssp, drp, dsp, n, w, e)
                     : core::enqueue_copy_buffer_rect(q, s, d, so, dO, r, srp, ssp, drp, dsp, n, w, e);
}

cl_int CL_API_CALL l_copy_image_to_buffer(cl_command_queue q, cl_mem s, cl_mem d, const size_t* so, const size_t* r,
                                          size_t dO, cl_uint n, const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueCopyImageToBuffer(q, s, d, so, r, dO, n, w, e)
                     : core::enqueue_copy_image_to_buffer(q, s, d, so, r, dO, n, w, e);
}
cl_int CL_API_CALL l_copy_buffer_to_image(cl_command_queue q, cl_mem s, cl_mem d, size_t so, const size_t* dO,
                                          const size_t* r, cl_uint n, const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueCopyBufferToImage(q, s, d, so, dO, r, n, w, e)
                     : core::enqueue_copy_buffer_to_image(q, s, d, so, dO, r, n, w, e);
}

void* CL_API_CALL l_svm_alloc(cl_context c, cl_svm_mem_flags f, size_t n, cl_uint a) {
    return in_core() ? below().clSVMAlloc(c, f, n, a) : core::svm_alloc(c, f, n, a);
}
void CL_API_CALL l_svm_free(cl_context c, void* p) {
    if (in_core()) below().clSVMFree(c, p);
    else core::svm_free(c, p);
}
cl_int CL_API_CALL l_enqueue_svm_free(cl_command_queue q, cl_uint n, void* p[], core::svm_free_notify f, void* u,
                                      cl_uint nw, const cl_event* w, cl_event* e) {
    return in_core() ? below().clEnqueueSVMFree(q, n, p, f, u, nw, w, e)
                     : core::enqueue_svm_free(q, n, p, f, u, nw, w, e);
}

}  // namespace
}  // namespace clpool::interpose

using namespace clpool::interpose;
#define CLPOOL_EXPORT extern "C" __attribute__((visibility("default")))

CLPOOL_EXPORT cl_int CL_API_CALL clGetLayerInfo(cl_layer_info param, size_t size, void* value, size_t* size_ret) {
    switch (param) {
        case CL_LAYER_API_VERSION: {
            const cl_layer_api_version v = CL_LAYER_API_VERSION_100;
            if (value) {
                if (size < sizeof v) return CL_INVALID_VALUE;
                std::memcpy(value, &v, sizeof v);
            }
            if (size_ret) *size_ret = sizeof v;
            return CL_SUCCESS;
        }
        case CL_LAYER_NAME: {
            static const char name[] = "clpool buffer pooling";
            if (value) {
                if (size < sizeof name) return CL_INVALID_VALUE;
                std::memcpy(value, name, sizeof name);
            }
            if (size_ret) *size_ret = sizeof name;
            return CL_SUCCESS;
        }
        default: return CL_INVALID_VALUE;
    }
}

CLPOOL_EXPORT cl_int CL_API_CALL clInitLayer(cl_uint num_entries, const cl_icd_dispatch* target,
                                             cl_uint* num_entries_ret, const cl_icd_dispatch** layer_dispatch_ret) {
    if (!target || !num_entries_ret || !layer_dispatch_ret) return CL_INVALID_VALUE;
    constexpr std::size_t full = sizeof(cl_icd_dispatch) / sizeof(void*);
    const std::size_t n = std::min<std::size_t>(num_entries, full);
    std::memcpy(&layer_next, target, n * sizeof(void*));
    std::memcpy(&layer_table, target, n * sizeof(void*));
    if (g_next) {
        // Also preloaded (the same library): the preload front already pools; this layer stays out of the way.
        *layer_dispatch_ret = target;
        *num_entries_ret = num_entries;
        return CL_SUCCESS;
    }
    g_next = &layer_next;
    core::set_mode("layer");
    layer_table.clCreateContext = l_create_context;
    layer_table.clCreateContextFromType = l_create_context_from_type;
    layer_table.clRetainContext = l_retain_context;
    layer_table.clReleaseContext = l_release_context;
    layer_table.clGetContextInfo = l_get_context_info;
    layer_table.clCreateCommandQueue = l_create_queue;
    layer_table.clRetainCommandQueue = l_retain_queue;
    layer_table.clReleaseCommandQueue = l_release_queue;
    layer_table.clGetCommandQueueInfo = l_get_queue_info;
    layer_table.clSetCommandQueueProperty = l_set_queue_property;
    layer_table.clFinish = l_finish;
    layer_table.clCreateBuffer = l_create_buffer;
    layer_table.clCreateSubBuffer = l_create_sub_buffer;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clCreateImage)) layer_table.clCreateImage = l_create_image;
    layer_table.clGetExtensionFunctionAddress = l_extension;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clGetExtensionFunctionAddressForPlatform))
        layer_table.clGetExtensionFunctionAddressForPlatform = l_extension_for_platform;
    layer_table.clRetainMemObject = l_retain_mem;
    layer_table.clReleaseMemObject = l_release_mem;
    layer_table.clGetMemObjectInfo = l_get_mem_info;
    layer_table.clSetMemObjectDestructorCallback = l_set_mem_destructor_callback;
    layer_table.clEnqueueReadBuffer = l_read;
    layer_table.clEnqueueWriteBuffer = l_write;
    layer_table.clEnqueueCopyBuffer = l_copy;
    layer_table.clEnqueueMapBuffer = l_map;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clEnqueueFillBuffer)) layer_table.clEnqueueFillBuffer = l_fill;
    layer_table.clEnqueueReadBufferRect = l_read_rect;
    layer_table.clEnqueueWriteBufferRect = l_write_rect;
    layer_table.clEnqueueCopyBufferRect = l_copy_rect;
    layer_table.clEnqueueCopyImageToBuffer = l_copy_image_to_buffer;
    layer_table.clEnqueueCopyBufferToImage = l_copy_buffer_to_image;
    // Entries past what the loader knows stay as they are: it never calls them.
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clCreateCommandQueueWithProperties))
        layer_table.clCreateCommandQueueWithProperties = l_create_queue_with_properties;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clCreateBufferWithProperties))
        layer_table.clCreateBufferWithProperties = l_create_buffer_with_properties;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clCreateImageWithProperties))
        layer_table.clCreateImageWithProperties = l_create_image_with_properties;
    if (n * sizeof(void*) > offsetof(cl_icd_dispatch, clEnqueueSVMFree)) {  // OpenCL 2.0: all three or none
        layer_table.clSVMAlloc = l_svm_alloc;
        layer_table.clSVMFree = l_svm_free;
        layer_table.clEnqueueSVMFree = l_enqueue_svm_free;
    }
    *layer_dispatch_ret = &layer_table;
    *num_entries_ret = static_cast<cl_uint>(n);
    return CL_SUCCESS;
}
