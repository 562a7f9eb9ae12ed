// PinnedAllocator<T>: a standard allocator whose memory is mapped pinned buffers from a PinnedBufferPool.
#pragma once

#include <clpool/errors.hpp>
#include <clpool/opencl.hpp>
#include <clpool/registry.hpp>
#include <clpool/detail/mapping.hpp>
#include <clpool/detail/pinned_ranges.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace clpool {

namespace detail {

// What copies of one PinnedAllocator share: the pool, a private queue for
// map/unmap, and the handles behind the pointers handed out.
class pinned_arena {
public:
    explicit pinned_arena(PinnedBufferPool& pool)
        : pool_(&pool), side_(side_queue(pool.backend().context(), pool.backend().device())) {}
    pinned_arena(const pinned_arena&) = delete;
    pinned_arena& operator=(const pinned_arena&) = delete;
    // Containers hold an allocator copy, so this runs after they freed
    // everything; anything left (a leak by the user) is handed back anyway.
    ~pinned_arena() {
        for (auto& [p, h] : live_) unmap_and_release(p, h);
    }

    void* allocate(std::size_t bytes, std::size_t align) {
        auto h = pool_->allocate(bytes);
        const std::size_t mapped = bytes == 0 ? 1 : bytes;  // a zero-byte map is invalid
        void* p = map_pinned(side_, h.buffer(), mapped);
        if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
            unmap_and_release(p, h);
            throw std::bad_alloc();  // the driver's mapping is less aligned than T needs
        }
        try {
            std::lock_guard lock(mutex_);
            live_.reserve(live_.size() + 1);  // so emplace cannot fail after moving h in
            pinned_ranges::instance().add(p, mapped);
            live_.emplace(p, std::move(h));
        } catch (...) {
            pinned_ranges::instance().remove(p);
            unmap_and_release(p, h);
            throw;
        }
        return p;
    }

    void deallocate(void* p) noexcept {
        PinnedBufferPool::handle h;
        {
            std::lock_guard lock(mutex_);
            auto it = live_.find(p);
            if (it == live_.end()) return;  // not ours: ignore rather than corrupt
            h = std::move(it->second);
            live_.erase(it);
        }
        pinned_ranges::instance().remove(p);
        unmap_and_release(p, h);
    }

    PinnedBufferPool& pool() const noexcept { return *pool_; }

private:
    // The pool reuses the buffer only once the unmap has run.
    void unmap_and_release(void* p, PinnedBufferPool::handle& h) noexcept {
        const cl::Event unmapped = unmap_after(side_, h.buffer(), p, nullptr);
        clFlush(side_());
        h.release_after(&unmapped, 1);
    }

    PinnedBufferPool* pool_;
    cl::CommandQueue side_;
    std::mutex mutex_;
    std::unordered_map<void*, PinnedBufferPool::handle> live_;
};

}  // namespace detail

// std::vector<T, clpool::PinnedAllocator<T>> v(n, PinnedAllocator<T>(queue));
//
// Memory comes from a PinnedBufferPool (get_pinned_pool(queue), or one passed
// in): each allocate takes one pooled CL_MEM_ALLOC_HOST_PTR buffer and maps
// it; on NVIDIA that mapping is the pinned memory itself, so upload/download
// and clEnqueueWrite/ReadBuffer from it run at full DMA speed, and upload/
// download recognise it and skip staging.
//
// Lifetime of the mapped pointer: valid from allocate until deallocate of that
// pointer (the buffer stays mapped the whole time). deallocate unmaps it and
// returns the buffer to the pool, which reuses it once the unmap ran; a
// non-blocking copy still reading or writing the memory at that point is the
// caller's bug, as with any host memory (wait for the copy's event before the
// container shrinks, reallocates or dies). The pool must outlive the memory
// (get_pinned_pool's pools do, unless release_pools is called).
//
// Copies share one arena (state); allocators compare equal when they share it.
// A default-constructed allocator has none and throws usage_error on allocate.
// allocate throws std::bad_array_new_length (n * sizeof(T) overflows), the
// pool's size_error/out_of_memory, driver_error, or std::bad_alloc (mapping
// less aligned than T). deallocate never throws. Thread-safe.
// Cost: a pool hit plus a blocking map on a private queue (~40 us on PoCL).
template <class T>
class PinnedAllocator {
public:
    using value_type = T;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    using is_always_equal = std::false_type;

    PinnedAllocator() noexcept = default;
    explicit PinnedAllocator(const cl::CommandQueue& queue) : PinnedAllocator(get_pinned_pool(queue)) {}
    explicit PinnedAllocator(PinnedBufferPool& pool) : arena_(std::make_shared<detail::pinned_arena>(pool)) {}
    template <class U>
    PinnedAllocator(const PinnedAllocator<U>& other) noexcept : arena_(other.arena_) {}

    T* allocate(std::size_t n) {
        if (!arena_) throw usage_error("clpool: PinnedAllocator was default-constructed; construct it from a queue or a PinnedBufferPool");
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept {
        if (arena_ && p) arena_->deallocate(p);
    }

    // The pool memory comes from; throws usage_error for a default-constructed allocator.
    PinnedBufferPool& pool() const {
        if (!arena_) throw usage_error("clpool: PinnedAllocator was default-constructed and has no pool");
        return arena_->pool();
    }

    template <class U>
    bool operator==(const PinnedAllocator<U>& other) const noexcept {
        return arena_ == other.arena_;
    }

private:
    template <class U>
    friend class PinnedAllocator;
    std::shared_ptr<detail::pinned_arena> arena_;
};

// A std::vector of pinned memory, for brevity.
template <class T>
using pinned_vector = std::vector<T, PinnedAllocator<T>>;

}  // namespace clpool
