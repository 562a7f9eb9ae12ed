// block: the host-side node for one driver allocation, and what a backend says about its events.
#pragma once

#include <boost/intrusive/list.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace clpool::detail {

// Backends that can tell when queued work is done announce it with an
// `event_type` and `static bool event_complete(const event_type&) noexcept`.
struct no_event {};
template <class B>
struct event_traits {
    using type = no_event;
    static constexpr bool supported = false;
    static bool complete(const type&) noexcept { return true; }
};
template <class B>
    requires requires(const typename B::event_type& e) {
        { B::event_complete(e) } noexcept -> std::same_as<bool>;
    }
struct event_traits<B> {
    using type = typename B::event_type;
    static constexpr bool supported = true;
    static bool complete(const type& e) noexcept { return B::event_complete(e); }
};

// Backends whose memory must outlive the commands that use it beyond what a
// driver's reference count guards (a mapped host pointer that is the source or
// destination of a copy on another buffer) set `static constexpr bool
// free_waits_for_events = true`: the pool then waits for a buffer's pending
// events before it frees it (trim, eviction, a handle outliving its pool).
template <class B>
constexpr bool free_waits_for_events() noexcept {
    if constexpr (requires { B::free_waits_for_events; }) return B::free_waits_for_events;
    else return false;
}

#ifdef NDEBUG
using link_mode = boost::intrusive::link_mode<boost::intrusive::normal_link>;
#else
// Debug builds catch a node destroyed while still on a list.
using link_mode = boost::intrusive::link_mode<boost::intrusive::safe_link>;
#endif

// The host-side node for one driver allocation. Lives on exactly one list at
// a time: its bucket's free list, its bucket's pending list, or its stripe's
// in-use list. Allocated on a miss only, so a hit allocates nothing.
template <class Memory, class Event>
struct block {
    boost::intrusive::list_member_hook<link_mode> hook;
    Memory memory;
    std::size_t bucket_bytes = 0;
    std::size_t requested = 0;    // what the current holder asked for (stats)
    std::uint32_t bucket = 0;     // index into the pool's buckets
    std::uint32_t generation = 0; // fork generation it was made in (process_state.hpp)
    void* owner = nullptr;        // the pool; nullptr once that pool is destroyed
    std::vector<Event> events;    // pending: reuse after these complete (capacity kept across reuses)
};

template <class Block>
using block_list = boost::intrusive::list<
    Block, boost::intrusive::member_hook<Block, decltype(Block::hook), &Block::hook>,
    boost::intrusive::constant_time_size<false>>;

}  // namespace clpool::detail
