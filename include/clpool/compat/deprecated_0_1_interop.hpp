// clpool 0.1's spelling of PinnedVector, kept for one minor version (deprecated_0_1.hpp says
// why). 0.1's path of the PinnedAllocator header includes this header.
#pragma once

#include <clpool/core/has_opencl.hpp>
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/interop/pinned_allocator.hpp>

namespace clpool {

template <class T>
using pinned_vector [[deprecated("use clpool::PinnedVector")]] = PinnedVector<T>;

}  // namespace clpool
#endif
