// PinnedAllocator: std containers on mapped pinned pool buffers, with a pointer valid until deallocate.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"

#include <clpool/interop/pinned_allocator.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
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

// The allocator requirements: a moved-from allocator is unchanged and equal to its new copy. A
// std::vector moves its allocator when it is moved, so a moved-from PinnedVector, cleared, must
// still be able to push_back: moving the shared arena out would leave it none.
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

namespace {
struct alignas(4194304) pinned_over_aligned {  // 4 MiB: beyond any driver's mapping we know
    char c;
};
}  // namespace

// A T aligned beyond the driver's mapping of the pinned buffer (PoCL's: 128 or 1024 bytes, so
// alignas(4096) is enough) cannot be served; the caller must learn both the alignment asked for
// and the one the mapping has, which a bare std::bad_alloc would not tell.
TEST_CASE("PinnedAllocator: a T aligned beyond the mapping is a size_error naming both alignments") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<pinned_over_aligned> a(pool);
    constexpr std::size_t asked = alignof(pinned_over_aligned);
    try {
        pinned_over_aligned* p = a.allocate(1);
        // A driver that maps this aligned serves it, aligned.
        CHECK(reinterpret_cast<std::uintptr_t>(p) % asked == 0);
        a.deallocate(p, 1);
    } catch (const size_error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(e.requested() == asked);
        CHECK(e.limit() < asked);
        CHECK(e.limit() > 0);
        CHECK(what.find("aligned to " + std::to_string(asked)) != std::string::npos);
        CHECK(what.find("(limit " + std::to_string(e.limit()) + " bytes)") != std::string::npos);
    } catch (const std::exception& e) {
        FAIL_CHECK("expected size_error, got: ", std::string(e.what()));
    }
    CHECK(pool.stats().bytes_in_use == 0);  // the buffer went back to the pool
}

#endif  // CLPOOL_HAS_OPENCL
