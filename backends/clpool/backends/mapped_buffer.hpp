// MappedBuffer: a pinned cl::Buffer together with the host pointer it stays mapped at, owned as one.
#pragma once

#include <clpool/backends/opencl.hpp>
#include <clpool/backends/pinned_ranges.hpp>
#include <clpool/platform/release_in_place.hpp>

#include <cstddef>
#include <mutex>
#include <utility>

namespace clpool {

// What MappedPinnedBackend makes: a CL_MEM_ALLOC_HOST_PTR buffer mapped once
// (read and write) on the backend's queue, and the pointer of that mapping.
// The mapping lasts as long as this object, so host code reads and writes
// host() and the driver DMAs from/to it (as the source of clEnqueueWriteBuffer
// or the destination of clEnqueueReadBuffer on another buffer) with no map or
// unmap per use.
//
// Move-only. Destruction (or reset) removes the range from clpool's pinned
// ranges, unmaps on the queue it was mapped on, waits for the unmap, and
// releases the buffer; it never throws. Whoever destroys it must make sure no
// enqueued copy still uses host(): the pool does (it waits for a pending
// buffer's events first: MappedPinnedBackend declares
// BackendAbility::free_waits_for_events).
// Not thread-safe itself; distinct objects may be used from any threads.
class MappedBuffer {
public:
    MappedBuffer() noexcept = default;
    // Takes ownership of an existing mapping of `buffer` at `host` (n bytes,
    // mapped on `queue`), already registered in detail::pinned_ranges.
    MappedBuffer(cl::Buffer buffer, void* host, std::size_t n, cl::CommandQueue queue) noexcept
        : buffer_(std::move(buffer)), host_(host), bytes_(n), queue_(std::move(queue)) {}
    MappedBuffer(MappedBuffer&& other) noexcept
        : buffer_(std::move(other.buffer_)), host_(std::exchange(other.host_, nullptr)),
          bytes_(std::exchange(other.bytes_, 0)), queue_(std::move(other.queue_)) {}
    MappedBuffer& operator=(MappedBuffer&& other) noexcept {
        if (this != &other) {
            reset();
            buffer_ = std::move(other.buffer_);
            host_ = std::exchange(other.host_, nullptr);
            bytes_ = std::exchange(other.bytes_, 0);
            queue_ = std::move(other.queue_);
        }
        return *this;
    }
    MappedBuffer(const MappedBuffer&) = delete;
    MappedBuffer& operator=(const MappedBuffer&) = delete;
    ~MappedBuffer() { reset(); }

    // The OpenCL buffer (for kernels or copies that name it).
    const cl::Buffer& buffer() const noexcept { return buffer_; }
    // The host address of the whole buffer; valid until this object is
    // destroyed (for a pooled one: until the pool frees it, not at release).
    void* host() const noexcept { return host_; }
    // The mapped size in bytes (the pool's bucket size).
    std::size_t size() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return host_ != nullptr; }

    // Unmaps (waiting for the unmap) and releases the buffer; empty afterwards.
    // Never throws. If the unmap cannot be enqueued the buffer is released
    // mapped (the driver frees it with the buffer, or leaks it), never left
    // half-owned.
    void reset() noexcept {
        if (host_) {
            detail::pinned_ranges::instance().remove(host_);
            cl_event done = nullptr;
            std::lock_guard serial(opencl::private_queue_mutex(queue_()));  // see opencl.hpp
            if (clEnqueueUnmapMemObject(queue_(), buffer_(), host_, 0, nullptr, &done) == CL_SUCCESS && done) {
                clWaitForEvents(1, &done);
                clReleaseEvent(done);
            }
            host_ = nullptr;
        }
        bytes_ = 0;
        detail::discard(buffer_);
        detail::discard(queue_);
    }

private:
    cl::Buffer buffer_;
    void* host_ = nullptr;
    std::size_t bytes_ = 0;
    cl::CommandQueue queue_;  // the queue it was mapped on: unmap goes there, and it outlives the backend
};

// clpool 0.1's spelling, kept for one minor version (CHANGELOG.md, "Migrating from 0.1").
using mapped_buffer [[deprecated("use clpool::MappedBuffer")]] = MappedBuffer;

}  // namespace clpool
