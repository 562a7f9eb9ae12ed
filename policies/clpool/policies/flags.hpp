// Flag policies: which kind of memory a pool asks its backend for.
#pragma once

#include <clpool/core/memory_kind.hpp>
#include <clpool/core/policy_concepts.hpp>

namespace clpool {

// Device-local memory: fastest for kernels on a discrete GPU.
struct DeviceLocal {
    template <class Backend>
    constexpr MemoryKind kind(const Backend&) const noexcept {
        return MemoryKind::device_local;
    }
};

// Pinned (page-locked) host memory: DMA-able staging for fast transfers; costs
// host RAM the OS cannot swap out.
struct HostPinned {
    template <class Backend>
    constexpr MemoryKind kind(const Backend&) const noexcept {
        return MemoryKind::host_pinned;
    }
};

// Host-pinned where the device shares host memory (integrated GPUs, CPUs),
// device-local on discrete GPUs: on a unified device, host-allocated memory
// is what the device uses anyway and it maps without a copy.
struct IntegratedAware {
    template <class Backend>
    MemoryKind kind(const Backend& b) const noexcept {
        return b.unified_memory() ? MemoryKind::host_pinned : MemoryKind::device_local;
    }
};

}  // namespace clpool
