// MemoryKind: the backend-neutral name for the kind of memory a pool holds.
#pragma once

namespace clpool {

enum class MemoryKind : unsigned char {
    device_local,  // memory the device reads fastest (CL_MEM_READ_WRITE)
    host_pinned,   // page-locked host memory the device can DMA (CL_MEM_ALLOC_HOST_PTR)
};

constexpr const char* to_string(MemoryKind k) noexcept {
    return k == MemoryKind::device_local ? "device_local" : "host_pinned";
}

}  // namespace clpool
