// SVMBackend: pools of coarse-grained shared virtual memory (clSVMAlloc) over one OpenCL context.
#pragma once

#include <clpool/backends/opencl.hpp>
#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/platform/opencl_svm.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace clpool {

// n bytes of shared virtual memory at a device pointer, not owned: what a
// handle of an SVM pool gives (h.buffer().get(), h.buffer().as<float>()), a
// whole allocation or a block carved from one. Pass it to a kernel with
// clpool::set_kernel_arg (interop/svm.hpp) or clSetKernelArgSVMPointer.
class SVMSpan {
public:
    SVMSpan() noexcept = default;
    SVMSpan(void* pointer, std::size_t bytes) noexcept : pointer_(pointer), bytes_(bytes) {}

    void* get() const noexcept { return pointer_; }
    // The same pointer, typed: the caller vouches for T's alignment (every
    // block starts at a multiple of the pool's granularity, at least 128 bytes).
    template <class T>
    T* as() const noexcept {
        return static_cast<T*>(pointer_);
    }
    std::size_t size() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return pointer_ != nullptr; }

private:
    void* pointer_ = nullptr;
    std::size_t bytes_ = 0;
};

// One clSVMAlloc allocation, owned: freed (clSVMFree) when destroyed. The
// pool frees it only once no command can use it: after the events a holder
// released it with (release_after), or, for a plain release(), as OpenCL's
// clSVMFree asks of every program, when the holder's commands are done.
class SVMMemory : public SVMSpan {
public:
    SVMMemory() noexcept = default;
    SVMMemory(cl_context context, void* pointer, std::size_t bytes) noexcept
        : SVMSpan(pointer, bytes), context_(context) {
        if (context_) clRetainContext(context_);
    }
    SVMMemory(SVMMemory&& o) noexcept
        : SVMSpan(std::exchange(static_cast<SVMSpan&>(o), SVMSpan())), context_(std::exchange(o.context_, nullptr)) {}
    SVMMemory& operator=(SVMMemory&& o) noexcept {
        if (this != &o) {
            release_now();
            static_cast<SVMSpan&>(*this) = std::exchange(static_cast<SVMSpan&>(o), SVMSpan());
            context_ = std::exchange(o.context_, nullptr);
        }
        return *this;
    }
    SVMMemory(const SVMMemory&) = delete;
    SVMMemory& operator=(const SVMMemory&) = delete;
    ~SVMMemory() { release_now(); }

    cl_context context() const noexcept { return context_; }

private:
    void release_now() noexcept {
        if (context_) {
            if (get()) clSVMFree(context_, get());
            clReleaseContext(context_);
        }
        static_cast<SVMSpan&>(*this) = SVMSpan();
        context_ = nullptr;
    }

    cl_context context_ = nullptr;  // retained while the memory lives: clSVMFree needs it
};

namespace opencl {

// The SVM capabilities every device of the context shares. Throws config_error
// naming the device and the capability it lacks when one has no
// coarse-grained SVM buffers (an OpenCL 1.2 device has none), or no
// fine-grained ones where `flags` asks for them.
inline cl_bitfield check_svm_support(cl_context ctx, cl_mem_flags flags) {
    cl_bitfield shared = ~cl_bitfield{0};
    for (cl_device_id d : context_devices(ctx)) {
        cl_bitfield caps = 0;
        const cl_int err = clGetDeviceInfo(d, device_svm_capabilities, sizeof caps, &caps, nullptr);
        if (err != CL_SUCCESS || (caps & svm_coarse_grain_buffer) == 0)
            throw config_error("clpool: device '" + device_string(d, CL_DEVICE_NAME) + "' (" +
                               device_string(d, CL_DEVICE_VERSION) +
                               ") has no coarse-grained shared virtual memory: CL_DEVICE_SVM_CAPABILITIES " +
                               (err != CL_SUCCESS ? "is not reported (OpenCL 2.0 or later needed)"
                                                  : "lacks CL_DEVICE_SVM_COARSE_GRAIN_BUFFER") +
                               "; use BufferPool or ArenaPool on this device");
        if ((flags & mem_svm_fine_grain_buffer) != 0 && (caps & svm_fine_grain_buffer) == 0)
            throw config_error("clpool: device '" + device_string(d, CL_DEVICE_NAME) +
                               "' has no fine-grained SVM buffers (CL_DEVICE_SVM_CAPABILITIES lacks "
                               "CL_DEVICE_SVM_FINE_GRAIN_BUFFER), asked for with CL_MEM_SVM_FINE_GRAIN_BUFFER");
        if ((flags & mem_svm_atomics) != 0 && (caps & svm_atomics) == 0)
            throw config_error("clpool: device '" + device_string(d, CL_DEVICE_NAME) +
                               "' has no SVM atomics (CL_DEVICE_SVM_CAPABILITIES lacks CL_DEVICE_SVM_ATOMICS), "
                               "asked for with CL_MEM_SVM_ATOMICS");
        shared &= caps;
    }
    return shared;
}

// The flags an SVM backend accepts: one access flag, and the fine-grain and atomics bits.
inline cl_mem_flags checked_svm_flags(cl_mem_flags flags) {
    constexpr cl_mem_flags access = CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY;
    const cl_mem_flags allowed = access | mem_svm_fine_grain_buffer | mem_svm_atomics;
    const cl_mem_flags a = flags & access;
    if ((flags & ~allowed) != 0 || (a != 0 && (a & (a - 1)) != 0) ||
        ((flags & mem_svm_atomics) != 0 && (flags & mem_svm_fine_grain_buffer) == 0))
        throw config_error(
            "clpool: SVM flags 0x" +
            [&] {
                char hex[17] = {};
                std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(flags));
                return std::string(hex);
            }() +
            " are not valid for clSVMAlloc: one of CL_MEM_READ_WRITE, CL_MEM_READ_ONLY, CL_MEM_WRITE_ONLY, "
            "optionally CL_MEM_SVM_FINE_GRAIN_BUFFER, and CL_MEM_SVM_ATOMICS only with it");
    return a == 0 ? flags | CL_MEM_READ_WRITE : flags;
}

}  // namespace opencl

