// Device enumeration and choice for the tools, by the strings users type: auto, gpu, cpu, host, P:D.
// A stand-in until include/clpool/device.hpp (issue 6) lands; same strings, same CLPOOL_DEVICE.
#pragma once

#include <clpool/clpool.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace clpool::tools {

// What the tools show about one OpenCL device.
struct DeviceFacts {
    std::size_t platform_index = 0, device_index = 0;
    std::string platform, name, type, version;
    bool unified = false;        // CL_DEVICE_HOST_UNIFIED_MEMORY
    bool fp16 = false;           // cl_khr_fp16 in CL_DEVICE_EXTENSIONS
    std::uint64_t max_alloc = 0;
    std::uint64_t global_mem = 0;
    std::uint64_t align_bytes = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN (bits) / 8
#ifdef CLPOOL_HAS_OPENCL
    cl_device_id id = nullptr;
#endif
};

// A bad --device / CLPOOL_DEVICE value; the message lists what exists.
class device_spec_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// The chosen device: the host backend, or one OpenCL device.
struct DeviceChoice {
    bool host = true;
    std::string why;  // how it was chosen, for the report
    DeviceFacts facts;
};

#ifdef CLPOOL_HAS_OPENCL
inline std::string device_type_name(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return "GPU";
    if (t & CL_DEVICE_TYPE_CPU) return "CPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    return "other";
}
#endif

// Every OpenCL device of every platform, in platform then device order;
// empty where no platform exists (no ICD, or built without OpenCL).
// Throws driver_error if a device cannot be queried.
inline std::vector<DeviceFacts> list_devices() {
    std::vector<DeviceFacts> out;
#ifdef CLPOOL_HAS_OPENCL
    cl_uint nplat = 0;
    if (clGetPlatformIDs(0, nullptr, &nplat) != CL_SUCCESS || nplat == 0) return out;  // no ICD: -1001
    std::vector<cl_platform_id> plats(nplat);
    opencl::check(clGetPlatformIDs(nplat, plats.data(), nullptr), "clGetPlatformIDs");
    for (std::size_t p = 0; p < plats.size(); ++p) {
        std::size_t n = 0;
        opencl::check(clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, 0, nullptr, &n), "clGetPlatformInfo");
        std::string pname(n, '\0');
        opencl::check(clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, n, pname.data(), nullptr), "clGetPlatformInfo");
        while (!pname.empty() && pname.back() == '\0') pname.pop_back();
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &ndev) != CL_SUCCESS || ndev == 0) continue;
        std::vector<cl_device_id> devs(ndev);
        opencl::check(clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devs.data(), nullptr), "clGetDeviceIDs");
        for (std::size_t d = 0; d < devs.size(); ++d) {
            DeviceFacts f;
            f.platform_index = p;
            f.device_index = d;
            f.platform = pname;
            f.id = devs[d];
            f.name = opencl::device_string(devs[d], CL_DEVICE_NAME);
            f.version = opencl::device_string(devs[d], CL_DEVICE_VERSION);
            f.type = device_type_name(opencl::device_info<cl_device_type>(devs[d], CL_DEVICE_TYPE));
            f.unified = opencl::device_info<cl_bool>(devs[d], CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
            f.fp16 = opencl::device_string(devs[d], CL_DEVICE_EXTENSIONS).find("cl_khr_fp16") != std::string::npos;
            f.max_alloc = opencl::device_info<cl_ulong>(devs[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE);
            f.global_mem = opencl::device_info<cl_ulong>(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE);
            f.align_bytes = opencl::device_info<cl_uint>(devs[d], CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
            out.push_back(std::move(f));
        }
    }
#endif
    return out;
}

// The spec to use: `option` if given, else CLPOOL_DEVICE, else "auto".
inline std::string device_spec(const std::string& option) {
    if (!option.empty()) return option;
    if (const char* env = std::getenv("CLPOOL_DEVICE"); env && *env) return env;
    return "auto";
}

// Chooses a device by spec: "auto" (a GPU, else any OpenCL device, else the
// host backend), "gpu", "cpu", "host", or "P:D" (platform and device index as
// `clpool-info` lists them). Throws device_spec_error naming the spec and
// listing the devices that exist when nothing matches.
inline DeviceChoice choose_device(const std::string& spec, const std::vector<DeviceFacts>& devices) {
    auto listing = [&] {
        std::string s = "; devices here:";
        if (devices.empty()) s += " none (no OpenCL platform), only 'host'";
        for (const auto& d : devices)
            s += " " + std::to_string(d.platform_index) + ":" + std::to_string(d.device_index) + " (" + d.type +
                 ", " + d.name + ")";
        return s;
    };
    auto pick = [&](const char* type) -> const DeviceFacts* {
        for (const auto& d : devices)
            if (d.type == type) return &d;
        return nullptr;
    };
    DeviceChoice c;
    if (spec == "host") {
        c.why = "asked for the host backend";
        return c;
    }
    if (spec == "auto") {
        const DeviceFacts* d = pick("GPU");
        if (!d && !devices.empty()) d = &devices.front();
        if (!d) {
            c.why = "auto: no OpenCL platform found, using the host backend";
            return c;
        }
        c.host = false;
        c.facts = *d;
        c.why = d->type == "GPU" ? "auto: the first GPU" : "auto: no GPU, the first OpenCL device";
        return c;
    }
    if (spec == "gpu" || spec == "cpu") {
        const DeviceFacts* d = pick(spec == "gpu" ? "GPU" : "CPU");
        if (!d) throw device_spec_error("device '" + spec + "': no " + (spec == "gpu" ? "GPU" : "CPU") +
                                        " device found" + listing());
        c.host = false;
        c.facts = *d;
        c.why = "asked for " + spec;
        return c;
    }
    if (const auto colon = spec.find(':'); colon != std::string::npos) {
        try {
            std::size_t used1 = 0, used2 = 0;
            const std::string ps = spec.substr(0, colon), ds = spec.substr(colon + 1);
            const unsigned long p = std::stoul(ps, &used1), d = std::stoul(ds, &used2);
            if (used1 == ps.size() && used2 == ds.size())
                for (const auto& f : devices)
                    if (f.platform_index == p && f.device_index == d) {
                        c.host = false;
                        c.facts = f;
                        c.why = "asked for " + spec;
                        return c;
                    }
        } catch (const std::exception&) {
        }
        throw device_spec_error("device '" + spec + "' matches no device" + listing());
    }
    throw device_spec_error("device '" + spec + "' is not one of auto, gpu, cpu, host, P:D" + listing());
}

#ifdef CLPOOL_HAS_OPENCL
// A context and an in-order queue on one device, released by their owners.
// Throws driver_error.
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
