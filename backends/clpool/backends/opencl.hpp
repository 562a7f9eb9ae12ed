// OpenCLBackend: pools of cl::Buffer over one OpenCL context, through OpenCL-CLHPP.
#pragma once

#include <clpool/platform/opencl.hpp>

#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/platform/fork_locks.hpp>
#include <clpool/platform/process_state.hpp>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace clpool {

namespace opencl {

// True for the codes a driver returns when it has no memory to give.
constexpr bool is_out_of_memory(cl_int code) noexcept {
    return code == CL_MEM_OBJECT_ALLOCATION_FAILURE || code == CL_OUT_OF_RESOURCES || code == CL_OUT_OF_HOST_MEMORY;
}

inline void check(cl_int code, const char* what) {
    if (code != CL_SUCCESS) throw driver_error(what, code);
}

// clCreateCommandQueue: an in-order queue with no properties, the call every
// OpenCL 1.2+ driver has. Headers declare it deprecated when they target 2.0+
// (an application that included <CL/opencl.hpp> before clpool gets 3.0), and
// clCreateCommandQueueWithProperties is missing from 1.2 drivers: so clpool
// keeps the 1.2 call and silences the warning here, for clpool's own use only.
inline cl_command_queue create_queue(cl_context context, cl_device_id device, cl_int* err) noexcept {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return clCreateCommandQueue(context, device, 0, err);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

template <class T>
T device_info(cl_device_id d, cl_device_info what) {
    T value{};
    check(clGetDeviceInfo(d, what, sizeof value, &value, nullptr), "clGetDeviceInfo");
    return value;
}

inline std::string device_string(cl_device_id d, cl_device_info what) {
    std::size_t n = 0;
    check(clGetDeviceInfo(d, what, 0, nullptr, &n), "clGetDeviceInfo");
    std::string s(n, '\0');
    check(clGetDeviceInfo(d, what, n, s.data(), nullptr), "clGetDeviceInfo");
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

// The first GPU of any platform, else the first device of any type (PoCL on
// a machine without a GPU). Throws driver_error naming what is missing.
inline cl_device_id first_gpu_or_any_device() {
    cl_uint nplat = 0;
    if (const cl_int code = clGetPlatformIDs(0, nullptr, &nplat); code != CL_SUCCESS || nplat == 0)
        throw driver_error("finding an OpenCL platform (clGetPlatformIDs found " + std::to_string(nplat) +
                               ", at least 1 needed: install an ICD, e.g. pocl-opencl-icd)",
                           code != CL_SUCCESS ? code : CL_PLATFORM_NOT_FOUND_KHR);
    std::vector<cl_platform_id> plats(nplat);
    clGetPlatformIDs(nplat, plats.data(), nullptr);
    for (cl_device_type want : {cl_device_type(CL_DEVICE_TYPE_GPU), cl_device_type(CL_DEVICE_TYPE_ALL)}) {
        for (auto p : plats) {
            cl_device_id d = nullptr;
            cl_uint n = 0;
            if (clGetDeviceIDs(p, want, 1, &d, &n) == CL_SUCCESS && n > 0) return d;
        }
    }
    throw driver_error("finding an OpenCL device (clGetDeviceIDs found 0 on " + std::to_string(nplat) +
                           " platform(s), at least 1 needed)",
                       CL_DEVICE_NOT_FOUND);
}

// Serialises the enqueue-and-wait that a backend does on its private queue.
// A driver has crashed when many threads enqueued and waited on one queue at
// once (docs/RELIABILITY.md). A hit never takes it: only a miss (a driver
// allocation) and the free of a mapped buffer do.
// All 64 are taken around fork(), so a fork child never starts with one held.
inline std::mutex& private_queue_mutex(cl_command_queue q) noexcept {
    // Few enough that fork()'s prepare handler can hold all of them with the
    // other process-wide locks (ThreadSanitizer tracks at most 64 per thread).
    static constexpr std::size_t n = 16;
    static auto* locks = [] {
        auto* l = new std::mutex[n];  // never destroyed: usable from any destructor
        auto unlock_all = [](void* p) noexcept {
            for (std::size_t i = n; i-- > 0;) static_cast<std::mutex*>(p)[i].unlock();
        };
        detail::fork_locks::add(detail::fork_rank::private_queues, {[](void* p) noexcept {
                                                                        for (std::size_t i = 0; i < n; ++i)
                                                                            static_cast<std::mutex*>(p)[i].lock();
                                                                    },
                                                                    unlock_all, unlock_all, l});
        return l;
    }();
    return locks[(reinterpret_cast<std::uintptr_t>(q) >> 6) % n];
}

// A queue's context (retained: the caller gets its own reference) and device.
inline cl::Context context_of(const cl::CommandQueue& q) {
    cl_context ctx = nullptr;
    check(clGetCommandQueueInfo(q(), CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr), "clGetCommandQueueInfo");
    return cl::Context(ctx, true);
}
inline cl_device_id device_of(const cl::CommandQueue& q) {
    cl_device_id d = nullptr;
    check(clGetCommandQueueInfo(q(), CL_QUEUE_DEVICE, sizeof d, &d, nullptr), "clGetCommandQueueInfo");
    return d;
}

inline std::vector<cl_device_id> context_devices(cl_context ctx) {
    std::size_t n = 0;
    check(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, 0, nullptr, &n), "clGetContextInfo");
    std::vector<cl_device_id> devices(n / sizeof(cl_device_id));
    check(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, n, devices.data(), nullptr), "clGetContextInfo");
    if (devices.empty()) throw driver_error("context has no devices: clGetContextInfo", CL_INVALID_CONTEXT);
    return devices;
}

// The largest single allocation every device of the context allows.
inline std::size_t max_alloc_of(cl_context ctx) {
    std::size_t m = ~std::size_t{0};
    for (cl_device_id d : context_devices(ctx))
        m = std::min<std::size_t>(m, device_info<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    return m;
}

// What each OpenCL backend keeps of its device: the context, the device, a
// private in-order queue of its own (the pool never puts commands into the
// application's queues) and the facts the pool asks for. Throws driver_error
// naming `queue_what` if the queue cannot be made.
struct private_device {
    private_device(const cl::Context& ctx, cl_device_id dev, const char* queue_what) : context(ctx), device(dev) {
        cl_int err = CL_SUCCESS;
        cl_command_queue q = create_queue(context(), device, &err);
        check(err, queue_what);
        queue = cl::CommandQueue(q, false);  // adopt: no extra retain
        clpool::detail::arm_exit_mark();      // the driver is loaded: from its exit on, leak rather than free
        max_alloc = max_alloc_of(context());
        unified = device_info<cl_bool>(device, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
    }

    // Forgets the context and queue without releasing them: for a fork child,
    // which must not touch the parent's OpenCL objects.
    void abandon() noexcept {
        context() = nullptr;
        queue() = nullptr;
    }

    cl::Context context;
    cl_device_id device = nullptr;
    cl::CommandQueue queue;
    std::size_t max_alloc = 0;  // the smallest CL_DEVICE_MAX_MEM_ALLOC_SIZE over the context's devices
    bool unified = false;       // CL_DEVICE_HOST_UNIFIED_MEMORY
};

// CL_DEVICE_MEM_BASE_ADDR_ALIGN, which OpenCL gives in bits (NVIDIA: 4096
// bits, 512 bytes), as bytes. Throws config_error naming the value unless it
// is a power of two of at least 8 bits: a sub-buffer's origin must be a
// multiple of it, and no sensible multiple exists otherwise.
inline std::size_t base_address_alignment_bytes(cl_uint bits, const std::string& device_name) {
    if (bits < 8 || (bits & (bits - 1)) != 0)
        throw config_error("clpool: device '" + device_name +
                           "' reports CL_DEVICE_MEM_BASE_ADDR_ALIGN = " + std::to_string(bits) +
                           " bits; sub-allocation needs a power of two of at least 8 bits (one byte)");
    return bits / 8;
}

// The alignment every device of the context needs for a sub-buffer's origin, in bytes.
inline std::size_t base_address_alignment_of(cl_context ctx) {
    std::size_t a = 1;
    for (cl_device_id d : context_devices(ctx))
        a = std::max(a, base_address_alignment_bytes(device_info<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN),
                                                     device_string(d, CL_DEVICE_NAME)));
    return a;
}

// A sub-buffer of n bytes at offset of `segment` (for SubAllocated); its
// flags are the segment's. Never throws.
inline Allocation<cl::Buffer> sub_buffer(const cl::Buffer& segment, std::size_t offset, std::size_t n) noexcept {
    cl_buffer_region region{offset, n};
    cl_int err = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(segment(), 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err != CL_SUCCESS || !sub)
        return {cl::Buffer(), AllocStatus::failed, err != CL_SUCCESS ? err : CL_INVALID_VALUE};
    return {cl::Buffer(sub, false), AllocStatus::ok, CL_SUCCESS};
}

// Another reference to the same buffer. Never throws.
inline cl::Buffer share(const cl::Buffer& b) noexcept {
    if (b() && clRetainMemObject(b()) == CL_SUCCESS) return cl::Buffer(b(), false);
    return cl::Buffer();
}

// The end of a backend's commit on its private queue: waits for `done` (if `err`, the enqueue's
// code, is CL_SUCCESS) and releases it; returns the command's own failure code where it has one
// (e.g. CL_MEM_OBJECT_ALLOCATION_FAILURE), which says more than the wait's generic error.
inline cl_int finish_commit(cl_int err, cl_event done) noexcept {
    if (err == CL_SUCCESS) err = clWaitForEvents(1, &done);
    if (done) {
        cl_int status = CL_COMPLETE;
        clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
        if (status < 0) err = status;
        clReleaseEvent(done);
    }
    return err;
}

// A failed allocation with the driver's code, out_of_memory where the code says so.
template <class Memory>
Allocation<Memory> failed_allocation(cl_int err) noexcept {
    return {Memory(), is_out_of_memory(err) ? AllocStatus::out_of_memory : AllocStatus::failed, err};
}

}  // namespace opencl

// Makes committed cl::Buffers in one context. Buffers are created with
// access_flags (CL_MEM_READ_WRITE unless given) plus CL_MEM_ALLOC_HOST_PTR for
// host_pinned memory, then committed on the backend's own queue:
// device-local by migrating them to the device with undefined content,
// host-pinned by mapping them once. Drivers allocate lazily (at first use), so committing makes failures show at allocate and keeps
// first-touch off the hit path. Thread-safe.
class OpenCLBackend {
public:
    using memory_type = cl::Buffer;
    using sub_memory_type = cl::Buffer;  // SubAllocated<OpenCLBackend>'s blocks: sub-buffers
    using event_type = cl::Event;
    // event_complete and wait_for (release_after); abandon (a fork child).
    static constexpr BackendAbilities abilities = BackendAbility::events | BackendAbility::abandon;

