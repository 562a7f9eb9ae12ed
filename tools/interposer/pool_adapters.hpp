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

// The pool's own answer to the driver's out-of-memory (Pool::create: trim,
// then allocate once more) runs under the core's lock, from the failure to
// the retry: the tombstones of the buckets the trim frees go with them, before
// another thread can put a new tombstone in that pool (which must stay: it
// carries its buffer's reuse fence) or get a new object at a freed address.
// Defined in state.cpp.
void oom_trim_begins() noexcept;         // takes State::mu for this thread
bool oom_trim_pending() noexcept;        // this thread holds it from oom_trim_begins
void oom_trim_ends(const void* pool) noexcept;  // drops the pool's tombstones, releases State::mu

// The bucket this thread's last driver allocation made: a bucket taken from a
// pool is new only if it is this one (else it had an owner, and a tombstone).
inline thread_local cl_mem tl_made = nullptr;

// OpenCLBackend, bracketing the pool's trim-and-retry as above.
struct WatchedBackend : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    const void* pool = nullptr;  // the pool it serves (set once the pool exists)
    Allocation<cl::Buffer> allocate(std::size_t n, MemoryKind kind) noexcept {
        const bool retry = oom_trim_pending();
        if (retry) oom_trim_ends(pool);  // the trim is done; the retry itself runs unlocked
        auto a = OpenCLBackend::allocate(n, kind);
        // A first failure is always followed by trim() and one more allocate (pool.hpp).
        if (a.status == AllocStatus::out_of_memory && !retry) oom_trim_begins();
        if (a.status == AllocStatus::ok) tl_made = a.memory();
        return a;
    }
};
static_assert(Backend<WatchedBackend>);

// Diagnostics: CLPOOL_SNAPSHOT writes each pool's snapshot (snapshot_writer.cpp), as the named pools have them.
using PoolT = Pool<PowerOfTwoBuckets, DeviceLocal, RecordingCapped, SingleMutex, WatchedBackend, Diagnostics>;

// The pool behind clSVMAlloc per (context, access flags): SVMPool's whole allocations in power-of-two
// buckets, capped as the buffer pools are. The core keeps no record of a cached allocation (OpenCL
// counts no references to an SVM pointer), so the pool's own trim and cap need no adapter.
using SVMPoolT = Pool<PowerOfTwoBuckets, DeviceLocal, EnvironmentCapped, SingleMutex, SVMBackend, Diagnostics>;

}  // namespace clpool::interpose
