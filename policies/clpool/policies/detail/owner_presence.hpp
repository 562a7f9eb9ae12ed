// owner_presence: the owner's side of a lock it takes with plain stores; another thread waits it out with a barrier.
#pragma once

#include <clpool/platform/asymmetric_fence.hpp>
#include <clpool/platform/nap.hpp>

#include <atomic>
#include <cstdint>

namespace clpool::detail {

// Dekker's handshake, made asymmetric (asymmetric_fence). The owner stores
// `inside`, then loads the lock's gate word; another thread (under the lock's
// mutex) closes the gate, forces a full barrier on every thread of the
// process (heavy(), a system call), then loads `inside`. At least one of the
// two sees the other's store: either the owner sees the gate closed and takes
// the mutex instead, or the other thread sees the owner inside and waits for
// it to leave. The owner pays a store, a compiler barrier and a load to
// enter, and a store to leave: no read-modify-write, which on x86 drains the
// store buffer and costs most of an uncontended lock.
class owner_presence {
public:
    using gate_word = std::atomic<std::uint8_t>;

    // The owner: true if it is inside (the gate read `open`); false, and not inside, if not.
    bool enter(const gate_word& gate, std::uint8_t open) noexcept {
        inside_.store(true, std::memory_order_relaxed);
        asymmetric_fence::light();
        if (gate.load(std::memory_order_acquire) == open) [[likely]]
            return true;
        inside_.store(false, std::memory_order_release);
        return false;
    }
    void leave() noexcept { inside_.store(false, std::memory_order_release); }

    // The owner, before enter(): whether an earlier thread on its thread
    // pointer is still inside (one a fork child does not have; otherwise
    // the owner's own last store, false).
    bool occupied() const noexcept { return inside_.load(std::memory_order_relaxed); }

    // Another thread, after it closed the gate(s): a full barrier on every thread.
    static void barrier() noexcept {
        // No barrier could be had (membarrier and the TLB shootdown both
        // refused; never seen): an owner's store lands within a scheduler tick.
        if (!asymmetric_fence::heavy()) nap_us(10000);
    }

    // Another thread, after barrier(): until the owner is out. Its section is
    // a list pop or push, unless it was preempted there: spin briefly, then
    // sleep so that it can run (on this core too).
    void wait_out() const noexcept {
        for (int spins = 0; inside_.load(std::memory_order_acquire);)
            if (spins < 64) ++spins;
            else nap_us(20);
    }

private:
    std::atomic<bool> inside_{false};
};

}  // namespace clpool::detail
