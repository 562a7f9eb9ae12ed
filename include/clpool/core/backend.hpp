// The Backend concept: what a pool needs from the thing that makes memory,
// the abilities a backend declares, and backend_traits, the pool's one door to
// a backend's optional members. docs/BACKENDS.md has the requirements as a table.
#pragma once

#include <clpool/core/memory_kind.hpp>
#include <clpool/core/segments.hpp>
#include <clpool/core/stats.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace clpool {

enum class AllocStatus : unsigned char {
    ok,
    out_of_memory,  // the driver is out of memory: the pool gives its cache back and retries once
    failed,         // any other driver failure: reported as driver_error, no retry
};

// What Backend::allocate returns: the memory (empty unless ok) and the
// driver's own code for the outcome (0 on success).
template <class Memory>
struct Allocation {
    Memory memory{};
    AllocStatus status = AllocStatus::failed;
    int native_code = 0;
};

// What a backend can do beyond making memory. A backend declares its
// abilities, and then must have the members each one names:
//
//   static constexpr clpool::BackendAbilities abilities =
//       clpool::BackendAbility::events | clpool::BackendAbility::abandon;
//
// No declaration means BackendAbility::none. Pool and Handle use an optional
// member only through backend_traits<B> (below), and only when declared.
enum class BackendAbility : unsigned {
    none = 0,
    // `using event_type` (copyable),
    // `static bool event_complete(const event_type&) noexcept`,
    // `static void wait_for(const event_type*, std::size_t) noexcept`:
    // release_after(events); a released buffer is reused only after its events complete.
    events = 1u << 0,
    // `void abandon() noexcept`: in a fork child, forget the driver handles
    // without releasing them (the parent still owns them).
    abandon = 1u << 1,
    // No member of its own; needs `events`. The pool waits (wait_for) for a
    // buffer's pending events before it frees the buffer: trim, eviction, a
    // handle outliving its pool. For memory that must outlive the commands
    // using it beyond what a driver's reference count guards
    // (MappedPinnedBackend: a mapped host pointer is the source or destination
    // of a copy on another buffer).
    free_waits_for_events = 1u << 2,
    // The backend keeps memory of its own to carve from (SubAllocated's
    // segments): `Allocation<memory_type> allocate_held(std::size_t, MemoryKind) noexcept`
    // serves from what it already holds, never the driver (status
    // out_of_memory when nothing fits); `std::size_t release_empty() noexcept`
    // gives whole empty segments back to the driver (returns their bytes);
    // `void add_stats(PoolStats&) const noexcept` fills the segment fields;
    // `void add_segments(std::vector<SegmentInfo>&) const` appends every
    // segment and its blocks (block states and buffer ids left to the pool),
    // and `std::pair<std::uintptr_t, std::size_t> place_of(const memory_type&) const noexcept`
    // names the segment (its SegmentInfo::id) and offset of one block ({0, 0}
    // for one outside every segment): a snapshot joins blocks to buffers by them.
    // The pool then gives its cache back to the backend before it lets the
    // backend grow (allocate), and trim() calls release_empty().
    sub_allocates = 1u << 3,
};
// A set of abilities: BackendAbility values joined with |.
using BackendAbilities = BackendAbility;
// The snake_case spellings, kept for one minor version so that backends
// written against them still compile (with a warning that names the new one).
using backend_ability [[deprecated("use clpool::BackendAbility")]] = BackendAbility;
using backend_abilities [[deprecated("use clpool::BackendAbilities")]] = BackendAbilities;

