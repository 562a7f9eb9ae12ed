// The reuse-ordering protocol's decisions (reuse_order.hpp); OpenCL is reached only through the Driver.
#include "reuse_order.hpp"

#include <algorithm>

namespace clpool::interpose::reuse {

void ContextOrder::drop_completed(std::vector<cl_event>& events) {
    std::erase_if(events, [this](cl_event e) {
        if (!d_->complete(e)) return false;
        d_->release(e);
        return true;
    });
}

// The events a released buffer waits for: a marker on each of the context's
// queues (every command enqueued so far) and the markers of queues already released.
std::vector<cl_event> ContextOrder::fences() {
    drop_completed(retired_);
    std::vector<cl_event> out;
    out.reserve(retired_.size() + queues_.size());  // the only throw, before any marker exists
    for (cl_event e : retired_)
        if (d_->retain(e)) out.push_back(e);
    for (const Queue& q : queues_) {
        if (cl_event marker = d_->marker(q.q)) out.push_back(marker);
        else d_->finish(q.q);  // cannot fence: wait instead
    }
    return out;
}

cl_command_queue ContextOrder::lone_queue() {
    if (queues_.size() != 1 || !queues_[0].in_order) return nullptr;
    drop_completed(retired_);
    return retired_.empty() ? queues_[0].q : nullptr;
}

// The lone queue is about to stop being the only way to the context's
// buffers. Every buffer that went back with no fence since the last call gets
// `fence`, an event that completes after everything the lone queue had
// enqueued: a cached one waits for it when next handed out (reissue); a live
// one (reissued with no fence) may be used on a new queue, so queues created
// while the fence runs start behind it (hold_back). fence == nullptr: no fence
// could be enqueued; the context's cache goes back to the driver, which waits
// for the commands (a live buffer stays unordered then; a clFinish here could
// hang on a user event the application sets later).
void ContextOrder::end_unfenced(cl_event fence, Buffers& buffers) {
    if (released_ == covered_) return;
    if (!fence) buffers.give_back_cache();
    bool live = false;
    buffers.each([&](BufferMark& mark, bool cached) {
        if (mark.unfenced <= covered_) return;
        mark.unfenced = 0;
        if (!fence) return;
        if (cached) mark.fence.hold(*d_, fence);
        else live = true;
    });
    covered_ = released_;
    if (!live || !d_->retain(fence)) return;
    try {
        handovers_.push_back(fence);
    } catch (...) {  // out of host memory: new queues will not wait for this handover
        d_->release(fence);
    }
}

// Makes a new queue start behind the context's pending handover fences. If
// the barrier cannot be enqueued, nothing safe is left (waiting could hang).
void ContextOrder::hold_back(cl_command_queue q) {
    drop_completed(handovers_);
    if (handovers_.empty()) return;
    d_->wait_behind(q, static_cast<cl_uint>(handovers_.size()), handovers_.data());
}

void ContextOrder::add_queue(cl_command_queue q, bool in_order, Buffers& buffers) {
    queues_.reserve(queues_.size() + 1);  // the only throw, before anything changed
    if (released_ != covered_ && !queues_.empty()) {
        cl_event marker = d_->marker(queues_[0].q);
        end_unfenced(marker, buffers);
        if (marker) d_->release(marker);
    }
    hold_back(q);
    queues_.push_back(Queue{q, in_order});
}

void ContextOrder::remove_queue(cl_command_queue q, Buffers& buffers) noexcept {
    cl_event marker = nullptr;
    try {
        retired_.reserve(retired_.size() + 1);
        marker = d_->marker(q);
    } catch (...) {  // no room to keep its marker: wait for the queue instead
    }
    if (marker) retired_.push_back(marker);  // reserved: cannot throw
    try {
        if (marker) end_unfenced(marker, buffers);  // if this was the lone queue, its marker fences them
    } catch (...) {
        marker = nullptr;  // out of host memory: wait below instead
    }
    if (!marker) {
        d_->finish(q);
        covered_ = released_;  // everything it ran has completed
    }
    std::erase_if(queues_, [q](const Queue& x) { return x.q == q; });
}

void ContextOrder::set_out_of_order(cl_command_queue q, Buffers& buffers) {
    auto it = std::find_if(queues_.begin(), queues_.end(), [q](const Queue& x) { return x.q == q; });
    if (it == queues_.end() || !it->in_order) return;
    it->in_order = false;
    if (released_ == covered_) return;
    // Enqueued while still in order: every later command runs after it.
    cl_event barrier = d_->barrier(q);
    end_unfenced(barrier, buffers);
    if (barrier) d_->release(barrier);
}

bool ContextOrder::in_order(cl_command_queue q) const noexcept {
    auto it = std::find_if(queues_.begin(), queues_.end(), [q](const Queue& x) { return x.q == q; });
    return it != queues_.end() && it->in_order;
}

std::uint64_t ContextOrder::finish_begins(cl_command_queue q) { return q && lone_queue() == q ? released_ : 0; }

// Everything the lone queue had when clFinish began has completed: buffers
// released before need no fence any more.
void ContextOrder::finished(std::uint64_t count) noexcept { covered_ = std::max(covered_, count); }

std::vector<cl_event> ContextOrder::release(BufferMark& mark) {
    mark.fence.reset();
    if (lone_queue()) {
        // No marker: the lone queue orders the reuse. end_unfenced fences the
        // bucket if that stops holding before it is reused.
        mark.unfenced = ++released_;
        return {};
    }
    mark.unfenced = 0;  // the markers cover what its earlier owners enqueued too
    try {
        return fences();
    } catch (...) {
        finish_all();
        return {};
    }
}

// `wait`: it was cached with its fence still running, or it went back with no
// fence and the reuse is not on the lone queue (another queue, or the core's
// own write).
Reissue ContextOrder::reissue(BufferMark& mark, bool core_writes) {
    Reissue r;
    if (mark.unfenced > covered_ && (core_writes || !lone_queue())) {
        r.events = fences();
        mark.unfenced = 0;
        r.wait = true;
    } else if (mark.fence && !d_->complete(mark.fence.get())) {
        r.events.reserve(1);
        if (d_->retain(mark.fence.get())) r.events.push_back(mark.fence.get());
        r.wait = true;
    }
    return r;
}

void ContextOrder::finish_all() noexcept {
    for (const Queue& q : queues_) d_->finish(q.q);
}

void ContextOrder::close() noexcept {
    for (cl_event e : retired_) d_->release(e);
    retired_.clear();
    for (cl_event e : handovers_) d_->release(e);
    handovers_.clear();
    queues_.clear();
}

}  // namespace clpool::interpose::reuse
