// Device listing and choice for the tools, through clpool/devices/ (device_list.hpp, selector.hpp): the same selectors and CLPOOL_DEVICE.
#pragma once

#include <clpool/clpool.hpp>
#include <clpool/devices/device_list.hpp>
#include <clpool/devices/selector.hpp>
#include <clpool/runtime/config.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace clpool::tools {

// What the tools show about one OpenCL device: clpool's description and facts.
struct DeviceFacts {
    std::size_t index = 0, platform_index = 0, device_index = 0;
    std::string platform, name, type;
    bool unified = false;  // CL_DEVICE_HOST_UNIFIED_MEMORY
    bool fp16 = false;  // cl_khr_fp16
    std::uint64_t max_alloc = 0;
    std::uint64_t global_mem = 0;
    std::uint64_t align_bytes = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes
#ifdef CLPOOL_HAS_OPENCL
    cl_device_id id = nullptr;
#endif
};

// The chosen device: the host backend, or one OpenCL device.
struct DeviceChoice {
    bool host = true;
    std::string why;  // how it was chosen, for the report
    DeviceFacts facts;
};

// Every OpenCL device (clpool::list_devices() order, so "N" and "P:D"
// selectors match what is shown), with its facts; empty where no platform
// exists or OpenCL is not built in. Throws driver_error if a device cannot be queried.
inline std::vector<DeviceFacts> list_device_facts() {
    std::vector<DeviceFacts> out;
#ifdef CLPOOL_HAS_OPENCL
    for (const auto& d : clpool::list_devices()) {
        const clpool::DeviceFacts f = query_device_facts(d.id);
        DeviceFacts x;
        x.index = d.index;
        x.platform_index = d.platform_index;
        x.device_index = d.device_index;
        x.platform = d.platform_name;
        x.name = d.device_name;
        x.type = to_string(d.type);
        x.unified = f.unified_memory;
        x.fp16 = f.fp16;
        x.max_alloc = f.max_alloc;
        x.global_mem = f.global_memory;
        x.align_bytes = f.base_address_align;
        x.id = d.id;
        out.push_back(std::move(x));
    }
#endif
    return out;
}

// The selector to use and where it came from: `option` (--device) if
// given, else CLPOOL_DEVICE, else "auto". CLPOOL_DEVICE is read as the
// library reads it (config::device_spec): set but blank is a config_error.
struct DeviceSpec {
    std::string selector, source;
};
inline DeviceSpec device_spec(const std::string& option) {
    if (!option.empty()) return {option, "--device"};
    if (std::getenv("CLPOOL_DEVICE")) return {config::device_spec(), "CLPOOL_DEVICE"};
    return {"auto", "the default"};
}

// Resolves a selector with clpool::match_device (docs/DEVICES.md: auto, gpu,
// cpu, accelerator, host, N, P:D, platform:TEXT, device:TEXT, TEXT).
// Throws config_error naming the selector and listing the devices when
// nothing matches.
inline DeviceChoice choose_device(const DeviceSpec& spec, const std::vector<DeviceFacts>& devices) {
#ifdef CLPOOL_HAS_OPENCL
    const auto described = clpool::list_devices();
#else
    const std::vector<DeviceDescription> described;
#endif
    const DeviceMatch m = match_device(spec.selector, described, spec.source);
    DeviceChoice c;
    c.why = spec.source + " '" + spec.selector + "'";
    if (m.backend == BackendKind::host) {
        // "auto" with no device; not "host" as asked, in whatever case or spacing.
        if (described.empty()) c.why += ": no OpenCL device found, the host backend";
        return c;
    }
    for (const auto& d : devices)
        if (d.index == m.index) {
            c.host = false;
            c.facts = d;
        }
    return c;
}

#ifdef CLPOOL_HAS_OPENCL
// A context and an in-order queue of the tool's own on one device, so its
// measurements start from empty pools. Throws driver_error.
struct DeviceSession {
    cl::Context context;
    cl::CommandQueue queue;
    cl_device_id device = nullptr;

    explicit DeviceSession(cl_device_id d) : device(d) {
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        opencl::check(err, "clCreateContext");
        context = cl::Context(ctx, false);
        cl_command_queue q = clCreateCommandQueue(ctx, d, 0, &err);
        opencl::check(err, "clCreateCommandQueue");
        queue = cl::CommandQueue(q, false);
    }
};
#endif

}  // namespace clpool::tools