constexpr BackendAbilities operator|(BackendAbilities a, BackendAbilities b) noexcept {
    return static_cast<BackendAbilities>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
// True when every ability of `wanted` is in `set`.
constexpr bool has_abilities(BackendAbilities set, BackendAbilities wanted) noexcept {
    return (static_cast<unsigned>(set) & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

// --- The required members, one small concept each.

// `B::memory_type`: owner of one allocation; destroying it frees the memory.
template <class B>
concept backend_memory = requires { typename B::memory_type; } && std::movable<typename B::memory_type> &&
                         std::default_initializable<typename B::memory_type>;

// The device facts the pool reads once.
template <class B>
concept backend_limits = requires(const B& cb) {
    // The largest single allocation the device accepts (CL_DEVICE_MAX_MEM_ALLOC_SIZE).
    { cb.max_alloc_size() } noexcept -> std::same_as<std::size_t>;
    // True where the device shares host memory (integrated GPU, CPU device).
    { cb.unified_memory() } noexcept -> std::same_as<bool>;
};

// Makes n committed bytes of kind k; never throws; callable from many threads at once.
template <class B>
concept backend_allocate = backend_memory<B> && requires(B& b, std::size_t n, MemoryKind k) {
    { b.allocate(n, k) } noexcept -> std::same_as<Allocation<typename B::memory_type>>;
};

// A short name for messages ("opencl", "host").
template <class B>
concept backend_name = requires(const B& cb) {
    { cb.name() } -> std::convertible_to<std::string>;
};

// --- The abilities.

// No `abilities` member, or a `static constexpr BackendAbilities abilities`.
template <class B>
concept backend_abilities_declaration = !requires { B::abilities; } || requires {
    requires std::same_as<decltype(B::abilities), const BackendAbilities>;
    typename std::integral_constant<BackendAbilities, B::abilities>;  // a constant expression
};

namespace detail {
template <class B>
consteval BackendAbilities declared_abilities() noexcept {
    if constexpr (requires { B::abilities; } && backend_abilities_declaration<B>) return B::abilities;
    else return BackendAbility::none;
}
}  // namespace detail

// B declares ability A (in a well-formed `abilities`).
template <class B, BackendAbility A>
concept backend_declares = has_abilities(detail::declared_abilities<B>(), A);

// BackendAbility::events, member by member.
template <class B>
concept backend_event_type = requires { typename B::event_type; } && std::copyable<typename B::event_type>;
template <class B>
concept backend_event_complete = backend_event_type<B> && requires(const typename B::event_type& e) {
    { B::event_complete(e) } noexcept -> std::same_as<bool>;
};
template <class B>
concept backend_wait_for = backend_event_type<B> && requires(const typename B::event_type* events, std::size_t n) {
    { B::wait_for(events, n) } noexcept -> std::same_as<void>;
};
template <class B>
concept backend_events = backend_event_type<B> && backend_event_complete<B> && backend_wait_for<B>;

// BackendAbility::abandon.
template <class B>
concept backend_abandon = requires(B& b) {
    { b.abandon() } noexcept -> std::same_as<void>;
};

// BackendAbility::sub_allocates.
template <class B>
concept backend_sub_allocates =
    backend_memory<B> && requires(B& b, const B& cb, std::size_t n, MemoryKind k, PoolStats& s,
                                  std::vector<SegmentInfo>& segs, const typename B::memory_type& m) {
        { b.allocate_held(n, k) } noexcept -> std::same_as<Allocation<typename B::memory_type>>;
        { b.release_empty() } noexcept -> std::same_as<std::size_t>;
        { cb.add_stats(s) } noexcept -> std::same_as<void>;
        { cb.add_segments(segs) } -> std::same_as<void>;
        { cb.place_of(m) } noexcept -> std::same_as<std::pair<std::uintptr_t, std::size_t>>;
    };

// BackendAbility::free_waits_for_events: waits with the events' members.
template <class B>
concept backend_free_waits_for_events = backend_declares<B, BackendAbility::events> && backend_events<B>;

namespace detail {
// Members an ability names, present whether or not it is declared. A backend
// that has them must declare the ability: an undeclared member would be
// silently unused (the pool calls optional members only when declared).
template <class B>
concept has_event_members =
    requires { typename B::event_type; } || requires { &B::event_complete; } || requires { &B::wait_for; };
template <class B>
concept has_abandon_member = requires { &B::abandon; } || requires(B& b) { b.abandon(); };
template <class B>
concept has_sub_allocation_members = requires { &B::allocate_held; } || requires { &B::release_empty; } || requires {
    &B::add_stats;
} || requires { &B::add_segments; } || requires { &B::place_of; };
// A bool member free_waits_for_events: refused, so that the ability is declared in one place
// (BackendAbility::free_waits_for_events), not half as a flag.
template <class B>
concept has_free_waits_member = requires { B::free_waits_for_events; };
}  // namespace detail

// A backend: the required members, a well-formed declaration of abilities,
// the members of every declared ability, and no ability member undeclared.
template <class B>
concept Backend =
    std::move_constructible<B> && backend_memory<B> && backend_limits<B> && backend_allocate<B> && backend_name<B> &&
    backend_abilities_declaration<B> && (!backend_declares<B, BackendAbility::events> || backend_events<B>) &&
    (!backend_declares<B, BackendAbility::abandon> || backend_abandon<B>) &&
    (!backend_declares<B, BackendAbility::free_waits_for_events> || backend_free_waits_for_events<B>) &&
    (!backend_declares<B, BackendAbility::sub_allocates> || backend_sub_allocates<B>) &&
    (backend_declares<B, BackendAbility::sub_allocates> || !detail::has_sub_allocation_members<B>) &&
    (backend_declares<B, BackendAbility::events> || !detail::has_event_members<B>) &&
    (backend_declares<B, BackendAbility::abandon> || !detail::has_abandon_member<B>) &&
    !detail::has_free_waits_member<B>;

namespace detail {
// Fails a static_assert whose sentence names the member at fault, for a type
// that is not a Backend. Returns false if no sentence covers the fault (the
// concept's own diagnostic follows then).
template <class B>
consteval bool diagnose_backend() {
    static_assert(std::move_constructible<B>,
                  "clpool: a backend must be move-constructible (a pool takes it by value)");
    static_assert(
        requires { typename B::memory_type; },
        "clpool: the backend has no `using memory_type = ...` (the owner of one allocation)");
    if constexpr (requires { typename B::memory_type; }) {
        static_assert(backend_memory<B>,
                      "clpool: the backend's `memory_type` must be movable and default-constructible");
        static_assert(backend_allocate<B>,
                      "clpool: the backend has no `Allocation<memory_type> allocate(std::size_t, "
                      "MemoryKind) noexcept`");
    }
    static_assert(
        requires(const B& cb) {
            { cb.max_alloc_size() } noexcept -> std::same_as<std::size_t>;
        }, "clpool: the backend has no `std::size_t max_alloc_size() const noexcept`");
    static_assert(
        requires(const B& cb) {
            { cb.unified_memory() } noexcept -> std::same_as<bool>;
        }, "clpool: the backend has no `bool unified_memory() const noexcept`");
    static_assert(backend_name<B>,
                  "clpool: the backend has no `name() const` returning something convertible to "
                  "std::string");
    static_assert(
        backend_abilities_declaration<B>,
        "clpool: the backend's `abilities` must be `static constexpr clpool::BackendAbilities abilities = ...`");
    if constexpr (backend_declares<B, BackendAbility::events>) {
        static_assert(
            backend_event_type<B>,
            "clpool: the backend declares BackendAbility::events but has no copyable `using event_type = ...`");
        if constexpr (backend_event_type<B>) {
            static_assert(backend_event_complete<B>,
                          "clpool: the backend declares BackendAbility::events but has no "
                          "`static bool event_complete(const event_type&) noexcept`");
            static_assert(backend_wait_for<B>,
                          "clpool: the backend declares BackendAbility::events but has no "
                          "`static void wait_for(const event_type*, std::size_t) noexcept`");
        }
    } else {
        static_assert(!has_event_members<B>,
                      "clpool: the backend has `event_type`, `event_complete` or `wait_for` but does not declare "
                      "BackendAbility::events in `abilities` (an undeclared member would go unused)");
        static_assert(!backend_declares<B, BackendAbility::free_waits_for_events>,
                      "clpool: the backend declares BackendAbility::free_waits_for_events without "
                      "BackendAbility::events (it waits with `event_type` and `wait_for`)");
    }
    if constexpr (backend_declares<B, BackendAbility::abandon>) {
        static_assert(backend_abandon<B>,
                      "clpool: the backend declares BackendAbility::abandon but has no `void abandon() noexcept`");
    } else {
        static_assert(!has_abandon_member<B>,
                      "clpool: the backend has `abandon()` but does not declare BackendAbility::abandon in "
                      "`abilities` (an undeclared member would go unused)");
    }
    if constexpr (backend_declares<B, BackendAbility::sub_allocates>) {
        static_assert(backend_sub_allocates<B>,
                      "clpool: the backend declares BackendAbility::sub_allocates but lacks one of "
                      "`Allocation<memory_type> allocate_held(std::size_t, MemoryKind) noexcept`, "
                      "`std::size_t release_empty() noexcept`, `void add_stats(PoolStats&) const noexcept`, "
                      "`void add_segments(std::vector<SegmentInfo>&) const`, "
                      "`std::pair<std::uintptr_t, std::size_t> place_of(const memory_type&) const noexcept`");
    } else {
        static_assert(!has_sub_allocation_members<B>,
                      "clpool: the backend has `allocate_held`, `release_empty`, `add_stats`, `add_segments` or "
                      "`place_of` but does not declare "
                      "BackendAbility::sub_allocates in `abilities` (an undeclared member would go unused)");
    }
    static_assert(!has_free_waits_member<B>,
                  "clpool: the backend has a `free_waits_for_events` member; declare "
                  "BackendAbility::free_waits_for_events in `abilities` instead");
    return Backend<B>;
}
}  // namespace detail

// Backend<B>, or else a compile error whose message names the member at fault
// (detail::diagnose_backend). For class templates that take a backend (Pool,
// the named pools); it never quietly yields false, so never overload on it.
template <class B>
concept CheckedBackend = Backend<B> || detail::diagnose_backend<B>();

namespace detail {
// The event type of a backend without BackendAbility::events.
struct no_event {};
template <class B, bool = backend_declares<B, BackendAbility::events>>
struct event_type_of {
    using type = no_event;
};
template <class B>
struct event_type_of<B, true> {
    using type = typename B::event_type;
};
}  // namespace detail

// The only caller of a backend's optional members: each call does what the
// backend declared, or the neutral thing when it declared nothing.
template <Backend B>
struct backend_traits {
    static constexpr BackendAbilities abilities = detail::declared_abilities<B>();
    static constexpr bool has_events = has_abilities(abilities, BackendAbility::events);
    static constexpr bool has_abandon = has_abilities(abilities, BackendAbility::abandon);
    static constexpr bool free_waits_for_events = has_abilities(abilities, BackendAbility::free_waits_for_events);
    static constexpr bool sub_allocates = has_abilities(abilities, BackendAbility::sub_allocates);

    // B::event_type with BackendAbility::events, else detail::no_event.
    using event_type = typename detail::event_type_of<B>::type;

    // Whether the work behind `e` is done (no events: always).
    static bool event_complete(const event_type& e) noexcept {
        if constexpr (has_events) return B::event_complete(e);
        else return true;
    }
    // Blocks until the `count` events are complete (no events: returns).
    static void wait_for(const event_type* events, std::size_t count) noexcept {
        if constexpr (has_events) B::wait_for(events, count);
    }
    // In a fork child: the backend forgets its driver handles (no abandon: nothing).
    static void abandon(B& backend) noexcept {
        if constexpr (has_abandon) backend.abandon();
    }
    // Whole empty segments back to the driver (no sub_allocates: nothing).
    static std::size_t release_empty(B& backend) noexcept {
        if constexpr (sub_allocates) return backend.release_empty();
        else return 0;
    }
    // The segment fields of a snapshot (no sub_allocates: left at zero).
    static void add_stats(const B& backend, PoolStats& s) noexcept {
        if constexpr (sub_allocates) backend.add_stats(s);
    }
    // The segments of a snapshot (no sub_allocates: none). Throws bad_alloc only.
    static void add_segments(const B& backend, std::vector<SegmentInfo>& out) {
        if constexpr (sub_allocates) backend.add_segments(out);
    }
    // The segment id and offset of one block (no sub_allocates: {0, 0}).
    static std::pair<std::uintptr_t, std::size_t> place_of(const B& backend,
                                                           const typename B::memory_type& m) noexcept {
        if constexpr (sub_allocates) return backend.place_of(m);
        else return {0, 0};
    }
};

}  // namespace clpool
