// PinnedAllocator<T>: a standard allocator whose memory is mapped pinned buffers from a MappedPinnedPool.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>

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

// What copies of one PinnedAllocator share: the pool and the handles behind
// the pointers handed out. The pool's buffers stay mapped while pooled
// (MappedPinnedBackend), so allocate is a pool hit and a map insert, with no
// map call, and the backend has already registered the range as pinned.
class pinned_arena {
public:
    explicit pinned_arena(MappedPinnedPool& pool) : pool_(&pool) {}
    pinned_arena(const pinned_arena&) = delete;
    pinned_arena& operator=(const pinned_arena&) = delete;
    // Containers hold an allocator copy, so this runs after they freed
    // everything; anything left (a leak by the user) goes back with live_.
    ~pinned_arena() = default;

    void* allocate(std::size_t bytes, std::size_t align) {
        auto h = pool_->allocate(bytes);
        void* p = h.buffer().host();
        const auto addr = reinterpret_cast<std::uintptr_t>(p);
        if (addr % align != 0) {  // the driver's mapping is less aligned than T needs (h goes back)
            const std::size_t had = addr & (~addr + 1);  // the largest power of two dividing addr
            throw size_error("clpool: PinnedAllocator cannot allocate " + std::to_string(bytes) + " bytes aligned to " +
                                 std::to_string(align) +
                                 ": the driver mapped the pinned buffer at an address aligned to " +
                                 std::to_string(had) + " bytes (limit " + std::to_string(had) + " bytes)",
                             align, had);
        }
        std::lock_guard lock(mutex_);
        live_.emplace(p, std::move(h));  // on a throw h is still ours and goes back
        return p;
    }

    void deallocate(void* p) noexcept {
        MappedPinnedPool::handle h;  // released after the lock
        std::lock_guard lock(mutex_);
        auto it = live_.find(p);
        if (it == live_.end()) return;  // not ours: ignore rather than corrupt
        h = std::move(it->second);
        live_.erase(it);
    }

    MappedPinnedPool& pool() const noexcept { return *pool_; }

private:
    MappedPinnedPool* pool_;
    std::mutex mutex_;
    std::unordered_map<void*, MappedPinnedPool::handle> live_;
};

}  // namespace detail

// std::vector<T, clpool::PinnedAllocator<T>> v(n, PinnedAllocator<T>(queue));
//
// Memory comes from a MappedPinnedPool (get_mapped_pinned_pool(queue), or one
// passed in): each allocate takes one pooled CL_MEM_ALLOC_HOST_PTR buffer,
// which the pool keeps mapped for as long as it holds it; that mapping is the
// pinned memory itself on discrete GPUs, so upload/download and
// clEnqueueWrite/ReadBuffer from it run at full DMA speed, and upload/download
// recognise it and skip staging.
//
// Lifetime of the mapped pointer: yours from allocate until deallocate of that
// pointer. deallocate returns the buffer to the pool at once, still mapped,
// and the pool may hand it (and that address) to its next user: a
// non-blocking copy still reading or writing the memory at that point is the
// caller's bug, as with any host memory (wait for the copy's event before the
// container shrinks, reallocates or dies). The mapping itself ends only when
// the pool frees the buffer (trim, or the pool's end); the address stays
// registered as pinned until then. The pool must outlive the memory
// (get_mapped_pinned_pool's pools do, unless release_pools is called).
//
// Copies share one arena (state); allocators compare equal when they share it.
// A move copies, so a moved-from allocator (and container) still allocates.
// A default-constructed allocator has none and throws usage_error on allocate.
// allocate throws std::bad_array_new_length (n * sizeof(T) overflows), the
// pool's size_error/out_of_memory, driver_error, or size_error when the
// mapping is less aligned than T (requested() is alignof(T), limit() the
// alignment the mapping had; PoCL's can be as little as 128). deallocate never
// throws. Thread-safe.
// Cost: a pool hit plus a hash-map insert (a miss: creating and mapping a
// pinned buffer, milliseconds on a GPU driver).
template <class T>
class PinnedAllocator {
public:
    using value_type = T;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    using is_always_equal = std::false_type;

    PinnedAllocator() noexcept = default;
    explicit PinnedAllocator(const cl::CommandQueue& queue) : PinnedAllocator(get_mapped_pinned_pool(queue)) {}
    explicit PinnedAllocator(MappedPinnedPool& pool) : arena_(std::make_shared<detail::pinned_arena>(pool)) {}
    template <class U>
    PinnedAllocator(const PinnedAllocator<U>& other) noexcept : arena_(other.arena_) {}
    // A move copies: a moved-from allocator must stay equal to the new one
    // (allocator requirements), and containers move theirs when moved.
    PinnedAllocator(const PinnedAllocator&) noexcept = default;
    // NOLINTNEXTLINE(performance-move-constructor-init): the copy is the point (above)
    PinnedAllocator(PinnedAllocator&& other) noexcept : arena_(other.arena_) {}
    PinnedAllocator& operator=(const PinnedAllocator&) noexcept = default;
    PinnedAllocator& operator=(PinnedAllocator&& other) noexcept {
        arena_ = other.arena_;
        return *this;
    }
    ~PinnedAllocator() = default;

    T* allocate(std::size_t n) {
        if (!arena_)
            throw usage_error(
                "clpool: PinnedAllocator was default-constructed; construct it from a queue or a PinnedBufferPool");
        // std::allocator's exception for this case: what containers and their callers expect.
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept {
        if (arena_ && p) arena_->deallocate(p);
    }

    // The pool memory comes from; throws usage_error for a default-constructed allocator.
    MappedPinnedPool& pool() const {
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
using PinnedVector = std::vector<T, PinnedAllocator<T>>;

}  // namespace clpool
