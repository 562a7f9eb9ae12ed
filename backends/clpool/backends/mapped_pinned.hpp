// MappedPinnedBackend: pinned host buffers that stay mapped for their whole pooled life, for staging without map/unmap.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/backends/mapped_buffer.hpp>
#include <clpool/backends/opencl.hpp>
#include <clpool/backends/pinned_ranges.hpp>
#include <clpool/platform/numa_opencl.hpp>
#include <clpool/platform/release_in_place.hpp>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace clpool {

// Part of a mapped pinned segment (a block SubAllocated<MappedPinnedBackend>
// carved): a sub-buffer and its host address inside the segment's mapping,
// which stays mapped while the segment lives. Owns only the sub-buffer: it
// never unmaps. The same buffer() / host() / size() as MappedBuffer.
class MappedRange {
public:
    MappedRange() noexcept = default;
    MappedRange(cl::Buffer buffer, void* host, std::size_t n) noexcept
        : buffer_(std::move(buffer)), host_(host), bytes_(n) {}
    MappedRange(MappedRange&& o) noexcept
        : buffer_(std::move(o.buffer_)), host_(std::exchange(o.host_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    MappedRange& operator=(MappedRange&& o) noexcept {
        if (this != &o) {
            detail::replace(buffer_, std::move(o.buffer_));
            host_ = std::exchange(o.host_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    MappedRange(const MappedRange&) = delete;
    MappedRange& operator=(const MappedRange&) = delete;
    ~MappedRange() = default;

    const cl::Buffer& buffer() const noexcept { return buffer_; }
    void* host() const noexcept { return host_; }
    std::size_t size() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return host_ != nullptr; }

private:
    cl::Buffer buffer_;
    void* host_ = nullptr;
    std::size_t bytes_ = 0;
};

// Makes mapped_buffers in one context: clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)
// and one blocking map (read and write) on the backend's own queue, which both
// commits the memory and gives the host pointer; the buffer stays mapped until
// the pool frees it (then: unmap, wait, release; MappedBuffer::reset).
//
// Using the mapped pointer as the host side of clEnqueueWriteBuffer /
// clEnqueueReadBuffer on ANOTHER buffer while it stays mapped is the vendors'
// documented pinned-memory pattern (create with CL_MEM_ALLOC_HOST_PTR, map
// once, copy from the mapped pointer): the driver recognises the pinned pages
// and DMAs at full speed. A staged transfer through these buffers therefore
// does no map or unmap at all (docs/TRANSFERS.md has what a map costs).
//
// Every memory kind is served as host-pinned memory except device_local,
// which fails (CL_INVALID_VALUE): this backend only makes mapped pinned
// memory. Pinned memory stays pinned, and mapped, while the pool caches it:
// trim() gives it back. Each buffer holds a reference to the backend's queue,
// so one freed after its pool (a handle that outlived it) can still unmap.
// allocate is thread-safe (OpenCL queues are).
class MappedPinnedBackend {
public:
    using memory_type = MappedBuffer;
    using sub_memory_type = MappedRange;  // SubAllocated<MappedPinnedBackend>'s blocks
    using event_type = cl::Event;
    // As OpenCLBackend's, and free_waits_for_events: the pool waits for a
    // buffer's pending events before freeing it, as the driver's reference
    // count does not cover a copy that uses host() of a buffer it does not
    // name (backend_traits, pool.hpp). So trim(), the out-of-memory retry,
    // release_pools and the pool's end wait for a staging copy that a user
    // event holds, until the event is set: set it from another thread, or
    // before those calls (tests/backends/test_mapped_pinned.cpp).
    static constexpr BackendAbilities abilities =
        BackendAbility::events | BackendAbility::abandon | BackendAbility::free_waits_for_events;

    // Maps on a queue of its own on the context's first device. Throws driver_error.
    MappedPinnedBackend(const cl::Context& context, cl_mem_flags access_flags = CL_MEM_READ_WRITE)
        : MappedPinnedBackend(context, opencl::context_devices(context())[0], access_flags) {}
    // On the queue's device (never on the queue itself). Throws driver_error.
    MappedPinnedBackend(const cl::CommandQueue& queue, cl_mem_flags access_flags = CL_MEM_READ_WRITE)
        : MappedPinnedBackend(opencl::context_of(queue), opencl::device_of(queue), access_flags) {}
    MappedPinnedBackend(const cl::Context& context, cl_device_id device, cl_mem_flags access_flags)
        : dev_(context, device, "clCreateCommandQueue (clpool mapped pinned backend)"), access_flags_(access_flags),
          place_(&numa::placement_of(device)) {}

    std::size_t max_alloc_size() const noexcept { return dev_.max_alloc; }
    bool unified_memory() const noexcept { return dev_.unified; }
    const char* name() const noexcept { return "opencl mapped pinned"; }
    const cl::Context& context() const noexcept { return dev_.context; }
    cl_device_id device() const noexcept { return dev_.device; }

    // Creates, maps (blocking) and registers n bytes as pinned. Never throws;
    // on failure nothing is left allocated or mapped. Cost: a driver
    // allocation of pinned memory plus one map round trip.
    Allocation<MappedBuffer> allocate(std::size_t n, MemoryKind kind) noexcept {
        if (kind == MemoryKind::device_local) return failure(CL_INVALID_VALUE);
        const std::size_t bytes = n == 0 ? 1 : n;  // a zero-byte buffer or map is invalid
        // Created and mapped (which commits the pages) from a thread on the device's NUMA node,
        // so the kernel places the pages there; nothing changes on a one-node host.
        const numa::scoped_binding on_node(place_->cpus);
        cl_int err = CL_SUCCESS;
        cl_mem mem = clCreateBuffer(dev_.context(), access_flags_ | CL_MEM_ALLOC_HOST_PTR, bytes, nullptr, &err);
        if (err != CL_SUCCESS) return failure(err);
        cl::Buffer buffer(mem, false);  // adopt the creation reference
        std::unique_lock serial(opencl::private_queue_mutex(dev_.queue()));
        void* host = clEnqueueMapBuffer(dev_.queue(), mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, nullptr,
                                        nullptr, &err);
        serial.unlock();
        if (err != CL_SUCCESS) return failure(err);
        try {
            detail::pinned_ranges::instance().add(host, bytes);
        } catch (...) {
            // Not registered: unmap it again and fail as out of host memory.
            MappedBuffer undo(std::move(buffer), host, bytes, dev_.queue);
            return failure(CL_OUT_OF_HOST_MEMORY);
        }
        return {MappedBuffer(std::move(buffer), host, bytes, dev_.queue), AllocStatus::ok, CL_SUCCESS};
    }

    // Completion test and wait, as OpenCLBackend's (release_after, pending reuse).
    static bool event_complete(const cl::Event& e) noexcept { return OpenCLBackend::event_complete(e); }
    static void wait_for(const cl::Event* events, std::size_t count) noexcept {
        OpenCLBackend::wait_for(events, count);
    }

    // Forgets the context and queue without releasing them (a fork child).
    void abandon() noexcept { dev_.abandon(); }

    // For SubAllocated: pinned staging blocks carved from a few mapped pinned
    // segments; a block is a sub-buffer and its address in the segment's
    // mapping (registered as pinned with the whole segment).
    std::size_t sub_alignment() const { return opencl::base_address_alignment_of(dev_.context()); }
    static Allocation<MappedRange> sub_range(const MappedBuffer& segment, std::size_t offset, std::size_t n) noexcept {
        auto sub = opencl::sub_buffer(segment.buffer(), offset, n);
        if (sub.status != AllocStatus::ok) return {MappedRange(), sub.status, sub.native_code};
        return {MappedRange(std::move(sub.memory), static_cast<char*>(segment.host()) + offset, n), AllocStatus::ok,
                CL_SUCCESS};
    }
    static MappedRange whole_range(const MappedBuffer& m, std::size_t n) noexcept {
        return MappedRange(opencl::share(m.buffer()), m.host(), n);
    }

private:
    static Allocation<MappedBuffer> failure(cl_int err) noexcept {
        return opencl::failed_allocation<MappedBuffer>(err);
    }

    opencl::private_device dev_;  // its queue maps on allocate; each buffer keeps a reference for its unmap
    cl_mem_flags access_flags_;
    const numa::placement* place_;  // the device's NUMA node and CPUs (kept for the process)
};

static_assert(Backend<MappedPinnedBackend>);

}  // namespace clpool
