// USMBackend: pools of Intel unified shared memory (cl_intel_unified_shared_memory): device, host or shared.
#pragma once

#include <clpool/backends/opencl.hpp>
#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/platform/opencl_usm.hpp>

#include <cstddef>
#include <mutex>
#include <string>
#include <utility>

namespace clpool {

// Which USM allocation a pool makes: clDeviceMemAllocINTEL (device-resident,
// the default), clHostMemAllocINTEL (host memory the device reads over the
// link) or clSharedMemAllocINTEL (migrates on use).
enum class USMKind : unsigned char { device, host, shared };

constexpr const char* to_string(USMKind k) noexcept {
    return k == USMKind::device ? "device" : k == USMKind::host ? "host" : "shared";
}

// n bytes of USM at a pointer, not owned, with the platform's calls: what a
// handle of a USM pool gives (h.buffer().get(), h.buffer().as<float>()).
// Pass it to a kernel with clpool::set_kernel_arg (clSetKernelArgMemPointerINTEL).
class USMSpan {
public:
    USMSpan() noexcept = default;
    USMSpan(void* pointer, std::size_t bytes, const opencl::usm_functions* calls) noexcept
        : pointer_(pointer), bytes_(bytes), calls_(calls) {}

    void* get() const noexcept { return pointer_; }
    template <class T>
    T* as() const noexcept {
        return static_cast<T*>(pointer_);
    }
    std::size_t size() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return pointer_ != nullptr; }
    // The platform's extension calls (never nullptr for a span a USM pool made).
    const opencl::usm_functions* calls() const noexcept { return calls_; }

private:
    void* pointer_ = nullptr;
    std::size_t bytes_ = 0;
    const opencl::usm_functions* calls_ = nullptr;
};

// One USM allocation, owned: freed with clMemBlockingFreeINTEL (which waits
// for the commands that use it) when destroyed.
class USMMemory : public USMSpan {
public:
    USMMemory() noexcept = default;
    USMMemory(cl_context context, void* pointer, std::size_t bytes, const opencl::usm_functions* calls) noexcept
        : USMSpan(pointer, bytes, calls), context_(context) {
        if (context_) clRetainContext(context_);
    }
    USMMemory(USMMemory&& o) noexcept
        : USMSpan(std::exchange(static_cast<USMSpan&>(o), USMSpan())), context_(std::exchange(o.context_, nullptr)) {}
    USMMemory& operator=(USMMemory&& o) noexcept {
        if (this != &o) {
            release_now();
            static_cast<USMSpan&>(*this) = std::exchange(static_cast<USMSpan&>(o), USMSpan());
            context_ = std::exchange(o.context_, nullptr);
        }
        return *this;
    }
    USMMemory(const USMMemory&) = delete;
    USMMemory& operator=(const USMMemory&) = delete;
    ~USMMemory() { release_now(); }

private:
    void release_now() noexcept {
        if (context_) {
            if (get() && calls()) calls()->blocking_free(context_, get());
            clReleaseContext(context_);
        }
        static_cast<USMSpan&>(*this) = USMSpan();
        context_ = nullptr;
    }

    cl_context context_ = nullptr;
};

namespace opencl {
// The USM calls of the device's platform. Throws config_error naming the
// device and cl_intel_unified_shared_memory when it lacks the extension or a call.
inline const usm_functions& usm_functions_for(cl_device_id device) {
    const std::string extensions = device_string(device, CL_DEVICE_EXTENSIONS);
    cl_platform_id platform = device_info<cl_platform_id>(device, CL_DEVICE_PLATFORM);
    const usm_functions* calls =
        extensions.find("cl_intel_unified_shared_memory") != std::string::npos ? usm_functions_of(platform) : nullptr;
    if (!calls || !calls->complete())
        throw config_error("clpool: device '" + device_string(device, CL_DEVICE_NAME) + "' (" +
                           device_string(device, CL_DEVICE_VERSION) +
                           ") does not offer cl_intel_unified_shared_memory" +
                           (calls ? " in full (a call is missing from its platform)" : "") +
                           "; use SVMArenaPool (OpenCL 2.0 SVM) or OffsetArenaPool on this device");
    return *calls;
}
}  // namespace opencl

