// The Backend concept: every shipped backend and mock satisfies it; a type with a required member
// wrong, or an ability declared and its member wrong (or a member without its ability), does not.
#include <clpool/core/has_opencl.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#include <clpool/core/backend.hpp>
#include <clpool/backends/host.hpp>
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/backends/mapped_pinned.hpp>
#include <clpool/backends/opencl.hpp>
#endif

#include "benchmarks/common/phantom_backend.hpp"
#include "mock_backend.hpp"

#include "backends_md_example.hpp"  // docs/BACKENDS.md's minimal backend, extracted at configure time

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

using namespace clpool;

namespace {

// --- The real backends and mocks.

static_assert(Backend<HostBackend> && CheckedBackend<HostBackend>);
static_assert(Backend<test::MockBackend>);
static_assert(Backend<bench::PhantomBackend>);
static_assert(Backend<example::MallocBackend>);
static_assert(backend_traits<HostBackend>::abilities == BackendAbility::none);
static_assert(!backend_traits<test::MockBackend>::has_events && !backend_traits<test::MockBackend>::has_abandon);
static_assert(std::is_same_v<backend_traits<HostBackend>::event_type, detail::no_event>);
static_assert(backend_traits<example::MallocBackend>::has_events);
static_assert(std::is_same_v<backend_traits<example::MallocBackend>::event_type, example::Event>);
#ifdef CLPOOL_HAS_OPENCL
static_assert(Backend<OpenCLBackend> && Backend<MappedPinnedBackend>);
static_assert(backend_traits<OpenCLBackend>::abilities == (BackendAbility::events | BackendAbility::abandon));
static_assert(backend_traits<OpenCLBackend>::has_events && backend_traits<OpenCLBackend>::has_abandon &&
              !backend_traits<OpenCLBackend>::free_waits_for_events);
static_assert(backend_traits<MappedPinnedBackend>::has_events && backend_traits<MappedPinnedBackend>::has_abandon &&
              backend_traits<MappedPinnedBackend>::free_waits_for_events);
static_assert(std::is_same_v<backend_traits<OpenCLBackend>::event_type, cl::Event>);
// A backend derived from one inherits its declaration (the interposer's WatchedBackend).
struct DerivedOpenCL : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
};
static_assert(Backend<DerivedOpenCL> && backend_traits<DerivedOpenCL>::has_abandon);
#endif

// --- A valid base to break one member at a time.

struct Memory {};
struct Good {
    using memory_type = Memory;
    std::size_t max_alloc_size() const noexcept { return 1 << 20; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "good"; }
    Allocation<Memory> allocate(std::size_t, MemoryKind) noexcept { return {Memory{}, AllocStatus::ok, 0}; }
};
static_assert(Backend<Good> && CheckedBackend<Good>);
static_assert(backend_traits<Good>::abilities == BackendAbility::none);

struct Event {};
// Good plus every ability, each with its members right.
struct Full : Good {
    using event_type = Event;
    static constexpr BackendAbilities abilities =
        BackendAbility::events | BackendAbility::abandon | BackendAbility::free_waits_for_events;
    static bool event_complete(const Event&) noexcept { return true; }
    static void wait_for(const Event*, std::size_t) noexcept {}
    void abandon() noexcept {}
};
static_assert(Backend<Full>);
static_assert(backend_traits<Full>::has_events && backend_traits<Full>::has_abandon &&
              backend_traits<Full>::free_waits_for_events);
struct ExplicitNone : Good {
    static constexpr BackendAbilities abilities = BackendAbility::none;
};
static_assert(Backend<ExplicitNone>);

// --- One required member wrong or missing: not a Backend.

struct NoMemoryType {
    std::size_t max_alloc_size() const noexcept { return 1; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "x"; }
};
static_assert(!Backend<NoMemoryType>);

struct Pinned {  // neither movable nor copyable
    Pinned() = default;
    Pinned(Pinned&&) = delete;
};
struct ImmovableMemory : Good {
    using memory_type = Pinned;
    Allocation<Pinned> allocate(std::size_t, MemoryKind) noexcept;
};
static_assert(!Backend<ImmovableMemory>);

