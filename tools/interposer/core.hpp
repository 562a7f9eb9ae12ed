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
cl_context create_context_from_type(const cl_context_properties* props, cl_device_type type,
                                    context_notify notify, void* user_data, cl_int* err);
cl_int retain_context(cl_context c);
cl_int release_context(cl_context c);
cl_int get_context_info(cl_context c, cl_context_info param, size_t size, void* value, size_t* size_ret);

cl_command_queue create_queue(cl_context c, cl_device_id d, cl_command_queue_properties props, cl_int* err);
cl_command_queue create_queue_with_properties(cl_context c, cl_device_id d, const cl_queue_properties* props,
                                              cl_int* err);
cl_int retain_queue(cl_command_queue q);
cl_int release_queue(cl_command_queue q);
cl_int get_queue_info(cl_command_queue q, cl_command_queue_info param, size_t size, void* value, size_t* size_ret);

cl_mem create_buffer(cl_context c, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* err);
cl_mem create_buffer_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags, size_t size,
                                     void* host_ptr, cl_int* err);
cl_mem create_sub_buffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type, const void* info,
                         cl_int* err);
cl_int retain_mem(cl_mem m);
cl_int release_mem(cl_mem m);
cl_int get_mem_info(cl_mem m, cl_mem_info param, size_t size, void* value, size_t* size_ret);
cl_int set_mem_destructor_callback(cl_mem m, mem_notify notify, void* user_data);

// Which front loaded the core ("preload", "layer"), for the report.
void set_mode(const char* mode) noexcept;

}  // namespace clpool::interpose::core
