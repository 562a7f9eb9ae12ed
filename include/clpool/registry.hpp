// Per-context pools, created on first use: get_buffer_pool(queue) and friends.
#pragma once

#include <clpool/opencl.hpp>

#include <map>
#include <memory>
#include <mutex>

namespace clpool {

namespace detail {

// One set of pools per cl_context. Lives for the whole process and is never
// destroyed, so no OpenCL call runs from a static destructor at exit.
template <class PoolT>
class context_registry {
public:
    static context_registry& instance() {
        static auto* r = new context_registry;  // intentionally never deleted
        return *r;
    }

    PoolT& get(const cl::CommandQueue& queue) {
        cl_context ctx = nullptr;
        opencl::check(clGetCommandQueueInfo(queue(), CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr),
                      "clGetCommandQueueInfo");
        std::lock_guard lock(mutex_);
        auto& slot = pools_[ctx];
        if (!slot) slot = std::make_unique<PoolT>(OpenCLBackend(queue));
        return *slot;
    }

    // Destroys the context's pool (its cache goes back to the driver). Handles
    // still out free their buffers on release. Returns whether one existed.
    bool drop(cl_context ctx) {
        std::unique_ptr<PoolT> doomed;
        {
            std::lock_guard lock(mutex_);
            auto it = pools_.find(ctx);
            if (it == pools_.end()) return false;
            doomed = std::move(it->second);
            pools_.erase(it);
        }
        return true;
    }

private:
    std::mutex mutex_;
    std::map<cl_context, std::unique_ptr<PoolT>> pools_;
};

}  // namespace detail

// The process-wide pool for the queue's context, created on first use
// (committing on the queue's device). Thread-safe; the same object for every
// queue of one context. Throws driver_error if the queue cannot be queried.
inline BufferPool& get_buffer_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<BufferPool>::instance().get(queue);
}
inline PinnedBufferPool& get_pinned_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<PinnedBufferPool>::instance().get(queue);
}
inline PersistentBufferPool& get_persistent_pool(const cl::CommandQueue& queue) {
    return detail::context_registry<PersistentBufferPool>::instance().get(queue);
}

// Drops every per-context pool of `context` (call before releasing a context
// for good, or its pools keep it alive). References from get_*_pool for that
// context dangle afterwards.
inline void release_pools(const cl::Context& context) {
    detail::context_registry<BufferPool>::instance().drop(context());
    detail::context_registry<PinnedBufferPool>::instance().drop(context());
    detail::context_registry<PersistentBufferPool>::instance().drop(context());
}

}  // namespace clpool
