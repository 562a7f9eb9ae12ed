// ShapeMirror: an interned shape's canonical buffer on an OpenCL device, from a clpool pool, uploaded once.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/shapes/shape.hpp>
#include <clpool/shapes/detail/shape_entry.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace clpool {

// Gives kernels the shape data without an upload per operation: the first
// buffer(s) call for a shape takes a buffer from `pool`, writes the shape's
// canonical words into it (a blocking write on `queue`) and attaches it to
// the interned entry; every later call, from any thread, returns that same
// buffer with no driver call. The buffer goes back to the pool when the
// shape's entry is reclaimed (after its last handle is released, once no
// reader can still see it), or is freed then if the pool is gone.
// The kernel reads shape_words(rank) int64 words (`__global const long*`) at
// offset 0, laid out as shape.hpp says; it must not write them.
//
// One mirror per pool/device: an entry can carry buffers of several mirrors
// (several contexts), told apart by the mirror's id.
// Thread safety: buffer() may be called from any threads at once; if two
// threads upload the same shape at the same time, one buffer wins and the
// other goes straight back to the pool. Destroying a mirror leaves the
// buffers it attached in place until their shapes die.
template <class PoolT = BufferPool>
class ShapeMirror {
public:
    // `queue` must belong to the pool's context; the pool must outlive the
    // mirror's calls (not the buffers: pooled handles outlive their pool).
    ShapeMirror(PoolT& pool, cl::CommandQueue queue) : pool_(pool), queue_(std::move(queue)), id_(next_id()) {}
    ShapeMirror(const ShapeMirror&) = delete;
    ShapeMirror& operator=(const ShapeMirror&) = delete;

    // Returns the device buffer holding s's canonical words (its size is the
    // pool's bucket size, at least s.size_bytes()). Valid while any handle
    // to s lives.
    // Throws usage_error for an empty handle, what pool.allocate throws
    // (size_error, out_of_memory, driver_error), driver_error if the write fails.
    // Cost: after the first call, a walk of the entry's attachments (usually
    // one) with an acquire load; the first call allocates from the pool and
    // waits for one write of 2*rank+4 words.
    const cl::Buffer& buffer(const Shape& s) {
        if (!s) throw usage_error("clpool: ShapeMirror::buffer of an empty Shape");
        detail::shape_entry* e = s.entry();
        if (const auto* a = find(e->attachments.load(std::memory_order_acquire))) return a->handle.buffer();

        auto fresh = std::make_unique<attachment>();
        fresh->key = id_;
        fresh->handle = pool_.allocate(s.size_bytes());
        const cl_int err = clEnqueueWriteBuffer(queue_(), fresh->handle.buffer()(), CL_TRUE, 0, s.size_bytes(),
                                                s.data(), 0, nullptr, nullptr);
        if (err != CL_SUCCESS)
            throw driver_error(
                "ShapeMirror upload of " + std::to_string(s.size_bytes()) + " bytes: clEnqueueWriteBuffer", err);
        // Publish, unless another thread published this mirror's copy first.
        detail::shape_attachment* head = e->attachments.load(std::memory_order_acquire);
        for (;;) {
            if (const auto* a = find(head)) return a->handle.buffer();  // ours goes back to the pool
            fresh->next = head;
            if (e->attachments.compare_exchange_weak(head, fresh.get(), std::memory_order_acq_rel,
                                                     std::memory_order_acquire))
                break;
        }
        uploads_.fetch_add(1, std::memory_order_relaxed);
        return fresh.release()->handle.buffer();
    }

    // Shapes this mirror has uploaded and attached (losing racers not counted).
    std::uint64_t uploads() const noexcept { return uploads_.load(std::memory_order_relaxed); }
    std::uint64_t id() const noexcept { return id_; }

private:
    struct attachment : detail::shape_attachment {
        typename PoolT::handle handle;
    };

    const attachment* find(const detail::shape_attachment* a) const noexcept {
        for (; a; a = a->next)
            if (a->key == id_) return static_cast<const attachment*>(a);
        return nullptr;
    }

    // Ids, not addresses: a new mirror at a dead one's address must not
    // match the dead one's buffers. One counter for every instantiation, so
    // a key also names the attachment's type.
    static std::uint64_t next_id() noexcept { return detail::next_attachment_key(); }

    PoolT& pool_;
    cl::CommandQueue queue_;
    const std::uint64_t id_;
    std::atomic<std::uint64_t> uploads_{0};
};

}  // namespace clpool
