// What clpool knows of a device: backend and type, the description list_devices() gives, facts, a selector's match.
#pragma once

#include <clpool/core/has_opencl.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/backends/opencl.hpp>
#endif

#include <cstddef>
#include <string>

namespace clpool {

// Which Backend a device's pools use.
enum class BackendKind : unsigned char { opencl, host };
// What kind of device it is; the host backend reports cpu.
enum class DeviceType : unsigned char { gpu, cpu, accelerator, other };

constexpr const char* to_string(BackendKind b) noexcept { return b == BackendKind::opencl ? "opencl" : "host"; }
constexpr const char* to_string(DeviceType t) noexcept {
    switch (t) {
        case DeviceType::gpu: return "gpu";
        case DeviceType::cpu: return "cpu";
        case DeviceType::accelerator: return "accelerator";
        default: return "other";
    }
}

// The facts about a device that the pools and their users need.
struct DeviceFacts {
    bool unified_memory = false;         // shares host memory (integrated GPU, CPU device, host backend)
    bool fp16 = false;                   // cl_khr_fp16: half-precision kernels are available
    std::size_t max_alloc = 0;           // CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes
    std::size_t base_address_align = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes (OpenCL reports bits)
    std::size_t global_memory = 0;       // CL_DEVICE_GLOBAL_MEM_SIZE, bytes (0: unknown)
};

// One OpenCL device as enumerated: list_devices() order is platform by
// platform, each platform's devices in the order the driver gives them.
struct DeviceDescription {
    std::size_t index = 0;           // position in list_devices()
    std::size_t platform_index = 0;  // the "P" of a "P:D" selector
    std::size_t device_index = 0;    // the "D": position within its platform
    std::string platform_name, platform_vendor, device_name;
    DeviceType type = DeviceType::other;
#ifdef CLPOOL_HAS_OPENCL
    cl_device_id id = nullptr;
#endif
};

// What a selector resolved to: the host backend, or list_devices()[index].
struct DeviceMatch {
    BackendKind backend = BackendKind::host;
    std::size_t index = 0;
    friend bool operator==(const DeviceMatch&, const DeviceMatch&) = default;
};

}  // namespace clpool
