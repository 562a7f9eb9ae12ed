// The reuse-ordering protocol: when a released bucket may serve again, as pure logic over queue facts.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <functional>
#include <vector>

// A bucket may be handed out again only after every command its old owner
// enqueued has completed (docs/DROPIN.md, the promises table). While a
// context's only queue is in order, that queue orders the reuse and a release
// needs no marker; a second queue, that queue's release or its switch to
// out-of-order mode fence what went back unfenced with one event. Everything
// here runs under the caller's lock and calls OpenCL only through a Driver,
// so tests can drive it with fake queues and events.
namespace clpool::interpose::reuse {

// The OpenCL calls the protocol makes; the core's table calls the driver.
struct Driver {
    cl_event (*marker)(cl_command_queue q);   // enqueued and flushed; nullptr when it cannot be
    cl_event (*barrier)(cl_command_queue q);  // as marker, but later commands of q wait for it even out of order
    // A barrier on q behind `events`, no event of its own (an unordered queue's first command waits too).
    void (*wait_behind)(cl_command_queue q, cl_uint n, const cl_event* events);
    void (*finish)(cl_command_queue q);
    bool (*complete)(cl_event e);  // completed, or ended in error: it guards nothing any more
    bool (*retain)(cl_event e);
    void (*release)(cl_event e);
};

// The core's table (reuse_driver.cpp).
const Driver& opencl_driver() noexcept;

// One reference to an event, released through its Driver.
class Fence {
public:
    Fence() = default;
    Fence(const Fence&) = delete;
    Fence& operator=(const Fence&) = delete;
    ~Fence() { reset(); }
    // Holds e (retained); nothing if the retain fails.
    void hold(const Driver& d, cl_event e) {
        reset();
        if (d.retain(e)) {
            d_ = &d;
            e_ = e;
        }
    }
    void reset() noexcept {
        if (e_) d_->release(e_);
        e_ = nullptr;
    }
    cl_event get() const noexcept { return e_; }
    explicit operator bool() const noexcept { return e_ != nullptr; }

private:
    const Driver* d_ = nullptr;
    cl_event e_ = nullptr;
};

// What the protocol keeps per pooled buffer (not per sub-buffer).
struct BufferMark {
    // The buffer went back to the pool with no fence, behind its context's
    // lone in-order queue, as release number `unfenced` (0: with a fence; kept
    // while reissued: its old owner's commands may still be queued) ...
    std::uint64_t unfenced = 0;
    // ... or, once that queue stopped being alone, the fence it waits for
    // before it is handed out again (cached buffers only).
    Fence fence;
};

// The caller's side of one context: its pooled buffers and its cache.
class Buffers {
public:
    // Calls f for every pooled buffer of the context, live or cached
    // (`cached`: its bucket is back in the pool).
    virtual void each(const std::function<void(BufferMark&, bool cached)>& f) = 0;
    // Gives back every bucket the context's pools hold but do not lend (the
    // driver then waits for their commands itself).
    virtual void give_back_cache() = 0;

protected:
    ~Buffers() = default;
};

// Whether a bucket just taken from its pool may be handed out.
struct Reissue {
    bool wait = false;  // no: put it back behind `events`, ask the pool again
    std::vector<cl_event> events;  // one reference each, for the caller
};

// The protocol for one context. Not thread-safe: the caller's lock guards it.
class ContextOrder {
public:
    explicit ContextOrder(const Driver& d) noexcept : d_(&d) {}
    ContextOrder(const ContextOrder&) = delete;
    ContextOrder& operator=(const ContextOrder&) = delete;
    ~ContextOrder() { close(); }

    // --- queue facts
    // The application created q. What went back unfenced gets one marker on
    // the lone queue (never clFinish: a user event may hold it), and q starts
    // behind the fences of reissued buffers that may still have old commands.
    // Throws std::bad_alloc before anything changed.
    void add_queue(cl_command_queue q, bool in_order, Buffers& buffers);
    // The application's last reference to q is going: later releases must
    // still wait for what it runs; if it was the lone queue, its marker fences
    // what went back unfenced.
    void remove_queue(cl_command_queue q, Buffers& buffers) noexcept;
    // q switches to out-of-order mode: a barrier enqueued while it is still in
    // order fences what went back unfenced. For good, even if the driver refuses.
    void set_out_of_order(cl_command_queue q, Buffers& buffers);
    bool in_order(cl_command_queue q) const noexcept;
    // clFinish(q) is about to run: the release count it will cover if q is
    // the lone queue, else 0. finished(that count) once it returned CL_SUCCESS.
    std::uint64_t finish_begins(cl_command_queue q);
    void finished(std::uint64_t count) noexcept;

    // --- buffers
    // The buffer's bucket goes back to its pool: the events it must wait for
    // (one reference each, for the caller); none behind a lone in-order queue.
    std::vector<cl_event> release(BufferMark& mark);
    // The buffer's bucket was just taken from its pool again. `core_writes`:
    // the core's COPY_HOST_PTR write, on its own queue, comes first, so an
    // unfenced bucket must be fenced. Throws std::bad_alloc.
    Reissue reissue(BufferMark& mark, bool core_writes);

    // Events that complete once every command enqueued so far on the
    // context's queues, live or released, has (one reference each, for the
    // caller): when the driver would delete a buffer released now. Throws
    // std::bad_alloc before any marker exists.
    std::vector<cl_event> completion() { return fences(); }

    // The context's only queue when no marker is needed to reuse its buffers:
    // exactly one live queue, in order, and no released queue's marker still
    // pending. nullptr otherwise (several queues, out of order, or in doubt).
    cl_command_queue lone_queue();

    // clFinish on every live queue: what a caller that cannot fence does instead.
    void finish_all() noexcept;
    // Releases every event held; forgets the queues.
    void close() noexcept;

    std::uint64_t released() const noexcept { return released_; }
    std::uint64_t covered() const noexcept { return covered_; }

private:
    struct Queue {
        cl_command_queue q;
        bool in_order;  // false when out of order, or possibly so
    };
    std::vector<cl_event> fences();
    void end_unfenced(cl_event fence, Buffers& buffers);
    void hold_back(cl_command_queue q);
    void drop_completed(std::vector<cl_event>& events);

    const Driver* d_;
    std::vector<Queue> queues_;     // the application's live queues
    std::vector<cl_event> retired_; // markers on queues the application released
    // Unfenced releases are numbered 1, 2, ... in released_; those up to
    // covered_ need nothing more (a clFinish on the lone queue returned after
    // them, or end_unfenced fenced them).
    std::uint64_t released_ = 0, covered_ = 0;
    // Fences every queue created from now on starts behind, while they run:
    // buffers reissued with no fence may go to the new queue while their old
    // owner's commands still wait on the old one.
    std::vector<cl_event> handovers_;
};

}  // namespace clpool::interpose::reuse
