// PhantomBackend: a backend that hands out sizes, not memory, for bookkeeping-only benchmarks.
#pragma once

#include <clpool/core/backend.hpp>

#include <cstddef>
#include <limits>

namespace clpool::bench {

// Stands for a buffer of `size` bytes that was never allocated: lets a
// benchmark hold gigabytes of "buffers" to measure rounding waste, or time
// the pool's bookkeeping with no driver in the way. Thread-safe.
struct PhantomMemory {
    std::size_t size = 0;
};

struct PhantomBackend {
    using memory_type = PhantomMemory;
    using sub_memory_type = PhantomMemory;  // SubAllocated<PhantomBackend>: bookkeeping of the arena alone
    static constexpr BackendAbilities abilities = BackendAbility::none;
    std::size_t max_alloc_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 4; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "phantom"; }
    Allocation<PhantomMemory> allocate(std::size_t n, MemoryKind) noexcept {
        return {PhantomMemory{n}, AllocStatus::ok, 0};
    }
    std::size_t sub_alignment() const noexcept { return 512; }  // NVIDIA's CL_DEVICE_MEM_BASE_ADDR_ALIGN
    static Allocation<PhantomMemory> sub_range(const PhantomMemory&, std::size_t, std::size_t n) noexcept {
        return {PhantomMemory{n}, AllocStatus::ok, 0};
    }
    static PhantomMemory whole_range(const PhantomMemory&, std::size_t n) noexcept { return PhantomMemory{n}; }
};

static_assert(Backend<PhantomBackend>);

}  // namespace clpool::bench
