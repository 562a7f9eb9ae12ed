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

// The limits a test pool gets unless a test gives its own: Capped takes its
// caps explicitly, so tests use the named pools' defaults (4 GiB, 16 per bucket).
template <class Limits>
Limits default_limits() {
    if constexpr (std::default_initializable<Limits>) return Limits{};
    else return Limits{std::size_t{4} << 30, Capped::default_per_bucket};
}

template <class P>
std::unique_ptr<P> make_pool(typename P::limit_policy limits = default_limits<typename P::limit_policy>()) {
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
