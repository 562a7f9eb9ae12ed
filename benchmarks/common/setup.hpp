// Benchmark helpers: the size range, the OpenCL device, and pool factories per configuration.
#pragma once

#include <clpool/clpool.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace clpool::bench {

// CLPOOL_BENCH_MAX_BYTES: the largest size a benchmark sweeps (default 256 MiB);
// CI sets it small so each program runs for a moment. Throws config_error if invalid.
inline std::size_t max_bytes() {
    static const auto s = config::read_setting<std::uint64_t>(
        "CLPOOL_BENCH_MAX_BYTES", std::uint64_t{256} << 20, [](std::string_view name, std::string_view text) {
            const std::string t(text);
            char* end = nullptr;
            const auto v = std::strtoull(t.c_str(), &end, 10);
            if (t.empty() || end != t.c_str() + t.size() || v < 256)
                throw config_error("clpool: " + std::string(name) + "='" + t + "' is not a byte count of at least 256");
            return static_cast<std::uint64_t>(v);
        });
    return static_cast<std::size_t>(s.get());
}

// 256 B, 1 KiB, 4 KiB ... up to max_bytes(): factors of four.
inline std::vector<std::int64_t> sizes() {
    std::vector<std::int64_t> out;
    for (std::size_t n = 256; n <= max_bytes(); n *= 4) out.push_back(static_cast<std::int64_t>(n));
    return out;
}

inline void size_args(benchmark::internal::Benchmark* b) {
    for (auto n : sizes()) b->Arg(n);
}

#ifdef CLPOOL_HAS_OPENCL
// The benchmark device: the first GPU of any platform, else the first device
// (PoCL on a CPU-only machine). Never destroyed: no OpenCL call at exit.
struct Device {
    cl::Context context;
    cl_device_id device = nullptr;
    cl::CommandQueue queue;
    std::string description;

    static Device& get() {
        static Device* d = new Device(make());
        return *d;
    }

private:
    static Device make() {
        const cl_device_id chosen = opencl::first_gpu_or_any_device();  // throws if there is none
        Device d;
        cl_int err = CL_SUCCESS;
        d.context = cl::Context(clCreateContext(nullptr, 1, &chosen, nullptr, nullptr, &err), false);
        opencl::check(err, "clCreateContext");
        d.device = chosen;
        d.queue = cl::CommandQueue(clCreateCommandQueue(d.context(), chosen, 0, &err), false);
        opencl::check(err, "clCreateCommandQueue");
        d.description = opencl::device_string(chosen, CL_DEVICE_NAME) + " (" +
                        opencl::device_string(chosen, CL_DRIVER_VERSION) + ")";
        return d;
    }
};
#endif

// A backend of type B on its natural memory: the benchmark device for
// OpenCLBackend, aligned host memory for HostBackend, and a SubAllocated one
// over its parent's.
template <class B>
B natural_backend() {
    if constexpr (requires { typename B::parent_type; }) {  // SubAllocated<Parent>
        return B(natural_backend<typename B::parent_type>());
    }
#ifdef CLPOOL_HAS_OPENCL
    else if constexpr (std::is_constructible_v<B, const cl::Context&>) {  // OpenCLBackend, SVMBackend, ...
        return B(Device::get().context);
    }
#endif
    else {
        return B{};
    }
}

// A pool of type P on its natural backend.
template <class P>
std::unique_ptr<P> make_pool(typename P::limit_policy limits = typename P::limit_policy{}) {
    return std::make_unique<P>(natural_backend<typename P::backend_type>(), limits);
}

// Adds the machine's device to the benchmark context (printed and in the JSON).
inline void describe_context() {
#ifdef CLPOOL_HAS_OPENCL
    try {
        benchmark::AddCustomContext("opencl_device", Device::get().description);
    } catch (const std::exception& e) {
        benchmark::AddCustomContext("opencl_device", std::string("none: ") + e.what());
    }
#endif
}

}  // namespace clpool::bench