    // Uses the first device of the context for committing and for the
    // device facts (max allocation: the smallest over the context's devices).
    // Throws driver_error if the context cannot be queried.
    OpenCLBackend(const cl::Context& context, cl_mem_flags access_flags = CL_MEM_READ_WRITE)
        : OpenCLBackend(context, opencl::context_devices(context())[0], access_flags) {}

    // Commits on the queue's device (not on the queue itself: the pool never
    // puts commands into the application's queues).
    OpenCLBackend(const cl::CommandQueue& queue, cl_mem_flags access_flags = CL_MEM_READ_WRITE)
        : OpenCLBackend(opencl::context_of(queue), opencl::device_of(queue), access_flags) {}

    OpenCLBackend(const cl::Context& context, cl_device_id device, cl_mem_flags access_flags)
        : dev_(context, device, "clCreateCommandQueue"), access_flags_(access_flags) {}

    std::size_t max_alloc_size() const noexcept { return dev_.max_alloc; }
    bool unified_memory() const noexcept { return dev_.unified; }
    const char* name() const noexcept { return "opencl"; }
    const cl::Context& context() const noexcept { return dev_.context; }
    cl_device_id device() const noexcept { return dev_.device; }
    cl_mem_flags access_flags() const noexcept { return access_flags_; }

