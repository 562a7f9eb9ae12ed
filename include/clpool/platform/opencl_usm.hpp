// The cl_intel_unified_shared_memory entry points, looked up per platform (an extension: no loader exports them).
#pragma once

#include <clpool/platform/opencl.hpp>

#include <map>
#include <new>
#include <mutex>

namespace clpool::opencl {

// The extension's calls clpool uses, as the extension specifies them
// (properties are cl_mem_properties_intel, a 64-bit cl_properties). A member is
// nullptr where the platform does not offer it.
struct usm_functions {
    using host_alloc_fn = void*(CL_API_CALL*)(cl_context, const cl_ulong*, size_t, cl_uint, cl_int*);
    using device_alloc_fn = void*(CL_API_CALL*)(cl_context, cl_device_id, const cl_ulong*, size_t, cl_uint, cl_int*);
    using free_fn = cl_int(CL_API_CALL*)(cl_context, void*);
    using set_arg_fn = cl_int(CL_API_CALL*)(cl_kernel, cl_uint, const void*);
    using memcpy_fn = cl_int(CL_API_CALL*)(cl_command_queue, cl_bool, void*, const void*, size_t, cl_uint,
                                           const cl_event*, cl_event*);
    using fill_fn = cl_int(CL_API_CALL*)(cl_command_queue, void*, const void*, size_t, size_t, cl_uint, const cl_event*,
                                         cl_event*);

    host_alloc_fn host_alloc = nullptr;      // clHostMemAllocINTEL
    device_alloc_fn device_alloc = nullptr;  // clDeviceMemAllocINTEL
    device_alloc_fn shared_alloc = nullptr;  // clSharedMemAllocINTEL
    free_fn blocking_free = nullptr;         // clMemBlockingFreeINTEL
    set_arg_fn set_kernel_arg = nullptr;     // clSetKernelArgMemPointerINTEL
    memcpy_fn memcpy = nullptr;              // clEnqueueMemcpyINTEL
    fill_fn fill = nullptr;                  // clEnqueueMemFillINTEL

    // Every call clpool needs is there.
    bool complete() const noexcept {
        return host_alloc && device_alloc && shared_alloc && blocking_free && set_kernel_arg && memcpy && fill;
    }
};

// The platform's table, looked up once and kept for the process (never
// freed: usable from any destructor). Never throws; a member the platform
// lacks stays nullptr.
inline const usm_functions* usm_functions_of(cl_platform_id platform) noexcept {
    static std::mutex* lock = new std::mutex;
    static auto* tables = new std::map<cl_platform_id, usm_functions*>;
    std::lock_guard guard(*lock);
    if (auto it = tables->find(platform); it != tables->end()) return it->second;
    auto* t = new (std::nothrow) usm_functions;
    if (!t) return nullptr;
    auto get = [&](const char* name) { return clGetExtensionFunctionAddressForPlatform(platform, name); };
    t->host_alloc = reinterpret_cast<decltype(t->host_alloc)>(get("clHostMemAllocINTEL"));
    t->device_alloc = reinterpret_cast<decltype(t->device_alloc)>(get("clDeviceMemAllocINTEL"));
    t->shared_alloc = reinterpret_cast<decltype(t->shared_alloc)>(get("clSharedMemAllocINTEL"));
    t->blocking_free = reinterpret_cast<decltype(t->blocking_free)>(get("clMemBlockingFreeINTEL"));
    t->set_kernel_arg = reinterpret_cast<decltype(t->set_kernel_arg)>(get("clSetKernelArgMemPointerINTEL"));
    t->memcpy = reinterpret_cast<decltype(t->memcpy)>(get("clEnqueueMemcpyINTEL"));
    t->fill = reinterpret_cast<decltype(t->fill)>(get("clEnqueueMemFillINTEL"));
    try {
        tables->emplace(platform, t);
    } catch (...) {
        delete t;
        return nullptr;
    }
    return t;
}

}  // namespace clpool::opencl
