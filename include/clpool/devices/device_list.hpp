// Device listing and facts: list_devices, query_device_facts, host_device_facts.
#pragma once

#include <clpool/backends/host.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/has_opencl.hpp>
#include <clpool/devices/device_description.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/backends/opencl.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clpool {

// True if the space-separated extension list names `extension` exactly.
inline bool has_extension(std::string_view extensions, std::string_view extension) noexcept {
    std::size_t pos = 0;
    while (pos < extensions.size()) {
        const auto end = std::min(extensions.find(' ', pos), extensions.size());
        if (extensions.substr(pos, end - pos) == extension) return true;
        pos = end + 1;
    }
    return false;
}

// The host backend's facts: shares host memory, no fp16 kernels, the
// HostBackend's allocation limit and alignment.
inline DeviceFacts host_device_facts() noexcept {
    const HostBackend b;
    return {true, false, b.max_alloc_size(), b.alignment(), 0};
}

#ifdef CLPOOL_HAS_OPENCL
// Queries a device's facts. Throws driver_error if the device cannot be queried.
inline DeviceFacts query_device_facts(cl_device_id d) {
    DeviceFacts f;
    f.unified_memory = opencl::device_info<cl_bool>(d, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
    f.fp16 = has_extension(opencl::device_string(d, CL_DEVICE_EXTENSIONS), "cl_khr_fp16");
    f.max_alloc = static_cast<std::size_t>(opencl::device_info<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    f.base_address_align = opencl::device_info<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
    f.global_memory = static_cast<std::size_t>(opencl::device_info<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
    return f;
}

namespace detail {
inline std::string platform_string(cl_platform_id p, cl_platform_info what) {
    std::size_t n = 0;
    if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}
inline DeviceType type_of(cl_device_type t) noexcept {
    if (t & CL_DEVICE_TYPE_GPU) return DeviceType::gpu;
    if (t & CL_DEVICE_TYPE_CPU) return DeviceType::cpu;
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return DeviceType::accelerator;
    return DeviceType::other;
}
}  // namespace detail
#endif

// Every OpenCL device of every platform, in selector order. Empty where no
// platform is installed or the library is built without OpenCL. Throws
// driver_error if a device found cannot be queried. Cost: driver queries
// (the first call loads the drivers). Thread-safe.
inline std::vector<DeviceDescription> list_devices() {
    std::vector<DeviceDescription> out;
#ifdef CLPOOL_HAS_OPENCL
    cl_uint nplat = 0;
    // No ICD, or CL_PLATFORM_NOT_FOUND_KHR: no OpenCL here, the host backend serves.
    if (clGetPlatformIDs(0, nullptr, &nplat) != CL_SUCCESS || nplat == 0) return out;
    std::vector<cl_platform_id> plats(nplat);
    if (clGetPlatformIDs(nplat, plats.data(), nullptr) != CL_SUCCESS) return out;
    for (std::size_t pi = 0; pi < plats.size(); ++pi) {
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, nullptr, &ndev) != CL_SUCCESS || ndev == 0) continue;
        std::vector<cl_device_id> devs(ndev);
        opencl::check(clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, ndev, devs.data(), nullptr), "clGetDeviceIDs");
        const auto pname = detail::platform_string(plats[pi], CL_PLATFORM_NAME);
        const auto pvendor = detail::platform_string(plats[pi], CL_PLATFORM_VENDOR);
        for (std::size_t di = 0; di < devs.size(); ++di) {
            DeviceDescription d;
            d.index = out.size();
            d.platform_index = pi;
            d.device_index = di;
            d.platform_name = pname;
            d.platform_vendor = pvendor;
            d.device_name = opencl::device_string(devs[di], CL_DEVICE_NAME);
            d.type = detail::type_of(opencl::device_info<cl_device_type>(devs[di], CL_DEVICE_TYPE));
            d.id = devs[di];
            out.push_back(std::move(d));
        }
    }
#endif
    return out;
}

}  // namespace clpool
