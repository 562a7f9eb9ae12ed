// HostBackend: pools over aligned host memory, where no OpenCL device exists.
#pragma once

#include <clpool/core/backend.hpp>

#include <cstddef>
#include <limits>
#include <new>
#include <utility>

namespace clpool {

// One aligned host allocation; frees itself. Move-only.
class HostMemory {
public:
    HostMemory() noexcept = default;
    HostMemory(std::byte* data, std::size_t size, std::size_t alignment) noexcept
        : data_(data), size_(size), alignment_(alignment) {}
    HostMemory(HostMemory&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), alignment_(o.alignment_) {}
    HostMemory& operator=(HostMemory&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            alignment_ = o.alignment_;
        }
        return *this;
    }
    ~HostMemory() { reset(); }

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return data_ != nullptr; }

private:
    void reset() noexcept {
        if (data_) ::operator delete(data_, std::align_val_t{alignment_});
        data_ = nullptr;
    }
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t alignment_ = alignof(std::max_align_t);
};

// Part of a HostMemory (a block SubAllocated<HostBackend> carved): a pointer
// and a size, owning nothing.
class HostRange {
public:
    HostRange() noexcept = default;
    HostRange(std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}
    HostRange(HostRange&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    HostRange& operator=(HostRange&& o) noexcept {
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        return *this;
    }
    HostRange(const HostRange&) = delete;
    HostRange& operator=(const HostRange&) = delete;
    ~HostRange() = default;

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return data_ != nullptr; }

private:
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Aligned host memory. Every MemoryKind is the same host memory, and the
// device "shares" it, so unified_memory() is true. Thread-safe.
class HostBackend {
public:
    using memory_type = HostMemory;
    using sub_memory_type = HostRange;  // SubAllocated<HostBackend>'s blocks
    // No events (host memory is never used by queued work), nothing to abandon.
    static constexpr BackendAbilities abilities = BackendAbility::none;

    // Whole allocations aligned to 4096 bytes (a page, as OpenCL drivers align
    // host-pinned memory); blocks that SubAllocated carves from them at the
    // arena's granularity (ArenaOptions::granularity, 512 by default), as an
    // OpenCL device's sub-buffers are.
    HostBackend() noexcept : alignment_(4096), sub_alignment_(alignof(std::max_align_t)) {}
    // Every buffer aligned to `alignment` (a power of two), whole allocations
    // and carved blocks alike: under SubAllocated the granularity is at least
    // `alignment` (and an alignment that is not a power of two is a
    // config_error there). max_alloc: the largest allocation to accept.
    explicit HostBackend(std::size_t alignment,
                         std::size_t max_alloc = std::numeric_limits<std::size_t>::max() / 2) noexcept
        : alignment_(alignment), sub_alignment_(alignment), max_alloc_(max_alloc) {}

    std::size_t max_alloc_size() const noexcept { return max_alloc_; }
    bool unified_memory() const noexcept { return true; }
    std::size_t alignment() const noexcept { return alignment_; }
    const char* name() const noexcept { return "host"; }

    Allocation<HostMemory> allocate(std::size_t n, MemoryKind) noexcept {
        void* p = ::operator new(n, std::align_val_t{alignment_}, std::nothrow);
        if (!p) return {HostMemory{}, AllocStatus::out_of_memory, 0};
        // Commit now, as the OpenCL backend does: touch one byte a page so a
        // pool hit never pays the page faults.
        auto* bytes = static_cast<volatile unsigned char*>(p);
        for (std::size_t i = 0; i < n; i += page_size) bytes[i] = 0;
        return {HostMemory{static_cast<std::byte*>(p), n, alignment_}, AllocStatus::ok, 0};
    }

    // For SubAllocated: the alignment asked for at construction; with none
    // asked, what any object needs (the arena's granularity then decides).
    std::size_t sub_alignment() const noexcept { return sub_alignment_; }
    static Allocation<HostRange> sub_range(const HostMemory& segment, std::size_t offset, std::size_t n) noexcept {
        return {HostRange(segment.data() + offset, n), AllocStatus::ok, 0};
    }
    static HostRange whole_range(const HostMemory& m, std::size_t n) noexcept { return HostRange(m.data(), n); }

private:
    static constexpr std::size_t page_size = 4096;
    std::size_t alignment_;
    std::size_t sub_alignment_;
    std::size_t max_alloc_ = std::numeric_limits<std::size_t>::max() / 2;
};

static_assert(Backend<HostBackend>);

}  // namespace clpool
