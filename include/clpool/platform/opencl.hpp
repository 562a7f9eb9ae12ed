// The OpenCL headers as clpool includes them: CL-HPP pinned to OpenCL 1.2, linkable without libOpenCL.
#pragma once

// clpool pins the CL-HPP target itself and works with or without
// CL_HPP_ENABLE_EXCEPTIONS: it calls the C API and checks codes, and uses the
// C++ types only as owners. It needs OpenCL 1.2 (clEnqueueMigrateMemObjects).
#ifndef CL_HPP_TARGET_OPENCL_VERSION
#define CL_HPP_TARGET_OPENCL_VERSION 120
#endif
#ifndef CL_HPP_MINIMUM_OPENCL_VERSION
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#endif
#if CL_HPP_TARGET_OPENCL_VERSION < 120
#error "clpool needs CL_HPP_TARGET_OPENCL_VERSION >= 120 (OpenCL 1.2)"
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS  // clCreateCommandQueue: the call every 1.2+ driver has
#endif
#include <CL/opencl.hpp>

// CL-HPP defines Device::default_, Context::default_ and CommandQueue::default_ as inline static
// members in every translation unit that includes it; their destructors name these three calls,
// so a program that includes clpool (the umbrella header) but uses only host pools would need
// -lOpenCL just to link. Weak references let it link without: they are called only on a non-null
// handle, which only OpenCL itself can have made (and then libOpenCL is linked and they resolve).
#if defined(__GNUC__) && defined(__ELF__)
#pragma weak clReleaseDevice
#pragma weak clReleaseContext
#pragma weak clReleaseCommandQueue
#endif
