// Kernel arguments from pooled handles (buffers, SVM, USM), and host access to shared virtual memory (clEnqueueSVMMap).
#pragma once

#include <clpool/backends/svm.hpp>
#include <clpool/backends/usm.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/platform/opencl.hpp>
#include <clpool/platform/opencl_svm.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

namespace clpool {

// Sets kernel argument `index` to an SVM pointer (clSetKernelArgSVMPointer):
// the kernel's `global T*` parameter gets span.get(). Throws driver_error
// naming the index when the driver refuses it.
inline void set_kernel_arg(const cl::Kernel& kernel, cl_uint index, const SVMSpan& span) {
    opencl::check(clSetKernelArgSVMPointer(kernel(), index, span.get()),
                  ("clSetKernelArgSVMPointer (argument " + std::to_string(index) + ")").c_str());
}

// Sets kernel argument `index` to a USM pointer (clSetKernelArgMemPointerINTEL).
// Throws usage_error for an empty span, driver_error naming the index when refused.
inline void set_kernel_arg(const cl::Kernel& kernel, cl_uint index, const USMSpan& span) {
    if (!span.calls())
        throw usage_error("clpool: kernel argument " + std::to_string(index) + " from an empty USM span");
    opencl::check(span.calls()->set_kernel_arg(kernel(), index, span.get()),
                  ("clSetKernelArgMemPointerINTEL (argument " + std::to_string(index) + ")").c_str());
}

// Sets kernel argument `index` to a pooled handle's memory: the pointer of an
// SVM or USM pool's block, else the handle's cl::Buffer (clSetKernelArg). A
// block of OffsetArenaPool is two arguments, the segment and the offset:
// `set_kernel_arg(k, i, h.buffer().segment())` and
// `k.setArg(i + 1, cl_ulong(h.buffer().offset()))`. Throws usage_error for an
// empty handle, driver_error when the driver refuses the argument.
template <class Pool>
    requires std::derived_from<typename Pool::memory_type, SVMSpan> ||
             std::derived_from<typename Pool::memory_type, USMSpan> ||
             std::derived_from<typename Pool::memory_type, cl::Buffer>
void set_kernel_arg(const cl::Kernel& kernel, cl_uint index, const Handle<Pool>& h) {
    if (!h)
        throw usage_error("clpool: kernel argument " + std::to_string(index) +
                          " from an empty handle (it holds no memory)");
    if constexpr (std::derived_from<typename Pool::memory_type, SVMSpan>) {
        set_kernel_arg(kernel, index, static_cast<const SVMSpan&>(h.buffer()));
    } else if constexpr (std::derived_from<typename Pool::memory_type, USMSpan>) {
        set_kernel_arg(kernel, index, static_cast<const USMSpan&>(h.buffer()));
    } else {
        const cl_mem mem = static_cast<const cl::Buffer&>(h.buffer())();
        opencl::check(clSetKernelArg(kernel(), index, sizeof mem, &mem),
                      ("clSetKernelArg (argument " + std::to_string(index) + ")").c_str());
    }
}
inline void set_kernel_arg(const cl::Kernel& kernel, cl_uint index, const cl::Buffer& buffer) {
    const cl_mem mem = buffer();
    opencl::check(clSetKernelArg(kernel(), index, sizeof mem, &mem),
                  ("clSetKernelArg (argument " + std::to_string(index) + ")").c_str());
}

// Host access to coarse-grained SVM: maps `bytes` at span.get() on `queue`
// (blocking clEnqueueSVMMap) and unmaps when destroyed or unmap() is called
// (clEnqueueSVMUnmap, enqueued: commands enqueued after it on an in-order
// queue see the host's writes). Move-only; must not outlive the memory.
//
//   {
//       clpool::SVMMapping host(queue, h, CL_MAP_WRITE_INVALIDATE_REGION);
//       std::fill_n(host.as<float>(), n, 1.0f);
//   }  // unmapped here
class SVMMapping {
public:
    SVMMapping() noexcept = default;
    // Throws usage_error for a null pointer or queue or 0 bytes, driver_error when the map fails.
    SVMMapping(const cl::CommandQueue& queue, const SVMSpan& span, cl_map_flags flags) : SVMMapping() {
        if (!queue() || !span || span.size() == 0)
            throw usage_error(std::string("clpool: SVM map of ") + std::to_string(span.size()) + " bytes " +
                              (!queue() ? "on a null cl::CommandQueue"
                               : !span  ? "at a null SVM pointer"
                                        : "(clEnqueueSVMMap needs at least 1 byte)"));
        opencl::check(clEnqueueSVMMap(queue(), CL_TRUE, flags, span.get(), span.size(), 0, nullptr, nullptr),
                      "clEnqueueSVMMap");
        queue_ = queue;
        span_ = span;
    }
    // The caller's part of a pooled SVM block: h.nbytes() bytes.
    template <class Pool>
        requires std::derived_from<typename Pool::memory_type, SVMSpan>
    SVMMapping(const cl::CommandQueue& queue, const Handle<Pool>& h, cl_map_flags flags)
        : SVMMapping(queue, SVMSpan(h ? h.buffer().get() : nullptr, h.nbytes()), flags) {}

    SVMMapping(SVMMapping&& o) noexcept : queue_(std::move(o.queue_)), span_(std::exchange(o.span_, SVMSpan())) {}
    SVMMapping& operator=(SVMMapping&& o) noexcept {
        if (this != &o) {
            unmap_quietly();
            queue_ = std::move(o.queue_);
            span_ = std::exchange(o.span_, SVMSpan());
        }
        return *this;
    }
    SVMMapping(const SVMMapping&) = delete;
    SVMMapping& operator=(const SVMMapping&) = delete;
    ~SVMMapping() { unmap_quietly(); }

    void* get() const noexcept { return span_.get(); }
    template <class T>
    T* as() const noexcept {
        return span_.as<T>();
    }
    std::size_t size() const noexcept { return span_.size(); }

    // Enqueues the unmap now and returns its event; the mapping is empty after.
    // Throws driver_error if the driver refuses it (the mapping is then empty too).
    cl::Event unmap() {
        if (!span_) return cl::Event();
        cl_event ev = nullptr;
        const cl_int err = clEnqueueSVMUnmap(queue_(), span_.get(), 0, nullptr, &ev);
        span_ = SVMSpan();
        opencl::check(err, "clEnqueueSVMUnmap");
        clFlush(queue_());
        return cl::Event(ev, false);
    }

private:
    void unmap_quietly() noexcept {
        if (!span_) return;
        if (clEnqueueSVMUnmap(queue_(), span_.get(), 0, nullptr, nullptr) == CL_SUCCESS) clFlush(queue_());
        span_ = SVMSpan();
    }

    cl::CommandQueue queue_;
    SVMSpan span_;
};

}  // namespace clpool
