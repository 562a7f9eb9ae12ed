// The drop-in buffer's pools: one per (context, flags), never destroyed, handing out sub-buffers.
#pragma once

#include <clpool/platform/fork_locks.hpp>
#include <clpool/interop/detail/poolable.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace clpool::detail {

// Keep everything: a buffer comes back from a driver callback, where a cap's
// eviction (a clReleaseMemObject) has no business running.
using dropin_pool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, OpenCLBackend>;

// What the application gets is a sub-buffer (origin 0, the size it asked
// for) of a pooled bucket. The bucket goes back to its pool from the
// sub-buffer's destructor callback: the driver runs it once every reference
// (the application's copies) is gone. CL_MEM_SIZE is the asked size.
class dropin_pools {
public:
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
            dropin_pool* pool = slot(ctx, flags);
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

    // The pool for (ctx, flags), or nullptr if none was made yet. Thread-safe.
    dropin_pool* find(cl_context ctx, cl_mem_flags flags) {
        std::lock_guard lock(mutex_);
        auto c = contexts_.find(ctx);
        if (c == contexts_.end()) return nullptr;
        auto p = c->second.pools.find(flags);
        return p == c->second.pools.end() ? nullptr : p->second.get();
    }

private:
    struct per_context {
        cl::Context context;
        cl_device_id device = nullptr;
        std::map<cl_mem_flags, std::unique_ptr<dropin_pool>> pools;
    };

    static void CL_CALLBACK give_back(cl_mem, void* held) noexcept {
        delete static_cast<dropin_pool::handle*>(held);  // the bucket goes back to its pool
    }

    dropin_pool* slot(cl_context ctx, cl_mem_flags key) {
        std::lock_guard lock(mutex_);
        auto& c = contexts_[ctx];
        if (!c.device) {
            c.context = cl::Context(ctx, true);
            c.device = opencl::context_devices(ctx)[0];
        }
        auto& p = c.pools[key];
        if (!p) p = std::make_unique<dropin_pool>(OpenCLBackend(c.context, c.device, key));
        return p.get();
    }

    std::mutex mutex_;
    std::map<cl_context, per_context> contexts_;
};

}  // namespace clpool::detail
