// ShapeMirror: an interned shape's canonical buffer on an OpenCL device, from a clpool pool, uploaded once.
#pragma once

#include <clpool/platform/process_state.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/shapes/shape.hpp>
#include <clpool/shapes/detail/shape_entry.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace clpool {

// Gives kernels the shape data without an upload per operation: the first
// buffer(s) call for a shape takes a buffer from `pool`, writes the shape's
// canonical words into it (a blocking write on `queue`) and attaches it to
// the interned entry; every later call, from any thread, returns that same
// buffer with no driver call. The buffer goes back to the pool when the
// dead shape's entry is reclaimed (or is freed, if the pool is gone by then).
// A command that reads the buffer and may still be queued when the shape's
// last handle drops (on any queue) must be declared with release_after: the
// pool then reuses the buffer only once those commands have completed.
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
    using event_type = cl::Event;
    static_assert(std::is_same_v<typename PoolT::event_type, event_type>,
                  "clpool: ShapeMirror needs a pool of OpenCL buffers (its handles' events are cl::Event)");

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

    // Declares commands that read s's buffer from this mirror (kernels, copies,
    // on any queue of the pool's context): when s dies, the buffer goes back
    // to the pool only after every event passed here has completed, as
    // Handle::release_after does. Events accumulate over the shape's life;
    // complete ones are dropped on each call, and past 32 pending ones they
    // are merged into one marker on the mirror's queue. A shape with no buffer
    // from this mirror needs nothing: the call does nothing.
    // Throws usage_error for an empty handle; otherwise never throws (if an
    // event cannot be recorded, it waits for the events before returning).
    // Thread-safe (a small lock per buffer).
    void release_after(const Shape& s, const event_type* events, std::size_t count) {
        if (!s) throw usage_error("clpool: ShapeMirror::release_after of an empty Shape");
        auto* a = const_cast<attachment*>(find(s.entry()->attachments.load(std::memory_order_acquire)));
        if (a && count) a->hold(events, count, queue_());
    }
    // Every command enqueued on `queue` so far: one marker's event. Throws
    // usage_error for an empty handle; if the marker cannot be enqueued, it
    // finishes the queue first.
    void release_after(const Shape& s, const cl::CommandQueue& queue) {
        if (!s) throw usage_error("clpool: ShapeMirror::release_after of an empty Shape");
        if (!find(s.entry()->attachments.load(std::memory_order_acquire))) return;
        cl_event marker = nullptr;
        if (clEnqueueMarkerWithWaitList(queue(), 0, nullptr, &marker) != CL_SUCCESS) {
            clFinish(queue());
            return;
        }
        const event_type e(marker, false);
        release_after(s, &e, 1);
    }

    // Shapes this mirror has uploaded and attached (losing racers not counted).
    std::uint64_t uploads() const noexcept { return uploads_.load(std::memory_order_relaxed); }
    std::uint64_t id() const noexcept { return id_; }

private:
    static constexpr std::size_t merge_above = 32;  // pending events kept per buffer before a marker merges them

    // The buffer and the commands that read it. Destroyed with the shape's
    // entry (when it is reclaimed): the buffer goes back after those commands.
    // Once the exit is past clpool's handler (or in a fork child), it makes
    // no driver call: a round may free it from a static destructor then, and
    // it leaks its events as the handle leaks its buffer.
    struct attachment : detail::shape_attachment {
        typename PoolT::handle handle;
        std::mutex mutex;
        std::vector<event_type> readers;  // under mutex
        const std::uint32_t generation = detail::birth_generation();

        ~attachment() override {
            if (!detail::may_free(generation)) {
                for (auto& e : readers) e() = nullptr;  // no clReleaseEvent
                return;                                 // the handle leaks its buffer itself
            }
            handle.release_after(readers.data(), readers.size());
        }

        void hold(const event_type* events, std::size_t count, cl_command_queue merge_on) noexcept {
            std::lock_guard lock(mutex);
            std::erase_if(readers, [](const event_type& e) { return complete(e); });
            try {
                for (std::size_t i = 0; i < count; ++i)
                    if (events[i]() && !complete(events[i])) readers.push_back(events[i]);
            } catch (...) {
                wait(events, count);  // not recorded: make them harmless now
                return;
            }
            if (readers.size() <= merge_above) return;
            std::vector<cl_event> raw;
            try {
                raw.reserve(readers.size());
            } catch (...) {
                return;  // kept unmerged
            }
            for (const auto& e : readers) raw.push_back(e());
            cl_event marker = nullptr;
            if (clEnqueueMarkerWithWaitList(merge_on, static_cast<cl_uint>(raw.size()), raw.data(), &marker) !=
                CL_SUCCESS)
                return;  // kept unmerged
            readers.clear();  // no allocation: capacity stays
            readers.emplace_back(marker, false);
        }
        static bool complete(const event_type& e) noexcept {
            cl_int status = CL_QUEUED;
            if (clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
                return true;  // an invalid event guards nothing
            return status <= CL_COMPLETE;
        }
        static void wait(const event_type* events, std::size_t count) noexcept {
            for (std::size_t i = 0; i < count; ++i) {
                cl_event e = events[i]();
                if (e) clWaitForEvents(1, &e);
            }
        }
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