// Makes USM allocations of one kind on one device of a context, each
// committed by a fill on the backend's own queue. A pool over it whose flag
// policy asks for host-pinned memory gets host USM whatever the kind.
// As for SVM, freeing is not guarded by a reference count: the pool waits for
// a block's release_after events before it frees or re-carves it, and
// clMemBlockingFreeINTEL waits for the rest. Sub-allocated (USMArenaPool), a
// block is a pointer plus an offset: no driver call per block.
// Throws config_error at construction when the device lacks the extension,
// driver_error when the context cannot be queried or the queue made. Thread-safe.
class USMBackend {
public:
    using memory_type = USMMemory;
    using sub_memory_type = USMSpan;
    using event_type = cl::Event;
    static constexpr bool views_are_free = true;
    static constexpr BackendAbilities abilities =
        BackendAbility::events | BackendAbility::abandon | BackendAbility::free_waits_for_events;

    USMBackend(const cl::Context& context, USMKind kind = USMKind::device)
        : USMBackend(context, opencl::context_devices(context())[0], kind) {}
    USMBackend(const cl::CommandQueue& queue, USMKind kind = USMKind::device)
        : USMBackend(opencl::context_of(queue), opencl::device_of(queue), kind) {}
    USMBackend(const cl::Context& context, cl_device_id device, USMKind kind)
        : calls_(&opencl::usm_functions_for(device)), dev_(context, device, "clCreateCommandQueue"), kind_(kind),
          alignment_(opencl::base_address_alignment_of(context())) {}

    std::size_t max_alloc_size() const noexcept { return dev_.max_alloc; }
    bool unified_memory() const noexcept { return dev_.unified; }
    const char* name() const noexcept { return "usm"; }
    const cl::Context& context() const noexcept { return dev_.context; }
    cl_device_id device() const noexcept { return dev_.device; }
    USMKind kind() const noexcept { return kind_; }
    const opencl::usm_functions& calls() const noexcept { return *calls_; }

    Allocation<USMMemory> allocate(std::size_t n, MemoryKind memory) noexcept {
        const std::size_t bytes = n == 0 ? 1 : n;
        const auto align = static_cast<cl_uint>(alignment_);
        const USMKind k = memory == MemoryKind::host_pinned ? USMKind::host : kind_;
        cl_int err = CL_SUCCESS;
        void* p = k == USMKind::host ? calls_->host_alloc(dev_.context(), nullptr, bytes, align, &err)
                  : k == USMKind::shared
                      ? calls_->shared_alloc(dev_.context(), dev_.device, nullptr, bytes, align, &err)
                      : calls_->device_alloc(dev_.context(), dev_.device, nullptr, bytes, align, &err);
        if (!p) return opencl::failed_allocation<USMMemory>(err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
        USMMemory memory_owned(dev_.context(), p, n, calls_);
        if (err = commit(p, n); err != CL_SUCCESS) return opencl::failed_allocation<USMMemory>(err);
        return {std::move(memory_owned), AllocStatus::ok, CL_SUCCESS};
    }

    static bool event_complete(const cl::Event& e) noexcept { return OpenCLBackend::event_complete(e); }
    static void wait_for(const cl::Event* events, std::size_t count) noexcept {
        OpenCLBackend::wait_for(events, count);
    }
    void abandon() noexcept { dev_.abandon(); }

    std::size_t sub_alignment() const noexcept { return alignment_; }
    static Allocation<USMSpan> sub_range(const USMMemory& segment, std::size_t offset, std::size_t n) noexcept {
        return {USMSpan(static_cast<char*>(segment.get()) + offset, n, segment.calls()), AllocStatus::ok, CL_SUCCESS};
    }
    static USMSpan whole_range(const USMMemory& m, std::size_t n) noexcept { return USMSpan(m.get(), n, m.calls()); }

private:
    cl_int commit(void* p, std::size_t n) noexcept {
        if (n == 0) return CL_SUCCESS;
        std::lock_guard serial(opencl::private_queue_mutex(dev_.queue()));
        const unsigned char zero = 0;
        cl_event done = nullptr;
        const cl_int err = calls_->fill(dev_.queue(), p, &zero, 1, n, 0, nullptr, &done);
        return opencl::finish_commit(err, done);
    }

    const opencl::usm_functions* calls_;
    opencl::private_device dev_;
    USMKind kind_;
    std::size_t alignment_;
};

static_assert(Backend<USMBackend>);

}  // namespace clpool