// Makes coarse-grained SVM allocations (clSVMAlloc) in one context, each
// committed on the backend's own queue (a device-side fill of zero bytes: a
// driver may map the pages at first use, and a pool keeps first use off its
// hit path). The memory kind is ignored: SVM is one kind of memory, shared by
// the host (through clEnqueueSVMMap) and every device of the context.
//
// Freeing an SVM allocation is not guarded by a reference count, as a
// cl::Buffer's release is: so the pool waits for a block's release_after
// events before it frees or re-carves it (BackendAbility::free_waits_for_events).
//
// Sub-allocated (SVMArenaPool), a block is the segment's pointer plus an
// offset: carving makes no driver call at all (views_are_free).
//
// Throws config_error at construction when a device of the context has no
// coarse-grained SVM (CL_DEVICE_SVM_COARSE_GRAIN_BUFFER), and driver_error
// when the context cannot be queried or the queue made. Thread-safe.
class SVMBackend {
public:
    using memory_type = SVMMemory;
    using sub_memory_type = SVMSpan;
    using event_type = cl::Event;
    static constexpr bool views_are_free = true;
    static constexpr BackendAbilities abilities =
        BackendAbility::events | BackendAbility::abandon | BackendAbility::free_waits_for_events;

    SVMBackend(const cl::Context& context, cl_mem_flags flags = CL_MEM_READ_WRITE)
        : SVMBackend(context, opencl::context_devices(context())[0], flags) {}
    SVMBackend(const cl::CommandQueue& queue, cl_mem_flags flags = CL_MEM_READ_WRITE)
        : SVMBackend(opencl::context_of(queue), opencl::device_of(queue), flags) {}
    SVMBackend(const cl::Context& context, cl_device_id device, cl_mem_flags flags)
        : flags_(opencl::checked_svm_flags(flags)), capabilities_(opencl::check_svm_support(context(), flags_)),
          dev_(context, device, "clCreateCommandQueue"), alignment_(opencl::base_address_alignment_of(context())) {}

    std::size_t max_alloc_size() const noexcept { return dev_.max_alloc; }
    bool unified_memory() const noexcept { return dev_.unified; }
    const char* name() const noexcept { return "svm"; }
    const cl::Context& context() const noexcept { return dev_.context; }
    cl_device_id device() const noexcept { return dev_.device; }
    cl_mem_flags flags() const noexcept { return flags_; }
    // CL_DEVICE_SVM_CAPABILITIES shared by every device of the context.
    cl_bitfield capabilities() const noexcept { return capabilities_; }

    Allocation<SVMMemory> allocate(std::size_t n, MemoryKind) noexcept {
        // clSVMAlloc gives no error code: nullptr for a size within the device's limit means no memory.
        void* p = clSVMAlloc(dev_.context(), flags_, n == 0 ? 1 : n, static_cast<cl_uint>(alignment_));
        if (!p) return {SVMMemory(), AllocStatus::out_of_memory, CL_MEM_OBJECT_ALLOCATION_FAILURE};
        SVMMemory memory(dev_.context(), p, n);
        if (const cl_int err = commit(p, n); err != CL_SUCCESS) return opencl::failed_allocation<SVMMemory>(err);
        return {std::move(memory), AllocStatus::ok, CL_SUCCESS};
    }

    static bool event_complete(const cl::Event& e) noexcept { return OpenCLBackend::event_complete(e); }
    static void wait_for(const cl::Event* events, std::size_t count) noexcept {
        OpenCLBackend::wait_for(events, count);
    }

    // A fork child: forget the context and queue without releasing them.
    void abandon() noexcept { dev_.abandon(); }

    // For SubAllocated: blocks start at multiples of the device's base-address
    // alignment (an allocation starts at one; a driver may refuse a larger one).
    std::size_t sub_alignment() const noexcept { return alignment_; }
    static Allocation<SVMSpan> sub_range(const SVMMemory& segment, std::size_t offset, std::size_t n) noexcept {
        return {SVMSpan(static_cast<char*>(segment.get()) + offset, n), AllocStatus::ok, CL_SUCCESS};
    }
    static SVMSpan whole_range(const SVMMemory& m, std::size_t n) noexcept { return SVMSpan(m.get(), n); }

private:
    cl_int commit(void* p, std::size_t n) noexcept {
        if (n == 0) return CL_SUCCESS;
        std::lock_guard serial(opencl::private_queue_mutex(dev_.queue()));
        const unsigned char zero = 0;
        cl_event done = nullptr;
        const cl_int err = clEnqueueSVMMemFill(dev_.queue(), p, &zero, 1, n, 0, nullptr, &done);
        return opencl::finish_commit(err, done);
    }

    cl_mem_flags flags_;
    cl_bitfield capabilities_;
    opencl::private_device dev_;  // its queue commits new allocations
    std::size_t alignment_;
};

static_assert(Backend<SVMBackend>);

}  // namespace clpool
