// Per-(context, device) pools, created on first use: get_buffer_pool(queue) and friends.
#pragma once

#include <clpool/pools/opencl_pools.hpp>
#include <clpool/diagnostics/snapshot.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/runtime/queue_registry.hpp>
#include <clpool/runtime/registry_list.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace clpool {

namespace detail {

// One pool per (cl_context, cl_device_id): a context over several devices
// gets a pool per device, each committing its buffers on its own device. Lives for the whole process and is never
// destroyed, so no OpenCL call runs from a static destructor at exit. A fork
// child gets a fresh, empty registry; the parent's is leaked whole there
// (its pools hold the parent's OpenCL objects and must not be released).
// Enrolled in the registry list when first made, so shutdown() and
// release_pools() reach it without naming it.
template <class PoolT>
class context_registry {
public:
    static context_registry& instance() {
        context_registry* r = current().load(std::memory_order_acquire);
        const auto gen = fork_generation();
        if (r && r->generation_ == gen) return *r;
        auto* fresh = new context_registry(gen);  // intentionally never deleted
        if (current().compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) {
            enroll_registry(node_);
            return *fresh;
        }
        delete fresh;  // another thread made this process's registry first
        return *r;
    }

    // The registry of this process (fork generation) if one was made, without making one.
    static context_registry* existing() noexcept {
        context_registry* r = current().load(std::memory_order_acquire);
        return r && r->generation_ == fork_generation() ? r : nullptr;
    }

    PoolT& get(const cl::CommandQueue& queue) {
        if (shut_down())
            throw usage_error(
                "clpool: get_*_pool called after clpool::shutdown(); no pool accepts work once "
                "shutdown() has run");
        cl_context ctx = nullptr;
        opencl::check(clGetCommandQueueInfo(queue(), CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr),
                      "clGetCommandQueueInfo (CL_QUEUE_CONTEXT)");
        cl_device_id device = nullptr;
        opencl::check(clGetCommandQueueInfo(queue(), CL_QUEUE_DEVICE, sizeof device, &device, nullptr),
                      "clGetCommandQueueInfo (CL_QUEUE_DEVICE)");
        std::lock_guard lock(mutex_);
        auto it = pools_.find({ctx, device});
        // The pool is made before its slot: a constructor that throws
        // (driver_error, config_error) must leave no empty slot behind.
        if (it == pools_.end())
            it = pools_.emplace(std::pair{ctx, device}, std::make_unique<PoolT>(typename PoolT::backend_type(queue)))
                     .first;
        auto& slot = it->second;
        // The queue is finished at exit and by shutdown(). Asked every time,
        // never remembered here: the registry lets a queue go once the
        // application released it, and a new queue may then get its address.
        // A registration that found no host memory is tried again next time.
        queue_registry::instance().add(queue());
        return *slot;
    }

    // Gives every pool's cache back to the driver (shutdown()). Returns the
    // bytes given back. Never throws.
    std::size_t trim_all() noexcept {
        std::lock_guard lock(mutex_);
        std::size_t freed = 0;
        for (auto& [ctx, pool] : pools_) freed += pool->trim();
        return freed;
    }

    // Appends every pool's snapshot (process_snapshot.hpp), named `alias` and
    // its device, to `out`.
    void snapshot_into(std::vector<PoolSnapshot>& out, const char* alias) const {
        std::lock_guard lock(mutex_);
        for (const auto& [key, pool] : pools_) {
            out.push_back(pool->snapshot());
            char where[64];
            std::snprintf(where, sizeof where, " (context %p, device %p)", static_cast<void*>(key.first),
                          static_cast<void*>(key.second));
            out.back().pool = std::string(alias) + ":" + out.back().pool + where;
        }
    }

    // The number of pools made (one per context and device in use).
    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return pools_.size();
    }

    // Destroys the context's pools, one per device (their caches go back to
    // the driver). Handles still out free their buffers on release. Returns
    // whether any existed.
    bool drop(cl_context ctx) {
        // Destroyed after the lock is let go. Moved as map nodes: no
        // allocation, so nothing can throw with half the pools moved out.
        decltype(pools_) doomed;
        {
            std::lock_guard lock(mutex_);
            for (auto it = pools_.lower_bound({ctx, nullptr}); it != pools_.end() && it->first.first == ctx;)
                doomed.insert(pools_.extract(it++));
            if (doomed.empty()) return false;
        }
        return true;
    }

private:
    explicit context_registry(std::uint32_t gen) : generation_(gen) {}

    static std::atomic<context_registry*>& current() noexcept {
        static std::atomic<context_registry*> r{nullptr};  // trivially destructible
        return r;
    }

    // What the registry list calls: this generation's registry, if made.
    static std::size_t trim_existing() noexcept {
        auto* r = existing();
        return r ? r->trim_all() : 0;
    }
    static bool drop_existing(void* context) {
        auto* r = existing();
        return r && r->drop(static_cast<cl_context>(context));
    }
    constinit static inline registry_node node_{&trim_existing, &drop_existing};

    const std::uint32_t generation_;
    mutable std::mutex mutex_;
    // Ordered by context first, so drop() finds a context's pools side by side.
    std::map<std::pair<cl_context, cl_device_id>, std::unique_ptr<PoolT>> pools_;
};

}  // namespace detail

// The process-wide pool for the queue's context and device, created on first
// use, committing its buffers on that device. Thread-safe; the same object for
// every queue of one context on one device, and a different one per device of
// a context. Throws driver_error if the queue cannot be queried.
//
// The pool lives until release_pools(context) (or for the whole process): a
// reference is valid until then, and the pool keeps the context alive until
// then. Handles from it stay valid after release_pools and free their buffers
// when released.
inline BufferPool& get_buffer_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<BufferPool>::instance().get(queue);
}
inline PinnedBufferPool& get_pinned_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<PinnedBufferPool>::instance().get(queue);
}
inline PersistentBufferPool& get_persistent_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<PersistentBufferPool>::instance().get(queue);
}
// Pinned buffers kept mapped while pooled: the staging pool of upload/download.
inline MappedPinnedPool& get_mapped_pinned_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<MappedPinnedPool>::instance().get(queue);
}

// Drops every pool of `context`, on every device (call before releasing a
// context for good, or its pools keep it alive). References from get_*_pool
// for that context must not be used afterwards. Handles from those pools stay
// valid and may be released from any thread, also while this runs (each frees
// its buffer once its pool is gone); allocating from the pools must have stopped.
inline void release_pools(const cl::Context& context) {
    detail::drop_registries(context());  // every context_registry made in this process
    detail::queue_registry::instance().forget(context());  // its queues are not finished at exit any more
}

}  // namespace clpool