struct NoDefaultMemory {
    explicit NoDefaultMemory(int) {}
};
struct NotDefaultConstructibleMemory : Good {
    using memory_type = NoDefaultMemory;
    Allocation<NoDefaultMemory> allocate(std::size_t, MemoryKind) noexcept;
};
static_assert(!Backend<NotDefaultConstructibleMemory>);

struct MaxAllocThrows : Good {
    std::size_t max_alloc_size() const { return 1; }
};
static_assert(!Backend<MaxAllocThrows>);
struct MaxAllocWrongType : Good {
    int max_alloc_size() const noexcept { return 1; }
};
static_assert(!Backend<MaxAllocWrongType>);
struct MaxAllocNotConst : Good {
    std::size_t max_alloc_size() noexcept { return 1; }
};
static_assert(!Backend<MaxAllocNotConst>);

struct UnifiedThrows : Good {
    bool unified_memory() const { return true; }
};
static_assert(!Backend<UnifiedThrows>);

struct AllocateThrows : Good {
    Allocation<Memory> allocate(std::size_t, MemoryKind) { return {}; }
};
static_assert(!Backend<AllocateThrows>);
struct AllocateWrongType : Good {
    Memory allocate(std::size_t, MemoryKind) noexcept { return {}; }
};
static_assert(!Backend<AllocateWrongType>);

struct NoName {
    using memory_type = Memory;
    std::size_t max_alloc_size() const noexcept { return 1; }
    bool unified_memory() const noexcept { return true; }
    Allocation<Memory> allocate(std::size_t, MemoryKind) noexcept { return {}; }
};
static_assert(!Backend<NoName>);
struct NameNotString : Good {
    int name() const noexcept { return 0; }
};
static_assert(!Backend<NameNotString>);

struct NotMovable : Good {
    NotMovable() = default;
    NotMovable(NotMovable&&) = delete;
};
static_assert(!Backend<NotMovable>);

// --- The declaration itself.

struct AbilitiesUnsigned : Good {
    static constexpr unsigned abilities = 1;
};
static_assert(!Backend<AbilitiesUnsigned>);
struct AbilitiesNonStatic : Good {
    BackendAbilities abilities = BackendAbility::none;
};
static_assert(!Backend<AbilitiesNonStatic>);
BackendAbilities no_abilities() noexcept { return BackendAbility::none; }  // not constexpr
struct AbilitiesNotConstant : Good {
    static inline const BackendAbilities abilities = no_abilities();  // not a constant expression
};
static_assert(!Backend<AbilitiesNotConstant>);

// --- BackendAbility::events declared, one member wrong or missing.

template <class Base>
struct DeclaresEvents : Base {
    static constexpr BackendAbilities abilities = BackendAbility::events;
};
struct EventsComplete {
    static bool event_complete(const Event&) noexcept { return true; }
};
struct EventsWait {
    static void wait_for(const Event*, std::size_t) noexcept {}
};

struct EventsNoEventType : Good, EventsComplete, EventsWait {};
static_assert(!Backend<DeclaresEvents<EventsNoEventType>>);

struct NoCopy {
    NoCopy() = default;
    NoCopy(const NoCopy&) = delete;
};
struct EventsNotCopyable : Good {
    using event_type = NoCopy;
    static bool event_complete(const NoCopy&) noexcept { return true; }
    static void wait_for(const NoCopy*, std::size_t) noexcept {}
};
static_assert(!Backend<DeclaresEvents<EventsNotCopyable>>);

struct EventsNoComplete : Good, EventsWait {
    using event_type = Event;
};
static_assert(!Backend<DeclaresEvents<EventsNoComplete>>);

struct EventsCompleteThrows : Good, EventsWait {  // the case that used to fall back to no events silently
    using event_type = Event;
    static bool event_complete(const Event&) { return true; }
};
static_assert(!Backend<DeclaresEvents<EventsCompleteThrows>>);

struct EventsCompleteWrongType : Good, EventsWait {
    using event_type = Event;
    static int event_complete(const Event&) noexcept { return 1; }
};
static_assert(!Backend<DeclaresEvents<EventsCompleteWrongType>>);

struct EventsCompleteNotStatic : Good, EventsWait {
    using event_type = Event;
    bool event_complete(const Event&) const noexcept { return true; }
};
static_assert(!Backend<DeclaresEvents<EventsCompleteNotStatic>>);

struct EventsNoWait : Good, EventsComplete {
    using event_type = Event;
};
static_assert(!Backend<DeclaresEvents<EventsNoWait>>);

