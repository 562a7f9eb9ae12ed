// Must not compile: a Pool (or a named pool) over a backend with one member wrong, picked by
// CLPOOL_BAD_CASE. tests/CMakeLists.txt builds each case and expects the compiler's output to
// hold the sentence of detail::diagnose_backend (core/backend.hpp) that names the member.
#include <clpool/core/backend.hpp>
#include <clpool/core/pool.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#if CLPOOL_BAD_CASE == 10
#include <clpool/pools/aliases.hpp>
#endif

#include <cstddef>

namespace {

struct Memory {};
struct Event {};

// Everything right except what a case changes.
struct Base {
    using memory_type = Memory;
    std::size_t max_alloc_size() const noexcept { return 1 << 20; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "bad"; }
    clpool::Allocation<Memory> allocate(std::size_t, clpool::MemoryKind) noexcept { return {}; }
};

struct Bad : Base {
#if CLPOOL_BAD_CASE == 1 || CLPOOL_BAD_CASE == 10  // events: event_complete not noexcept
    using event_type = Event;
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::events;
    static bool event_complete(const Event&) { return true; }
    static void wait_for(const Event*, std::size_t) noexcept {}
#elif CLPOOL_BAD_CASE == 2  // events: no event_type
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::events;
#elif CLPOOL_BAD_CASE == 3  // events: no wait_for
    using event_type = Event;
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::events;
    static bool event_complete(const Event&) noexcept { return true; }
#elif CLPOOL_BAD_CASE == 4  // abandon: not noexcept
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::abandon;
    void abandon() {}
#elif CLPOOL_BAD_CASE == 5  // free_waits_for_events without events
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::free_waits_for_events;
#elif CLPOOL_BAD_CASE == 6  // event members, events not declared
    using event_type = Event;
    static bool event_complete(const Event&) noexcept { return true; }
    static void wait_for(const Event*, std::size_t) noexcept {}
#elif CLPOOL_BAD_CASE == 7  // abandon(), abandon not declared
    void abandon() noexcept {}
#elif CLPOOL_BAD_CASE == 8  // the old free_waits_for_events flag
    using event_type = Event;
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::events;
    static bool event_complete(const Event&) noexcept { return true; }
    static void wait_for(const Event*, std::size_t) noexcept {}
    static constexpr bool free_waits_for_events = true;
#elif CLPOOL_BAD_CASE == 9  // required: allocate not noexcept
    clpool::Allocation<Memory> allocate(std::size_t, clpool::MemoryKind) { return {}; }
#else
#error "CLPOOL_BAD_CASE: 1 to 10"
#endif
};

#if CLPOOL_BAD_CASE == 10
[[maybe_unused]] clpool::BasicBufferPool<Bad>* pool = nullptr;  // a named pool says the same
#else
[[maybe_unused]] clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::NoLock, Bad>*
    pool = nullptr;
#endif

}  // namespace
