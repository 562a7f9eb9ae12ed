// OpenCLOffsetBackend: OpenCLBackend whose carved blocks are (segment, offset) pairs; a sub-buffer only when asked for.
#pragma once

#include <clpool/backends/opencl.hpp>
#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/platform/release_in_place.hpp>

#include <cstddef>
#include <string>
#include <utility>

namespace clpool {

// A block of a buffer arena as many kernels and libraries take it (CLBlast's
// API does): the segment's cl::Buffer and a byte offset into it. Carving one
// makes no driver call. sub_buffer() makes a cl::Buffer of just the block on
// first use (clCreateSubBuffer), kept until the block goes back to the arena.
// Not thread-safe itself, as a handle is not.
class OffsetBlock {
public:
    OffsetBlock() noexcept = default;
    OffsetBlock(cl_mem segment, std::size_t offset, std::size_t bytes) noexcept
        : segment_(segment), offset_(offset), bytes_(bytes) {}
    OffsetBlock(OffsetBlock&& o) noexcept
        : segment_(std::exchange(o.segment_, nullptr)), offset_(o.offset_), bytes_(o.bytes_),
          view_(std::move(o.view_)) {}
    OffsetBlock& operator=(OffsetBlock&& o) noexcept {
        if (this != &o) {
            detail::replace(view_, std::move(o.view_));
            segment_ = std::exchange(o.segment_, nullptr);
            offset_ = o.offset_;
            bytes_ = o.bytes_;
        }
        return *this;
    }
    OffsetBlock(const OffsetBlock&) = delete;
    OffsetBlock& operator=(const OffsetBlock&) = delete;
    ~OffsetBlock() = default;

    // The block's bytes (the holder asked for nbytes() of them).
    std::size_t size() const noexcept { return bytes_; }
    // A cl::Buffer of exactly this block, made on the first call and kept
    // with the block while it stays in the pool (a later holder of the same
    // block gets the same one). Not counted in stats().sub_buffers_made, which
    // counts the arena's own driver calls. Throws driver_error if the driver refuses it
    // (e.g. CL_MISALIGNED_SUB_BUFFER_OFFSET: blocks start at multiples of the
    // device's base-address alignment, so it should not).
    const cl::Buffer& sub_buffer() const {
        if (!view_() && segment_) {
            if (offset_ == 0 && bytes_ == whole_size()) {
                view_ = opencl::share(cl::Buffer(segment_, true));
            } else {
                auto made = opencl::sub_buffer(cl::Buffer(segment_, true), offset_, bytes_);
                if (made.status != AllocStatus::ok)
                    throw driver_error("clCreateSubBuffer (" + std::to_string(bytes_) + " bytes at offset " +
                                           std::to_string(offset_) + ")",
                                       made.native_code);
                view_ = std::move(made.memory);
            }
        }
        return view_;
    }
    // Whether sub_buffer() has made its cl::Buffer.
    bool has_sub_buffer() const noexcept { return view_() != nullptr; }

private:
    std::size_t whole_size() const noexcept {
        std::size_t n = 0;
        clGetMemObjectInfo(segment_, CL_MEM_SIZE, sizeof n, &n, nullptr);
        return n;
    }

    cl_mem segment_ = nullptr;  // not owned: the arena's segment outlives its blocks
    std::size_t offset_ = 0;
    std::size_t bytes_ = 0;
    mutable cl::Buffer view_;
};

// OpenCLBackend for OffsetArenaPool: the same segments, but a carved block is
// an OffsetBlock (segment + offset), so an engine that passes (segment,
// offset) to its kernels makes no driver call per block. A handle's
// h.buffer().segment() and h.buffer().offset() name the place;
// h.buffer().sub_buffer() makes a cl::Buffer of the block when one is needed.
class OpenCLOffsetBackend : public OpenCLBackend {
public:
    using OpenCLBackend::OpenCLBackend;
    using sub_memory_type = OffsetBlock;
    static constexpr bool views_are_free = true;

    static Allocation<OffsetBlock> sub_range(const cl::Buffer& segment, std::size_t offset, std::size_t n) noexcept {
        return {OffsetBlock(segment(), offset, n), AllocStatus::ok, CL_SUCCESS};
    }
    static OffsetBlock whole_range(const cl::Buffer& m, std::size_t n) noexcept { return OffsetBlock(m(), 0, n); }
};

static_assert(Backend<OpenCLOffsetBackend>);

}  // namespace clpool
