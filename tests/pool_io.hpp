// Writing and checking byte patterns in pooled memory, the same way for every backend.
#pragma once

#include "mock_backend.hpp"

#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where OpenCL is built
#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

#include <cstddef>
#include <cstring>
#include <vector>

namespace clpool::test {

inline std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = std::byte(static_cast<unsigned char>((i * 131u + seed * 7u + 1u) & 0xff));
    return v;
}

// Host-addressable memory (a cl::Buffer, or a sub-allocated block derived from one, takes the overloads below).
template <class Memory>
    requires requires(const Memory& m) { m.data(); }
void write_bytes(const Memory& m, const std::vector<std::byte>& data) {
    std::memcpy(m.data(), data.data(), data.size());
}
template <class Memory>
    requires requires(const Memory& m) { m.data(); }
std::vector<std::byte> read_bytes(const Memory& m, std::size_t n) {
    std::vector<std::byte> out(n);
    std::memcpy(out.data(), m.data(), n);
    return out;
}

#ifdef CLPOOL_HAS_OPENCL
inline void write_bytes(const cl::Buffer& b, const std::vector<std::byte>& data) {
    REQUIRE(clEnqueueWriteBuffer(OpenCLEnv::get().queue(), b(), CL_TRUE, 0, data.size(), data.data(), 0, nullptr,
                                 nullptr) == CL_SUCCESS);
}
inline std::vector<std::byte> read_bytes(const cl::Buffer& b, std::size_t n) {
    std::vector<std::byte> out(n);
    REQUIRE(clEnqueueReadBuffer(OpenCLEnv::get().queue(), b(), CL_TRUE, 0, n, out.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    return out;
}
// Shared virtual memory (SVMPool, SVMArenaPool): through its pointer.
inline void write_bytes(const SVMSpan& m, const std::vector<std::byte>& data) {
    REQUIRE(clEnqueueSVMMemcpy(OpenCLEnv::get().queue(), CL_TRUE, m.get(), data.data(), data.size(), 0, nullptr,
                               nullptr) == CL_SUCCESS);
}
inline std::vector<std::byte> read_bytes(const SVMSpan& m, std::size_t n) {
    std::vector<std::byte> out(n);
    REQUIRE(clEnqueueSVMMemcpy(OpenCLEnv::get().queue(), CL_TRUE, out.data(), m.get(), n, 0, nullptr, nullptr) ==
            CL_SUCCESS);
    return out;
}
// A block of OffsetArenaPool: its segment at its offset.
inline void write_bytes(const Carved<OpenCLOffsetBackend>& m, const std::vector<std::byte>& data) {
    REQUIRE(clEnqueueWriteBuffer(OpenCLEnv::get().queue(), m.segment()(), CL_TRUE, m.offset(), data.size(), data.data(),
                                 0, nullptr, nullptr) == CL_SUCCESS);
}
inline std::vector<std::byte> read_bytes(const Carved<OpenCLOffsetBackend>& m, std::size_t n) {
    std::vector<std::byte> out(n);
    REQUIRE(clEnqueueReadBuffer(OpenCLEnv::get().queue(), m.segment()(), CL_TRUE, m.offset(), n, out.data(), 0, nullptr,
                                nullptr) == CL_SUCCESS);
    return out;
}
#endif

}  // namespace clpool::test
