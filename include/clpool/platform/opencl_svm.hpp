// The OpenCL 2.0 shared-virtual-memory calls and constants that clpool uses, under its OpenCL 1.2 pin.
#pragma once

#include <clpool/platform/opencl.hpp>

// clpool pins CL-HPP to OpenCL 1.2, and the C headers then leave out the 2.0
// calls. An ICD loader exports them whatever the header's target (a driver
// without them answers CL_INVALID_OPERATION or nullptr through the loader),
// so they are declared here exactly as CL/cl.h declares them for 2.0.
#ifndef CL_VERSION_2_0
extern "C" {
CL_API_ENTRY void* CL_API_CALL clSVMAlloc(cl_context context, cl_bitfield flags, size_t size, cl_uint alignment);
CL_API_ENTRY void CL_API_CALL clSVMFree(cl_context context, void* svm_pointer);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueSVMMemcpy(cl_command_queue command_queue, cl_bool blocking_copy, void* dst_ptr,
                                                   const void* src_ptr, size_t size, cl_uint num_events_in_wait_list,
                                                   const cl_event* event_wait_list, cl_event* event);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueSVMMemFill(cl_command_queue command_queue, void* svm_ptr, const void* pattern,
                                                    size_t pattern_size, size_t size, cl_uint num_events_in_wait_list,
                                                    const cl_event* event_wait_list, cl_event* event);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueSVMMap(cl_command_queue command_queue, cl_bool blocking_map,
                                                cl_map_flags flags, void* svm_ptr, size_t size,
                                                cl_uint num_events_in_wait_list, const cl_event* event_wait_list,
                                                cl_event* event);
CL_API_ENTRY cl_int CL_API_CALL clEnqueueSVMUnmap(cl_command_queue command_queue, void* svm_ptr,
                                                  cl_uint num_events_in_wait_list, const cl_event* event_wait_list,
                                                  cl_event* event);
CL_API_ENTRY cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel kernel, cl_uint arg_index, const void* arg_value);
}
#endif

namespace clpool::opencl {

// CL_DEVICE_SVM_CAPABILITIES and its bits, CL_MEM_SVM_FINE_GRAIN_BUFFER and
// CL_MEM_SVM_ATOMICS (OpenCL 2.0), under clpool's own names.
inline constexpr cl_device_info device_svm_capabilities = 0x1053;
inline constexpr cl_bitfield svm_coarse_grain_buffer = 1u << 0;
inline constexpr cl_bitfield svm_fine_grain_buffer = 1u << 1;
inline constexpr cl_bitfield svm_fine_grain_system = 1u << 2;
inline constexpr cl_bitfield svm_atomics = 1u << 3;
inline constexpr cl_mem_flags mem_svm_fine_grain_buffer = 1u << 10;
inline constexpr cl_mem_flags mem_svm_atomics = 1u << 11;

}  // namespace clpool::opencl
