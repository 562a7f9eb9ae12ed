// Per-context pools: one per cl_context, the same object from every thread.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <set>
#include <thread>
#include <vector>

#ifdef CLPOOL_HAS_OPENCL
using namespace clpool;
using namespace clpool::test;

TEST_CASE("get_*_pool returns one pool per context, the same from every thread and queue") {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl::CommandQueue second(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
    REQUIRE(err == CL_SUCCESS);

    std::vector<const void*> seen(16);
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) {
        threads.emplace_back([&, i] {
            const auto& q = i % 2 ? env.queue : second;
            const void* a = &get_buffer_pool(q);
            const void* b = &get_pinned_pool(q);
            const void* c = &get_persistent_pool(q);
            seen[i] = (a != b && b != c && a != c) ? a : nullptr;
        });
    }
    for (auto& t : threads) t.join();
    CHECK(std::set<const void*>(seen.begin(), seen.end()).size() == 1);
    CHECK(seen[0] == &get_buffer_pool(env.queue));
    CHECK(get_pinned_pool(env.queue).kind() == MemoryKind::host_pinned);
    CHECK(get_buffer_pool(env.queue).kind() == MemoryKind::device_local);

    // Another context gets its own pools.
    cl_device_id dev = env.device();
    cl::Context other(clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl::CommandQueue other_q(clCreateCommandQueue(other(), dev, 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    auto& theirs = get_buffer_pool(other_q);
    CHECK(&theirs != &get_buffer_pool(env.queue));
    auto h = theirs.allocate(100);
    cl_context owner = nullptr;
    clGetMemObjectInfo(h.buffer()(), CL_MEM_CONTEXT, sizeof owner, &owner, nullptr);
    CHECK(owner == other());
    h.release();
    CHECK(theirs.stats().bytes_cached > 0);
    { auto p = get_pinned_pool(other_q).allocate(100); }
    CHECK(get_pinned_pool(other_q).stats().bytes_cached > 0);
    release_pools(other);  // every registry's pools of `other` go
    // Pools made for the context afterwards are fresh ones: nothing cached.
    CHECK(get_buffer_pool(other_q).stats().bytes_cached == 0);
    CHECK(get_pinned_pool(other_q).stats().bytes_cached == 0);
    release_pools(other);  // the context can now go
}
#endif
