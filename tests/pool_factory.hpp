// Making a pool of any tested type, and telling two buffers apart, for every backend.
#pragma once

#include "mock_backend.hpp"
#include "pool_io.hpp"

#include <clpool/clpool.hpp>

#include <memory>

namespace clpool::test {

// Mock-backed pools for each lock policy and bucket scheme.
template <class Buckets, class Flags, class Limits, class Locks>
using MockPool = Pool<Buckets, Flags, Limits, Locks, MockBackend>;

template <class P>
std::unique_ptr<P> make_pool(typename P::limit_policy limits = typename P::limit_policy{}) {
    using B = typename P::backend_type;
    if constexpr (std::is_same_v<B, HostBackend>) {
        return std::make_unique<P>(HostBackend{}, limits);
#ifdef CLPOOL_HAS_OPENCL
    } else if constexpr (std::is_same_v<B, OpenCLBackend>) {
        return std::make_unique<P>(OpenCLBackend(OpenCLEnv::get().context), limits);
#endif
    } else {
        return std::make_unique<P>(MockBackend{}, limits);
    }
}

inline const void* identity(const HostMemory& m) { return m.data(); }
inline const void* identity(const MockMemory& m) { return m.data(); }
#ifdef CLPOOL_HAS_OPENCL
inline const void* identity(const cl::Buffer& b) { return b(); }
#endif

}  // namespace clpool::test
