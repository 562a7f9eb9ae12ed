// Which clCreateBuffer calls a pool can serve unseen: the drop-in buffer's and the interposer's one test.
#pragma once

#include <clpool/backends/opencl.hpp>

#include <bit>
#include <cstddef>

namespace clpool::detail {

// The flags a pooled buffer can honour: access, host access, and where the
// memory lives or comes from. Anything else (CL_MEM_USE_HOST_PTR, vendor
// flags) goes to the driver.
constexpr cl_mem_flags poolable_access_bits = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
constexpr cl_mem_flags poolable_host_access_bits =
    CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;
constexpr cl_mem_flags poolable_flag_bits =
    poolable_access_bits | poolable_host_access_bits | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;

// True where a pooled buffer can stand in for clCreateBuffer(flags, size,
// host_ptr) without changing what the application sees: size 0, other flags,
// conflicting access flags and invalid host pointers go to the driver, which
// answers them as it always does. CL_MEM_COPY_HOST_PTR needs a host pointer
// and no host-access flag (the copy is an enqueued write, which those would
// forbid); without it, no host pointer. Pure; never throws.
constexpr bool poolable(cl_mem_flags flags, std::size_t size, const void* host_ptr) noexcept {
    if (size == 0 || (flags & ~poolable_flag_bits) != 0) return false;
    if (std::popcount(flags & poolable_access_bits) > 1 || std::popcount(flags & poolable_host_access_bits) > 1)
        return false;
    if (flags & CL_MEM_COPY_HOST_PTR) return host_ptr != nullptr && (flags & poolable_host_access_bits) == 0;
    return host_ptr == nullptr;
}

}  // namespace clpool::detail
