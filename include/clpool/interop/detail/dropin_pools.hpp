// The drop-in buffer's pools: one per (context, flags), for a bounded number of contexts, handing out sub-buffers.
#pragma once

#include <clpool/platform/fork_locks.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/interop/detail/poolable.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace clpool::detail {

// Keep everything: a buffer comes back from a driver callback, where a cap's
// eviction (a clReleaseMemObject) has no business running.
using dropin_pool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, OpenCLBackend>;

// What the application gets is a sub-buffer (origin 0, the size it asked
// for) of a pooled bucket. The bucket goes back to its pool from the
// sub-buffer's destructor callback: the driver runs it once every reference
// (the application's copies) is gone. CL_MEM_SIZE is the asked size.
//
// A pool holds its context (through its backend, queue and buffers), and the
// drop-in cannot see the application release a context. So the pools of
// max_contexts contexts are kept: a new context's first buffer lets go of the
// pools of the least recently used one that has no buffer out, freeing its
// cache and, if the application released it, the context. A program that
// makes contexts one after another holds max_contexts of them, not every one
// it made; more only while more than max_contexts have buffers out.
class dropin_pools {
public:
    // Contexts whose pools are kept; each past it lets go of the least recently used idle one's.
    static constexpr std::size_t max_contexts = 16;

    // The process-wide set. Never destroyed: no OpenCL call at exit.
    static dropin_pools& instance() {
        static auto* p = new dropin_pools;
        return *p;
    }
    // Taken around fork(): a child never starts with it held (its pools are
    // the parent's and refuse work there, but find() and create() must answer).
    dropin_pools() noexcept { fork_locks::add_mutex(fork_rank::dropin_pools, mutex_); }

    // A pooled buffer of `size` bytes, with one reference for the caller;
    // nullptr when the pool cannot serve the call (the caller asks the driver
    // instead). Never throws. Cost: a hit is a pool pop and a clCreateSubBuffer.
    // Calls the pool cannot serve unseen (poolable.hpp) get nullptr too, and so
    // does CL_MEM_COPY_HOST_PTR: its data would be written on a queue of the
    // pool's, which nothing orders after the commands a cached bucket's last
    // owner may still have queued on the application's queue.
    cl_mem create(cl_context ctx, cl_mem_flags flags, std::size_t size, void* host_ptr) noexcept {
        if (!poolable(flags, size, host_ptr) || (flags & CL_MEM_COPY_HOST_PTR) != 0) return nullptr;
        try {
            const std::shared_ptr<dropin_pool> pool = slot(ctx, flags);
            auto held = std::make_unique<dropin_pool::handle>(pool->allocate(size));
            const cl_buffer_region region{0, size};
            cl_int err = CL_SUCCESS;
            cl_mem sub = clCreateSubBuffer(held->buffer()(), 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
            if (!sub) return nullptr;
            if (clSetMemObjectDestructorCallback(sub, &give_back, held.get()) != CL_SUCCESS) {
                clReleaseMemObject(sub);
                return nullptr;
            }
            [[maybe_unused]] auto* owned_by_callback = held.release();
            return sub;
        } catch (...) {
            return nullptr;
        }
    }

    // The pool for (ctx, flags), or nullptr if none is kept (none made yet, or
    // let go). Shared: the pool lives while the caller uses it. Thread-safe.
    std::shared_ptr<dropin_pool> find(cl_context ctx, cl_mem_flags flags) {
        std::lock_guard lock(mutex_);
        auto c = contexts_.find(ctx);
        if (c == contexts_.end()) return nullptr;
        auto p = c->second.pools.find(flags);
        return p == c->second.pools.end() ? nullptr : p->second;
    }

    // How many contexts' pools are kept (max_contexts, unless more have buffers out). Thread-safe.
    std::size_t contexts_held() {
        std::lock_guard lock(mutex_);
        return contexts_.size();
    }

private:
    struct per_context {
        cl::Context context;
        cl_device_id device = nullptr;
        std::uint32_t generation = 0;  // a fork parent's context is never released in the child
        std::uint64_t used = 0;  // when a buffer was last asked for in it (uses_)
        // Shared: a create() under way keeps its pool while the context is let go.
        std::map<cl_mem_flags, std::shared_ptr<dropin_pool>> pools;

        per_context() = default;
        per_context(per_context&&) noexcept = default;
        per_context& operator=(per_context&&) noexcept = default;
        ~per_context() {
            pools.clear();  // before the context: their buffers and queues are in it
            if (context() && !may_free(generation)) {
                // A fork parent's, or the process is exiting: leak the reference, no driver call.
                [[maybe_unused]] auto* leaked = new (std::nothrow) cl::Context(std::move(context));
            }
        }
    };

    static void CL_CALLBACK give_back(cl_mem, void* held) noexcept {
        delete static_cast<dropin_pool::handle*>(held);  // the bucket goes back to its pool
    }

    std::shared_ptr<dropin_pool> slot(cl_context ctx, cl_mem_flags key) {
        std::vector<per_context> gone;  // freed after the lock: destroying a pool calls the driver
        std::lock_guard lock(mutex_);
        auto& c = contexts_[ctx];
        if (!c.device) {
            c.context = cl::Context(ctx, true);
            c.device = opencl::context_devices(ctx)[0];
            c.generation = birth_generation();
            while (contexts_.size() > max_contexts && let_go_of_oldest(ctx, gone)) {}
        }
        c.used = ++uses_;
        auto& p = c.pools[key];
        if (!p) p = std::make_shared<dropin_pool>(OpenCLBackend(c.context, c.device, key));
        return p;
    }

    // Moves the least recently used idle context but `keep` out of the set,
    // into `gone`. Under mutex_. Only one of this process's (a fork parent's
    // holds handles the child must not release), and only one whose pools
    // nobody else holds (a create() or dropin_stats() under way: their copies
    // are made under mutex_) and have no bucket out: a bucket out would go
    // back to its destroyed pool from a driver callback, and be freed there,
    // a clReleaseMemObject inside the driver's callback. False if none is.
    bool let_go_of_oldest(cl_context keep, std::vector<per_context>& gone) {
        auto oldest = contexts_.end();
        for (auto it = contexts_.begin(); it != contexts_.end(); ++it)
            if (it->first != keep && may_free(it->second.generation) &&
                (oldest == contexts_.end() || it->second.used < oldest->second.used) && idle(it->second))
                oldest = it;
        if (oldest == contexts_.end()) return false;
        gone.push_back(std::move(oldest->second));
        contexts_.erase(oldest);
        return true;
    }

    static bool idle(const per_context& c) noexcept {
        try {
            for (const auto& [flags, pool] : c.pools)
                if (pool.use_count() != 1 || pool->stats().bytes_in_use != 0) return false;
            return true;
        } catch (...) {  // stats() out of host memory: not known to be idle
            return false;
        }
    }

    std::mutex mutex_;
    std::map<cl_context, per_context> contexts_;
    std::uint64_t uses_ = 0;  // a logical clock for per_context::used
};

}  // namespace clpool::detail
