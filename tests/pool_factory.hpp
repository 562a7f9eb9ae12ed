// Making a pool of any tested type, and telling two buffers apart, for every backend.
#pragma once

#include "mock_backend.hpp"
#include "pool_io.hpp"

#include <clpool/clpool.hpp>

#include <cstdint>
#include <memory>

namespace clpool::test {

// Mock-backed pools for each lock policy and bucket scheme.
template <class Buckets, class Flags, class Limits, class Locks>
using MockPool = Pool<Buckets, Flags, Limits, Locks, MockBackend, Diagnostics>;

// The limits a test pool gets unless a test gives its own: Capped takes its
// caps explicitly, so tests use the named pools' defaults (4 GiB, 16 per bucket).
template <class Limits>
Limits default_limits() {
    if constexpr (std::default_initializable<Limits>) return Limits{};
    else return Limits{std::size_t{4} << 30, Capped::default_per_bucket};
}

// Mock-backed pools whose blocks are carved from segments (SubAllocated).
template <class Buckets, class Flags, class Limits, class Locks>
using MockArenaPool = Pool<Buckets, Flags, Limits, Locks, SubAllocated<MockBackend>, Diagnostics>;

// Arena options at a test's scale: 64-byte granularity, 16 KiB small and 64 KiB large segments,
// and every empty segment kept until the driver runs out, so that a few allocations fill a
// segment and a device of a few segments runs out.
inline ArenaOptions small_arena_options() {
    ArenaOptions o;
    o.granularity = 64;
    o.small_limit = 4096;
    o.small_segment = 16384;
    o.large_segment = 65536;
    o.large_limit = 32768;
    o.large_round = 4096;
    o.min_segment = 65536;
    o.max_free_fraction = 1.0;
    o.release_before_new_peak = false;
    return o;
}

template <class B>
struct is_sub_allocated : std::false_type {};
template <class B>
struct is_sub_allocated<SubAllocated<B>> : std::true_type {};

// A fresh backend of type B for a test pool.
template <class B>
B make_backend() {
    if constexpr (is_sub_allocated<B>::value) {
        // Full-size segments from the start: the suites' short sequences then stay in one
        // segment, so a miss never empties the cache for a new one (which checks that count
        // cached buffers would see). The growth from min_segment is tested in test_sub_allocated.
        ArenaOptions o;
        o.min_segment = o.large_segment;
        return B(make_backend<typename B::parent_type>(), o);
    } else if constexpr (std::is_same_v<B, HostBackend>) {
        return HostBackend{};
#ifdef CLPOOL_HAS_OPENCL
    } else if constexpr (std::is_same_v<B, OpenCLBackend> || std::is_same_v<B, OpenCLOffsetBackend> ||
                         std::is_same_v<B, SVMBackend>) {
        return B(OpenCLEnv::get().context);
#endif
    } else {
        return MockBackend{};
    }
}

template <class P>
std::unique_ptr<P> make_pool(typename P::limit_policy limits = default_limits<typename P::limit_policy>()) {
    return std::make_unique<P>(make_backend<typename P::backend_type>(), limits);
}

inline const void* identity(const HostMemory& m) { return m.data(); }
inline const void* identity(const MockMemory& m) { return m.data(); }
inline const void* identity(const HostRange& m) { return m.data(); }
#ifdef CLPOOL_HAS_OPENCL
inline const void* identity(const cl::Buffer& b) { return b(); }
inline const void* identity(const SVMSpan& m) { return m.get(); }
// Not a pointer to the block: a value that two blocks held at once never share. The
// segment's handle plus the offset would not do: handles lie a few hundred bytes apart, so one
// segment's handle plus an offset can equal another's plus a smaller one. Offsets stay below
// 4 GiB in the tests, so the handle's low 32 bits above the offset's keep the pair apart.
inline const void* identity(const Carved<OpenCLOffsetBackend>& m) {
    const auto handle = reinterpret_cast<std::uintptr_t>(m.segment()());
    return reinterpret_cast<const void*>((handle << 32) + m.offset());
}
#endif

}  // namespace clpool::test