    cl_mem_flags flags_for(MemoryKind kind) const noexcept {
        return access_flags_ | (kind == MemoryKind::host_pinned ? CL_MEM_ALLOC_HOST_PTR : 0);
    }

    Allocation<cl::Buffer> allocate(std::size_t n, MemoryKind kind) noexcept {
        cl_int err = CL_SUCCESS;
        cl_mem mem = clCreateBuffer(dev_.context(), flags_for(kind), n, nullptr, &err);
        if (err != CL_SUCCESS) return failure(err);
        cl::Buffer buffer(mem, false);  // adopt the creation reference
        err = commit(mem, n, kind);
        if (err != CL_SUCCESS) return failure(err);
        return {std::move(buffer), AllocStatus::ok, CL_SUCCESS};
    }

    // Completion test for release_after: a command that ended in error no
    // longer uses its buffers either.
    static bool event_complete(const cl::Event& e) noexcept {
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
            return true;  // an invalid event guards nothing
        return status <= CL_COMPLETE;
    }
    static void wait_for(const cl::Event* events, std::size_t count) noexcept {
        for (std::size_t i = 0; i < count; ++i) {
            cl_event e = events[i]();
            if (e) clWaitForEvents(1, &e);
        }
    }

    // Forgets the context and commit queue without releasing them (a fork child).
    void abandon() noexcept { dev_.abandon(); }

    // For SubAllocated: a sub-buffer's origin must be a multiple of this
    // (CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes, the largest over the context's
    // devices). Throws config_error if a device reports an unusable value.
    std::size_t sub_alignment() const { return opencl::base_address_alignment_of(dev_.context()); }
    static Allocation<cl::Buffer> sub_range(const cl::Buffer& segment, std::size_t offset, std::size_t n) noexcept {
        return opencl::sub_buffer(segment, offset, n);
    }
    static cl::Buffer whole_range(const cl::Buffer& m, std::size_t) noexcept { return opencl::share(m); }

private:
    static Allocation<cl::Buffer> failure(cl_int err) noexcept { return opencl::failed_allocation<cl::Buffer>(err); }

    cl_int commit(cl_mem mem, std::size_t n, MemoryKind kind) noexcept {
        std::lock_guard serial(opencl::private_queue_mutex(dev_.queue()));
        cl_event done = nullptr;
        cl_int err = CL_SUCCESS;
        if (kind == MemoryKind::device_local) {
            err = clEnqueueMigrateMemObjects(dev_.queue(), 1, &mem, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, nullptr,
                                             &done);
        } else {
            void* p = clEnqueueMapBuffer(dev_.queue(), mem, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0, nullptr,
                                         nullptr, &err);
            if (err == CL_SUCCESS) err = clEnqueueUnmapMemObject(dev_.queue(), mem, p, 0, nullptr, &done);
        }
        return opencl::finish_commit(err, done);
    }

    opencl::private_device dev_;  // its queue commits new buffers
    cl_mem_flags access_flags_;
};

static_assert(Backend<OpenCLBackend>);

}  // namespace clpool
