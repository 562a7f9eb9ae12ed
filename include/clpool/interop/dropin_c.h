/* clpool_create_buffer / clpool_release_buffer: pooled clCreateBuffer / clReleaseMemObject for C (docs/DROPIN.md). */
#ifndef CLPOOL_DROPIN_C_H
#define CLPOOL_DROPIN_C_H

/* The OpenCL target clpool's C++ headers pin too, unless the program chose one before (define
 * CL_TARGET_OPENCL_VERSION first for newer declarations). Without it <CL/cl.h> picks 3.0 and says
 * so in a note in every file that includes this header. */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As clCreateBuffer, but the memory comes from clpool's pool for (context, flags);
 * CL_MEM_USE_HOST_PTR, CL_MEM_COPY_HOST_PTR (write the data on your queue instead) and invalid
 * arguments go to the driver unchanged, and so does a call the pools cannot serve (out of host
 * memory included): no C++ exception leaves it. Thread-safe.
 * Defined by the installed library (CMake: clpool::dropin_c or clpool::dropin_c_static),
 * or by one C++ file that includes <clpool/interop/dropin.hpp> after
 * #define CLPOOL_DROPIN_IMPLEMENTATION. */
cl_mem clpool_create_buffer(cl_context context, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* errcode_ret);

/* As clReleaseMemObject; a pooled buffer goes back to its pool once the driver deletes it
 * (no reference left, no command using it). */
cl_int clpool_release_buffer(cl_mem buffer);

#ifdef __cplusplus
}
#endif

#endif
