// Where a replay's pools get memory: backend adapters that count the bytes held from the driver
// and refuse what would pass a simulated capacity, the accounting-only backend, and the target.
#pragma once

#include <clpool/clpool.hpp>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace clpool::replay {

// Bytes held from the driver by every pool of one configuration. The replay
// is single-threaded, so plain counters.
struct DriverCounter {
    std::size_t held = 0;
    // A simulated device capacity: an allocation that would take held past it
    // fails as out of memory (the pool then trims and retries once).
    std::size_t capacity = std::numeric_limits<std::size_t>::max();
    std::uint64_t allocations = 0;
    std::uint64_t frees = 0;
    // Views the parent made (sub_range): over OpenCL a clCreateSubBuffer, a
    // driver call though not an allocation of device memory.
    std::uint64_t views = 0;
    // The least capacity that would have granted an allocation refused so
    // far (held + its size); max if none was refused. Every capacity from
    // `capacity` up to just below it replays the same way (each comparison
    // with the capacity comes out the same), which the capacity search uses.
    std::size_t next_capacity = std::numeric_limits<std::size_t>::max();
};

// Memory from a Counted backend: the inner memory, and a note on the counter
// that is taken off again when the memory is freed.
template <class M>
class CountedMemory {
public:
    CountedMemory() = default;
    CountedMemory(M inner, std::size_t bytes, DriverCounter* c) noexcept
        : inner_(std::move(inner)), bytes_(bytes), counter_(c) {}
    CountedMemory(CountedMemory&& o) noexcept
        : inner_(std::move(o.inner_)), bytes_(o.bytes_), counter_(std::exchange(o.counter_, nullptr)) {}
    CountedMemory& operator=(CountedMemory&& o) noexcept {
        if (this != &o) {
            drop();
            inner_ = std::move(o.inner_);
            bytes_ = o.bytes_;
            counter_ = std::exchange(o.counter_, nullptr);
        }
        return *this;
    }
    ~CountedMemory() { drop(); }
    const M& inner() const noexcept { return inner_; }

private:
    void drop() noexcept {
        if (counter_) {
            counter_->held -= bytes_;
            ++counter_->frees;
        }
        counter_ = nullptr;
    }
    M inner_{};
    std::size_t bytes_ = 0;
    DriverCounter* counter_ = nullptr;
};

// A backend adapter that counts what the inner backend holds. With
// FreeViews, a parent whose views are a pointer (or buffer) plus an offset,
// as SVMBackend's and OpenCLOffsetBackend's are: making one is no driver
// call (views_are_free), so the only driver call is a segment's allocation.
template <Backend B, bool FreeViews = false>
class Counted {
public:
    static constexpr bool views_are_free = FreeViews;
    using memory_type = CountedMemory<typename B::memory_type>;
    Counted(B inner, DriverCounter* c) : inner_(std::move(inner)), counter_(c) {}
    std::size_t max_alloc_size() const noexcept { return inner_.max_alloc_size(); }
    bool unified_memory() const noexcept { return inner_.unified_memory(); }
    decltype(auto) name() const { return inner_.name(); }  // the pool wants what the inner backend gives

    // A parent for SubAllocated (SegmentBackend): a view holds no bytes, but
    // making one is a driver call (clCreateSubBuffer), counted as such on every
    // target, unless FreeViews says it is none.
    using sub_memory_type = typename B::sub_memory_type;
    std::size_t sub_alignment() const { return inner_.sub_alignment(); }
    Allocation<sub_memory_type> sub_range(const memory_type& segment, std::size_t offset, std::size_t n) noexcept {
        if constexpr (!FreeViews) ++counter_->views;
        return inner_.sub_range(segment.inner(), offset, n);
    }
    sub_memory_type whole_range(const memory_type& m, std::size_t n) noexcept {
        return inner_.whole_range(m.inner(), n);
    }
    Allocation<memory_type> allocate(std::size_t n, MemoryKind k) noexcept {
        // Pass-through buffers are never refused, so held may already be past the capacity.
        if (counter_->held > counter_->capacity || n > counter_->capacity - counter_->held) {
            const std::size_t needed = n > std::numeric_limits<std::size_t>::max() - counter_->held
                                           ? std::numeric_limits<std::size_t>::max()
                                           : counter_->held + n;
            counter_->next_capacity = std::min(counter_->next_capacity, needed);
            return {memory_type{}, AllocStatus::out_of_memory, 0};
        }
        auto a = inner_.allocate(n, k);
        if (a.status != AllocStatus::ok) return {memory_type{}, a.status, a.native_code};
        counter_->held += n;
        ++counter_->allocations;
        return {memory_type(std::move(a.memory), n, counter_), AllocStatus::ok, 0};
    }

private:
    B inner_;
    DriverCounter* counter_;
};

// Accounting only: no memory is made. For traces larger than this machine.
struct SimBackend {
    struct memory_type {};
    using sub_memory_type = memory_type;
    std::size_t max_alloc_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 2; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "sim"; }
    Allocation<memory_type> allocate(std::size_t, MemoryKind) noexcept { return {{}, AllocStatus::ok, 0}; }
    // Carving as on NVIDIA: CL_DEVICE_MEM_BASE_ADDR_ALIGN of 4096 bits, 512 bytes.
    static std::size_t sub_alignment() noexcept { return 512; }
    static Allocation<memory_type> sub_range(const memory_type&, std::size_t, std::size_t) noexcept {
        return {{}, AllocStatus::ok, 0};
    }
    static memory_type whole_range(const memory_type&, std::size_t) noexcept { return {}; }
};
static_assert(Backend<SimBackend>);
static_assert(SegmentBackend<Counted<SimBackend>>);
static_assert(SegmentBackend<Counted<HostBackend>>);
static_assert(SegmentBackend<Counted<SimBackend, true>> && clpool::detail::views_are_free<Counted<SimBackend, true>>());
static_assert(Backend<Counted<HostBackend>>);

// Where the replayed pools get memory.
struct Target {
    enum class type { host, sim, opencl } what = type::host;
#ifdef CLPOOL_HAS_OPENCL
    cl::Context context;
    cl_device_id device = nullptr;
#endif
    // Bytes every configuration may hold from the driver at once (a simulated
    // device size; the capacity search sets it).
    std::size_t capacity = std::numeric_limits<std::size_t>::max();
    // If set, a replay's pool set writes its DriverCounter::next_capacity
    // here when it is destroyed (the capacity search reads it).
    std::size_t* next_capacity = nullptr;
    std::string description() const {
        return what == type::host  ? "host backend (aligned host memory)"
               : what == type::sim ? "simulation (no memory made)"
                                   : "OpenCL device";
    }
};

}  // namespace clpool::replay
