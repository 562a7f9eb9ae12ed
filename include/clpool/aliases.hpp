// The three named pools, over any backend: Basic*Pool<Backend>, and host:: aliases.
#pragma once

#include <clpool/pool.hpp>
#include <clpool/backends/host.hpp>

namespace clpool {

// General-purpose device memory: power-of-two buckets, keep everything, one mutex.
template <Backend B>
using BasicBufferPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, B>;

// Pinned host staging memory: as BasicBufferPool, but host-pinned.
template <Backend B>
using BasicPinnedBufferPool = Pool<PowerOfTwoBuckets, HostPinned, Unlimited, SingleMutex, B>;

// Long-running jobs: the fixed bucket set, integrated-aware flags, byte and
// per-bucket caps (CLPOOL_MAX_CACHED_GB, 16 per bucket), one mutex.
template <Backend B>
using BasicPersistentBufferPool = Pool<FixedSetBuckets, IntegratedAware, Capped, SingleMutex, B>;

// The same pools on aligned host memory, for machines with no OpenCL device.
namespace host {
using BufferPool = BasicBufferPool<HostBackend>;
using PinnedBufferPool = BasicPinnedBufferPool<HostBackend>;
using PersistentBufferPool = BasicPersistentBufferPool<HostBackend>;
}  // namespace host

}  // namespace clpool