struct EventsWaitThrows : Good, EventsComplete {
    using event_type = Event;
    static void wait_for(const Event*, std::size_t) {}
};
static_assert(!Backend<DeclaresEvents<EventsWaitThrows>>);

struct EventsAllRight : Good, EventsComplete, EventsWait {
    using event_type = Event;
};
static_assert(Backend<DeclaresEvents<EventsAllRight>>);  // the control

// --- BackendAbility::abandon declared, its member wrong or missing.

template <class Base>
struct DeclaresAbandon : Base {
    static constexpr BackendAbilities abilities = BackendAbility::abandon;
};
static_assert(!Backend<DeclaresAbandon<Good>>);
struct AbandonThrows : Good {
    void abandon() {}
};
static_assert(!Backend<DeclaresAbandon<AbandonThrows>>);
struct AbandonWrongType : Good {
    bool abandon() noexcept { return true; }
};
static_assert(!Backend<DeclaresAbandon<AbandonWrongType>>);
struct AbandonRight : Good {
    void abandon() noexcept {}
};
static_assert(Backend<DeclaresAbandon<AbandonRight>>);  // the control

// --- BackendAbility::free_waits_for_events: needs events, and events' members.

struct FreeWaitsWithoutEvents : EventsAllRight {
    static constexpr BackendAbilities abilities = BackendAbility::free_waits_for_events;
};
static_assert(!Backend<FreeWaitsWithoutEvents>);
struct FreeWaitsNoWait : EventsNoWait {
    static constexpr BackendAbilities abilities = BackendAbility::events | BackendAbility::free_waits_for_events;
};
static_assert(!Backend<FreeWaitsNoWait>);
struct FreeWaitsRight : EventsAllRight {
    static constexpr BackendAbilities abilities = BackendAbility::events | BackendAbility::free_waits_for_events;
};
static_assert(Backend<FreeWaitsRight> && backend_traits<FreeWaitsRight>::free_waits_for_events);  // the control

// --- A member an ability names, the ability not declared.

static_assert(!Backend<EventsAllRight>);
static_assert(!Backend<EventsNoWait>);  // event_type and event_complete
struct OnlyEventType : Good {
    using event_type = Event;
};
static_assert(!Backend<OnlyEventType>);
struct OnlyComplete : Good, EventsComplete {};
static_assert(!Backend<OnlyComplete>);
struct OnlyWait : Good, EventsWait {};
static_assert(!Backend<OnlyWait>);
static_assert(!Backend<AbandonRight>);
static_assert(!Backend<AbandonThrows>);
// A free_waits_for_events bool member is refused, whether or not the ability is also declared.
struct OldFreeWaitsFlag : EventsAllRight {
    static constexpr BackendAbilities abilities = BackendAbility::events;
    static constexpr bool free_waits_for_events = true;
};
static_assert(!Backend<OldFreeWaitsFlag>);
struct MisspeltFreeWaits : FreeWaitsRight {
    static constexpr bool free_waits_for_events = true;
};
static_assert(!Backend<MisspeltFreeWaits>);

// --- backend_traits calls only what is declared.

struct Counting : Good {
    static constexpr BackendAbilities abilities = BackendAbility::abandon;
    int abandoned = 0;
    void abandon() noexcept { ++abandoned; }
};
static_assert(Backend<Counting>);

}  // namespace

TEST_CASE("backend_traits: neutral calls without an ability, the backend's with it") {
    using none = backend_traits<Good>;
    CHECK(none::event_complete(detail::no_event{}));
    none::wait_for(nullptr, 0);
    Good g;
    none::abandon(g);

    Counting c;
    backend_traits<Counting>::abandon(c);
    CHECK(c.abandoned == 1);

    using ev = backend_traits<example::MallocBackend>;
    auto done = std::make_shared<std::atomic<bool>>(false);
    const example::Event e{done};
    CHECK_FALSE(ev::event_complete(e));
    done->store(true);
    CHECK(ev::event_complete(e));
    ev::wait_for(&e, 1);
}

TEST_CASE("docs/BACKENDS.md's minimal backend: release_after holds the buffer until its event completes") {
    const PoolStats s = example::release_after_example();
    CHECK(s.misses == 2);
    CHECK(s.hits == 1);
}
