// The three named pools, over any backend: Basic*Pool<Backend>, and host:: aliases; each with Diagnostics (history, snapshots, out-of-memory reports).
#pragma once

#include <clpool/backends/host.hpp>
#include <clpool/backends/sub_allocated.hpp>
#include <clpool/core/pool.hpp>
#include <clpool/diagnostics/diagnostics.hpp>
#include <clpool/policies/arena_buckets.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#include <clpool/runtime/config.hpp>

namespace clpool {

// Capped with the environment's caps: CLPOOL_MAX_CACHED_GB (4 GiB if unset)
// and 16 buffers per bucket. Throws config_error if the variable is invalid.
struct EnvironmentCapped : Capped {
    EnvironmentCapped() : Capped(static_cast<std::size_t>(config::max_cached_bytes()), default_per_bucket) {}
};
static_assert(LimitPolicy<EnvironmentCapped>);

// General-purpose device memory: power-of-two buckets, keep everything, one mutex.
template <CheckedBackend B>
using BasicBufferPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, B, Diagnostics>;

// Pinned host staging memory: as BasicBufferPool, but host-pinned.
template <CheckedBackend B>
using BasicPinnedBufferPool = Pool<PowerOfTwoBuckets, HostPinned, Unlimited, SingleMutex, B, Diagnostics>;

// Long-running jobs: the fixed bucket set, integrated-aware flags, byte and
// per-bucket caps (CLPOOL_MAX_CACHED_GB, 16 per bucket), one mutex.
template <CheckedBackend B>
using BasicPersistentBufferPool =
    Pool<FixedSetBuckets, IntegratedAware, EnvironmentCapped, SingleMutex, B, Diagnostics>;

// Low-waste device memory: blocks carved from segments of B (SubAllocated,
// docs/ARENA.md), fine size classes, keep everything, one mutex. The pool
// gives its cache back to the segments before it grows them, so what it holds
// stays close to what is live.
template <SegmentBackend B>
using BasicArenaPool = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<B>, Diagnostics>;

// The same, for pinned host staging memory carved from a few pinned segments.
template <SegmentBackend B>
using BasicPinnedArenaPool = Pool<ArenaBuckets, HostPinned, Unlimited, SingleMutex, SubAllocated<B>, Diagnostics>;

// The same pools on aligned host memory, for machines with no OpenCL device.
namespace host {
using BufferPool = BasicBufferPool<HostBackend>;
using PinnedBufferPool = BasicPinnedBufferPool<HostBackend>;
using PersistentBufferPool = BasicPersistentBufferPool<HostBackend>;
using ArenaPool = BasicArenaPool<HostBackend>;
using PinnedArenaPool = BasicPinnedArenaPool<HostBackend>;
}  // namespace host

}  // namespace clpool
