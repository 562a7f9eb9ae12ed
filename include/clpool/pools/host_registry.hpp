// Process-wide host-memory pools, the host backend's counterpart of get_buffer_pool(queue).
#pragma once

#include <clpool/pools/aliases.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/diagnostics/snapshot.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/runtime/registry_list.hpp>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace clpool {

namespace detail {

// One pool of type PoolT for the process, made on first use and never
// destroyed. A fork child gets its own (the parent's is left alone there).
// Enrolled in the registry list when first made, so shutdown() trims it.
template <class PoolT>
class host_pool_slot {
public:
    static PoolT& get() {
        if (shut_down())
            throw usage_error(
                "clpool: get_host_*_pool called after clpool::shutdown(); no pool accepts work "
                "once shutdown() has run");
        entry* e = current().load(std::memory_order_acquire);
        const auto gen = fork_generation();
        if (e && e->generation == gen) return e->pool;
        auto* fresh = new entry{gen, PoolT(HostBackend{})};  // intentionally never deleted
        if (current().compare_exchange_strong(e, fresh, std::memory_order_acq_rel)) {
            enroll_registry(node_);
            return fresh->pool;
        }
        delete fresh;
        return e->pool;
    }

    // Appends the pool's snapshot, named `alias`, if it was made (process_snapshot.hpp).
    static void snapshot_into(std::vector<PoolSnapshot>& out, const char* alias) {
        entry* e = current().load(std::memory_order_acquire);
        if (!e || e->generation != fork_generation()) return;
        out.push_back(e->pool.snapshot());
        out.back().pool = std::string(alias) + ":" + out.back().pool;
    }

    // Gives the cache back (shutdown()); 0 if the pool was never made.
    static std::size_t trim() noexcept {
        entry* e = current().load(std::memory_order_acquire);
        return e && e->generation == fork_generation() ? e->pool.trim() : 0;
    }

private:
    struct entry {
        std::uint32_t generation;
        PoolT pool;
    };
    static std::atomic<entry*>& current() noexcept {
        static std::atomic<entry*> e{nullptr};
        return e;
    }
    constinit static inline registry_node node_{&trim, nullptr};  // no per-context pools to drop
};

}  // namespace detail

// The process-wide host pools (aligned host memory), made on first use. What
// a DeviceHandle of the host backend hands out. Thread-safe; the same object
// on every call in one process (a fork child gets its own). Throws
// usage_error after shutdown().
inline host::BufferPool& get_host_buffer_pool() { return detail::host_pool_slot<host::BufferPool>::get(); }
inline host::PinnedBufferPool& get_host_pinned_pool() { return detail::host_pool_slot<host::PinnedBufferPool>::get(); }
inline host::PersistentBufferPool& get_host_persistent_pool() {
    return detail::host_pool_slot<host::PersistentBufferPool>::get();
}

}  // namespace clpool
