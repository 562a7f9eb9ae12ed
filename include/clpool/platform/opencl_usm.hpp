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
    void*(CL_API_CALL* host_alloc)(cl_context, const cl_ulong*, size_t, cl_uint, cl_int*) = nullptr;
    void*(CL_API_CALL* device_alloc)(cl_context, cl_device_id, const cl_ulong*, size_t, cl_uint, cl_int*) = nullptr;
    void*(CL_API_CALL* shared_alloc)(cl_context, cl_device_id, const cl_ulong*, size_t, cl_uint, cl_int*) = nullptr;
    cl_int(CL_API_CALL* blocking_free)(cl_context, void*) = nullptr;
    cl_int(CL_API_CALL* set_kernel_arg)(cl_kernel, cl_uint, const void*) = nullptr;
    cl_int(CL_API_CALL* memcpy)(cl_command_queue, cl_bool, void*, const void*, size_t, cl_uint, const cl_event*,
                                cl_event*) = nullptr;
    cl_int(CL_API_CALL* fill)(cl_command_queue, void*, const void*, size_t, size_t, cl_uint, const cl_event*,
                              cl_event*) = nullptr;

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
