// The pool behind each (context, flags): clpool's Pool with two adapters that tell the core what happened.
#pragma once

#include <clpool/pools/opencl_pools.hpp>

#include <cstddef>

namespace clpool::interpose {

// EnvironmentCapped (CLPOOL_MAX_CACHED_GB, 16 per bucket), but telling the core whether
// its last answer kept the buffer: a bucket the cap sends back to the driver
// must take its tombstone with it.
inline thread_local bool tl_admitted = false;
struct RecordingCapped : EnvironmentCapped {
    bool admit(std::size_t bucket_bytes, std::size_t cached_total, std::size_t in_bucket) const noexcept {
        tl_admitted = Capped::admit(bucket_bytes, cached_total, in_bucket);
        return tl_admitted;
    }
};
static_assert(LimitPolicy<RecordingCapped>);

// OpenCLBackend, telling the core when the driver ran out of memory: the pool
// then trims itself before retrying, and the tombstones of the buckets it
// gave back must go.
inline thread_local bool tl_driver_oom = false;
struct WatchedBackend : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    Allocation<cl::Buffer> allocate(std::size_t n, MemoryKind kind) noexcept {
        auto a = OpenCLBackend::allocate(n, kind);
        if (a.status == AllocStatus::out_of_memory) tl_driver_oom = true;
        return a;
    }
};
static_assert(Backend<WatchedBackend>);

using PoolT = Pool<PowerOfTwoBuckets, DeviceLocal, RecordingCapped, SingleMutex, WatchedBackend>;

}  // namespace clpool::interpose
