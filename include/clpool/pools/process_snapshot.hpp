// snapshot_all(): one snapshot of every process-wide pool (the host pools and the per-(context, device) registry pools).
#pragma once

#include <clpool/core/has_opencl.hpp>
#include <clpool/diagnostics/snapshot.hpp>
#include <clpool/pools/aliases.hpp>
#include <clpool/pools/host_registry.hpp>
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>
#endif

namespace clpool {

// Every process-wide pool made so far in this process (fork generation): the
// host pools, then the registry pools per (context, device), each named
// "<alias>:<backend>" (and its context and device). Each pool's entry is
// consistent with its own stats (Pool::snapshot); pools are read one after
// another, not all at one instant. Pools the program made itself are not
// seen: snapshot them with Pool::snapshot. Throws bad_alloc only.
inline ProcessSnapshot snapshot_all() {
    ProcessSnapshot out;
    out.taken_ns = detail::steady_ns();
    detail::host_pool_slot<host::BufferPool>::snapshot_into(out.pools, "host::BufferPool");
    detail::host_pool_slot<host::PinnedBufferPool>::snapshot_into(out.pools, "host::PinnedBufferPool");
    detail::host_pool_slot<host::PersistentBufferPool>::snapshot_into(out.pools, "host::PersistentBufferPool");
#ifdef CLPOOL_HAS_OPENCL
    if (auto* r = detail::context_registry<BufferPool>::existing()) r->snapshot_into(out.pools, "BufferPool");
    if (auto* r = detail::context_registry<PinnedBufferPool>::existing())
        r->snapshot_into(out.pools, "PinnedBufferPool");
    if (auto* r = detail::context_registry<PersistentBufferPool>::existing())
        r->snapshot_into(out.pools, "PersistentBufferPool");
    if (auto* r = detail::context_registry<MappedPinnedPool>::existing())
        r->snapshot_into(out.pools, "MappedPinnedPool");
#endif
    return out;
}

}  // namespace clpool
