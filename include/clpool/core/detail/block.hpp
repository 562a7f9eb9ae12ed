// block: the host-side node for one driver allocation.
#pragma once

#include <boost/intrusive/list.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace clpool::detail {

#ifdef NDEBUG
using link_mode = boost::intrusive::link_mode<boost::intrusive::normal_link>;
#else
// Debug builds catch a node destroyed while still on a list.
using link_mode = boost::intrusive::link_mode<boost::intrusive::safe_link>;
#endif

// The host-side node for one driver allocation. Lives on exactly one list at
// a time: its bucket's free list, its bucket's pending list, or its stripe's
// in-use list. Allocated on a miss only, so a hit allocates nothing.
// Diag: what the pool's diagnostics keep per buffer (diagnostics_hook.hpp;
// empty, and no bytes, for NoDiagnostics).
template <class Memory, class Event, class Diag>
struct block {
    boost::intrusive::list_member_hook<link_mode> hook;
    Memory memory;
    std::size_t bucket_bytes = 0;
    std::size_t requested = 0;    // what the current holder asked for (stats)
    std::uint32_t bucket = 0;     // index into the pool's buckets
    std::uint32_t generation = 0; // fork generation it was made in (process_state.hpp)
    // The pool's address; 0 once that pool is destroyed. While a handle's
    // release is on its way into the pool, the low bit `releasing` is set too:
    // the release sets it before it touches the pool, and ~Pool waits for such
    // a release instead of destroying the pool under it (pool_teardown.hpp).
    std::atomic<std::uintptr_t> owner{0};
    std::atomic<bool> pool_going{false};  // set by ~Pool while the block is in use, before it scans marks
    bool orphaned = false;                // ~Pool left it to its holder (decided under pool_teardown's mutex)
    // For snapshots (snapshot.hpp). A hit from the shared lists writes
    // handout_seq alone, next to the hot fields above; the rest is written on
    // a miss or by set_tag.
    std::uint64_t handout_seq = 0; // its stripe's hand-outs up to its last one from the shared lists
    std::uint32_t uses = 0;        // its hand-outs from the shared lists, the first included
    std::vector<Event> events;     // pending: reuse after these complete (capacity kept across reuses)
    // Handle::set_tag's, valid while tag_seq == handout_seq. Atomic (relaxed:
    // plain loads and stores) because a holder may set it, unlocked, while a
    // snapshot reads it under the lists' locks; a snapshot may then see the
    // old tag or the new, never a torn pointer.
    std::atomic<const char*> tag{nullptr};
    std::atomic<std::uint64_t> tag_seq{0};  // handout_seq when the tag was set: a hit need not clear the tag
    std::uint64_t made_ns = 0;     // steady clock when the driver made it
    // The diagnostics' own (a history's event count and call site), after
    // the fields every hit touches.
    [[no_unique_address]] Diag diag;

    block() = default;
    block(const block&) = delete;
    block& operator=(const block&) = delete;

    static constexpr std::uintptr_t releasing = 1;  // pools are aligned far beyond 2 bytes

    // The release is done with the pool: whoever now holds the block (a list
    // or a magazine) may hand it out again. Called under that holder's lock.
    void end_release() noexcept {
        owner.store(owner.load(std::memory_order_relaxed) & ~releasing, std::memory_order_release);
    }

    // The current (or, once idle, last) holder's tag; nullptr if it set none.
    // The tag first: most buffers never had one, and a release asks this.
    const char* current_tag() const noexcept {
        const char* t = tag.load(std::memory_order_relaxed);
        return t && tag_seq.load(std::memory_order_relaxed) == handout_seq ? t : nullptr;
    }
    void set_tag(const char* t) noexcept {
        tag.store(t, std::memory_order_relaxed);
        tag_seq.store(handout_seq, std::memory_order_relaxed);
    }
    void clear_tag() noexcept { tag.store(nullptr, std::memory_order_relaxed); }
};

template <class Block>
using block_list =
    boost::intrusive::list<Block, boost::intrusive::member_hook<Block, decltype(Block::hook), &Block::hook>,
                           boost::intrusive::constant_time_size<false>>;

}  // namespace clpool::detail
