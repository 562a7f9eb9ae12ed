// A pool hit does no heap allocation: operator new is counted around hits.
#include "alloc_counter.hpp"
#include "sanitizers.hpp"
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <new>

namespace clpool::test {
std::size_t& thread_allocations() noexcept {
    static thread_local std::size_t n = 0;
    return n;
}
bool& thread_counting() noexcept {
    static thread_local bool on = false;
    return on;
}
std::size_t& thread_fail_countdown() noexcept {
    static thread_local std::size_t n = 0;
    return n;
}
alloc_hook& thread_alloc_hook() noexcept {
    static thread_local alloc_hook h;
    return h;
}
}  // namespace clpool::test

// Sanitizer runtimes bring their own operator new: replace it only in plain builds
// (CLPOOL_TEST_COUNTS_NEW, sanitizers.hpp).

#if CLPOOL_TEST_COUNTS_NEW
// Our operator new is malloc, so free is the matching release; GCC 12 cannot
// see that once it inlines std::allocator and warns about a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
    if (clpool::test::thread_counting()) ++clpool::test::thread_allocations();
    if (auto& hook = clpool::test::thread_alloc_hook(); hook.fn) {
        const auto h = hook;
        hook = {};  // once; the hook may allocate
        h.fn(h.arg);
    }
    if (auto& left = clpool::test::thread_fail_countdown(); left != 0 && --left == 0) throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

using namespace clpool;
using namespace clpool::test;

#ifdef CLPOOL_HAS_OPENCL
#define CLPOOL_NO_HEAP_OPENCL_POOLS , clpool::BufferPool, clpool::PinnedBufferPool
#else
#define CLPOOL_NO_HEAP_OPENCL_POOLS
#endif

#if CLPOOL_TEST_COUNTS_NEW
TEST_CASE_TEMPLATE("hits allocate nothing on the heap", P, host::BufferPool, host::PersistentBufferPool,
                   MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Striped<8>> CLPOOL_NO_HEAP_OPENCL_POOLS) {
    auto pool = make_pool<P>();
    pool->allocate(1000).release();
    pool->allocate(70000).release();
    {
        CountAllocations counting;
        for (int i = 0; i < 100; ++i) {
            auto a = pool->allocate(1000);
            auto b = pool->allocate(70000);
            a.release();
        }
        CHECK(counting.count() == 0);
    }
    CHECK(pool->stats().hits == 200);
    // The counter itself works: a miss allocates its host-side node.
    CountAllocations counting;
    auto miss = pool->allocate(1 << 20);
    CHECK(counting.count() > 0);
}
#endif
