// The interception core's entry points: one function per intercepted OpenCL call, shared by both fronts.
#pragma once

#include <CL/cl.h>

// Each function has the signature and the contract of the OpenCL call it
// stands for (same return codes), and is called by a front only when the
// caller is the application (next.hpp's guard is off). Thread-safe.
namespace clpool::interpose::core {

using context_notify = void(CL_CALLBACK*)(const char*, const void*, size_t, void*);
using mem_notify = void(CL_CALLBACK*)(cl_mem, void*);

cl_context create_context(const cl_context_properties* props, cl_uint ndev, const cl_device_id* devices,
                          context_notify notify, void* user_data, cl_int* err);
cl_context create_context_from_type(const cl_context_properties* props, cl_device_type type, context_notify notify,
                                    void* user_data, cl_int* err);
cl_int retain_context(cl_context c);
cl_int release_context(cl_context c);
cl_int get_context_info(cl_context c, cl_context_info param, size_t size, void* value, size_t* size_ret);

cl_command_queue create_queue(cl_context c, cl_device_id d, cl_command_queue_properties props, cl_int* err);
cl_command_queue create_queue_with_properties(cl_context c, cl_device_id d, const cl_queue_properties* props,
                                              cl_int* err);
cl_int retain_queue(cl_command_queue q);
cl_int release_queue(cl_command_queue q);
// clFinish: on a context's lone in-order queue it also tells the core that released buffers need no fence.
cl_int finish(cl_command_queue q);
// The deprecated OpenCL 1.0 call: a queue switched to out-of-order mode no longer orders reuse.
cl_int set_queue_property(cl_command_queue q, cl_command_queue_properties props, cl_bool enable,
                          cl_command_queue_properties* old);
cl_int get_queue_info(cl_command_queue q, cl_command_queue_info param, size_t size, void* value, size_t* size_ret);

cl_mem create_buffer(cl_context c, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* err);
cl_mem create_buffer_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags, size_t size,
                                     void* host_ptr, cl_int* err);
cl_mem create_sub_buffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type, const void* info, cl_int* err);
// Images: one made from a pooled buffer (CL_MEM_OBJECT_IMAGE1D_BUFFER, a 2D
// image from a buffer) holds that buffer's bucket until the driver deletes it.
cl_mem create_image(cl_context c, cl_mem_flags flags, const cl_image_format* format, const cl_image_desc* desc,
                    void* host_ptr, cl_int* err);
cl_mem create_image_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags,
                                    const cl_image_format* format, const cl_image_desc* desc, void* host_ptr,
                                    cl_int* err);
cl_int retain_mem(cl_mem m);
cl_int release_mem(cl_mem m);
cl_int get_mem_info(cl_mem m, cl_mem_info param, size_t size, void* value, size_t* size_ret);
cl_int set_mem_destructor_callback(cl_mem m, mem_notify notify, void* user_data);

// Buffer transfers, checked against the size the application asked for (the
// driver sees the larger bucket), then passed on unchanged.
cl_int enqueue_read_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, void* ptr,
                           cl_uint nwait, const cl_event* wait, cl_event* event);
cl_int enqueue_write_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, const void* ptr,
                            cl_uint nwait, const cl_event* wait, cl_event* event);
cl_int enqueue_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_offset, size_t dst_offset, size_t n,
                           cl_uint nwait, const cl_event* wait, cl_event* event);
cl_int enqueue_fill_buffer(cl_command_queue q, cl_mem m, const void* pattern, size_t pattern_size, size_t offset,
                           size_t n, cl_uint nwait, const cl_event* wait, cl_event* event);
void* enqueue_map_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags, size_t offset, size_t n,
                         cl_uint nwait, const cl_event* wait, cl_event* event, cl_int* err);
cl_int enqueue_read_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* buffer_origin,
                                const size_t* host_origin, const size_t* region, size_t buffer_row_pitch,
                                size_t buffer_slice_pitch, size_t host_row_pitch, size_t host_slice_pitch, void* ptr,
                                cl_uint nwait, const cl_event* wait, cl_event* event);
cl_int enqueue_write_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* buffer_origin,
                                 const size_t* host_origin, const size_t* region, size_t buffer_row_pitch,
                                 size_t buffer_slice_pitch, size_t host_row_pitch, size_t host_slice_pitch,
                                 const void* ptr, cl_uint nwait, const cl_event* wait, cl_event* event);
cl_int enqueue_copy_buffer_rect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t* src_origin,
                                const size_t* dst_origin, const size_t* region, size_t src_row_pitch,
                                size_t src_slice_pitch, size_t dst_row_pitch, size_t dst_slice_pitch, cl_uint nwait,
                                const cl_event* wait, cl_event* event);

// Copies between an image and a buffer: the buffer's side checked as a buffer transfer of the
// region's bytes (the image's element size times its pixels).
cl_int enqueue_copy_image_to_buffer(cl_command_queue q, cl_mem src_image, cl_mem dst, const size_t* src_origin,
                                    const size_t* region, size_t dst_offset, cl_uint nwait, const cl_event* wait,
                                    cl_event* event);
cl_int enqueue_copy_buffer_to_image(cl_command_queue q, cl_mem src, cl_mem dst_image, size_t src_offset,
                                    const size_t* dst_origin, const size_t* region, cl_uint nwait, const cl_event* wait,
                                    cl_event* event);

// Shared virtual memory (OpenCL 2.0): coarse-grained allocations come from a pool per (context,
// access flags) as whole allocations, so the pointer is one the driver made and every other SVM
// call passes through unchanged. Fine-grained or atomic flags, an alignment above the pool's, size
// 0 and contexts the core does not track go to the driver; so does a free of a pointer the core
// did not hand out.
using svm_free_notify = void(CL_CALLBACK*)(cl_command_queue, cl_uint, void**, void*);
void* svm_alloc(cl_context c, cl_svm_mem_flags flags, size_t size, cl_uint alignment);
void svm_free(cl_context c, void* p);
// Pooled pointers go back to their pool behind the command's event; the driver frees the
// others when the command runs. With pfn_free_func the application frees them all itself: it is
// called as the driver would call it, as the application (its clSVMFree calls reach the core).
cl_int enqueue_svm_free(cl_command_queue q, cl_uint n, void* ptrs[], svm_free_notify pfn_free_func, void* user_data,
                        cl_uint nwait, const cl_event* wait, cl_event* event);

// Extension lookups, passed on; asking for cl_khr_command_buffer makes the
// core watch the driver's count of released buffers (a recording holds them).
void* get_extension_function_address_for_platform(cl_platform_id p, const char* name);
void* get_extension_function_address(const char* name);

// Which front loaded the core ("preload", "layer"), for the report.
void set_mode(const char* mode) noexcept;

}  // namespace clpool::interpose::core
