// interop/: defects found in review, each case failing before its fix.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"

#include <clpool/interop/pinned_allocator.hpp>

#include <doctest/doctest.h>

#include <utility>

using namespace clpool;
using clpool::test::OpenCLEnv;

// --- pinned_allocator.hpp --------------------------------------------------------------------------

// Before: the implicit move constructor and move assignment moved the shared arena out, leaving
// the source without one, against the allocator requirements (a moved-from allocator is
// unchanged and equal to its new copy). A std::vector moves its allocator when it is moved, so
// a moved-from PinnedVector, empty and valid, threw "default-constructed" on its next push_back.
TEST_CASE("a moved-from PinnedAllocator, and a moved-from PinnedVector, still allocate from the pool") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<int> a(pool);
    PinnedAllocator<int> b(std::move(a));
    CHECK(a == b);  // NOLINT(bugprone-use-after-move): the requirement under test
    int* p = nullptr;
    CHECK_NOTHROW(p = a.allocate(4));
    b.deallocate(p, 4);  // equal allocators free each other's memory
    PinnedAllocator<int> c(pool);
    c = std::move(b);
    CHECK(b == c);  // NOLINT(bugprone-use-after-move)
    CHECK(&b.pool() == &pool);

    PinnedVector<int> v{PinnedAllocator<int>(pool)};
    v.push_back(1);
    PinnedVector<int> w(std::move(v));
    v.clear();  // NOLINT(bugprone-use-after-move): a moved-from vector may be reused once cleared
    REQUIRE_NOTHROW(v.push_back(2));
    PinnedVector<int> x{PinnedAllocator<int>(pool)};
    x = std::move(w);  // propagates the allocator
    w.clear();         // NOLINT(bugprone-use-after-move)
    REQUIRE_NOTHROW(w.push_back(3));
    CHECK(x.size() == 1);
    CHECK(x[0] == 1);
    CHECK(v.back() == 2);
    CHECK(w.back() == 3);
}

#endif  // CLPOOL_HAS_OPENCL
