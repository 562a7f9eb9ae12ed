// PinnedAllocator: std containers on mapped pinned pool buffers, with a pointer valid until deallocate.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"

#include <clpool/interop/pinned_allocator.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

TEST_CASE("a pinned vector grows, keeps its contents, and gives every buffer back") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    {
        PinnedVector<std::uint64_t> v{PinnedAllocator<std::uint64_t>(pool)};
        for (std::uint64_t i = 0; i < 100000; ++i) v.push_back(i * 3);  // many reallocations
        for (std::uint64_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == i * 3);
        CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % alignof(std::uint64_t) == 0);
        CHECK(detail::pinned_ranges::instance().contains(v.data(), v.size() * sizeof(std::uint64_t)));
        const auto s = pool.stats();
        CHECK(s.bytes_in_use >= v.capacity() * sizeof(std::uint64_t));
        CHECK(s.misses >= 2);
    }
    const auto s = pool.stats();
    CHECK(s.bytes_in_use == 0);  // all handed back
    CHECK(s.bytes_cached == s.bytes_allocated);  // cached at once: no unmap to wait for
}

TEST_CASE("deallocate hands the still-mapped buffer back at once; the next allocate reuses it without a map") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<float> alloc(pool);
    float* p = alloc.allocate(1000);
    CHECK(detail::pinned_ranges::instance().contains(p, 4000));
    std::iota(p, p + 1000, 0.0f);  // the memory is usable host memory
    CHECK(p[999] == 999.0f);
    alloc.deallocate(p, 1000);
    auto s = pool.stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_pending == 0);  // no unmap to wait for: cached at once
    CHECK(s.bytes_cached == pool.bucket_size_for(4000));
    // Still pinned while cached: the pool keeps it mapped.
    CHECK(detail::pinned_ranges::instance().contains(p, 4000));

    float* q = alloc.allocate(1000);
    CHECK(q == p);  // the same buffer at the same mapped address
    CHECK(pool.stats().hits == 1);
    CHECK(q[999] == 999.0f);  // reuse keeps the contents (no map invalidated them)
    alloc.deallocate(q, 1000);

    // Only trim ends the mapping (and the pinned registration).
    CHECK(pool.trim() == pool.bucket_size_for(4000));
    CHECK_FALSE(detail::pinned_ranges::instance().contains(p, 4000));
}

TEST_CASE("allocator copies compare equal, rebinds share, distinct arenas differ") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<int> a(pool);
    PinnedAllocator<int> b = a;
    PinnedAllocator<double> c(a);
    PinnedAllocator<int> d(pool);
    CHECK(a == b);
    CHECK(a == c);
    CHECK_FALSE(a == d);
    CHECK(&c.pool() == &pool);

    // Memory from one copy can be freed through another.
    double* p = c.allocate(10);
    PinnedAllocator<double>(b).deallocate(p, 10);
    CHECK(pool.stats().bytes_in_use == 0);
}

TEST_CASE("misuse is refused clearly") {
    PinnedAllocator<int> none;
    CHECK_THROWS_AS(none.allocate(1), usage_error);
    CHECK_THROWS_AS((void)none.pool(), usage_error);
    none.deallocate(nullptr, 0);  // harmless

    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<std::uint64_t> a(pool);
    CHECK_THROWS_AS(a.allocate(std::size_t(-1) / 4), std::bad_array_new_length);
    CHECK_THROWS_AS(a.allocate(std::size_t(-1) / 16), size_error);  // above the device's limit
    int x = 0;
    a.deallocate(reinterpret_cast<std::uint64_t*>(&x), 1);  // not ours: ignored, nothing corrupted
    CHECK(pool.stats().bytes_in_use == 0);
}

TEST_CASE("get_mapped_pinned_pool(queue) backs the queue constructor") {
    auto& env = OpenCLEnv::get();
    PinnedAllocator<char> a(env.queue);
    CHECK(&a.pool() == &get_mapped_pinned_pool(env.queue));
    PinnedVector<char> v(5000, 'x', a);
    CHECK(v[4999] == 'x');
}

#endif  // CLPOOL_HAS_OPENCL
