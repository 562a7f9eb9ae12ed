// Per-context pools: one per cl_context, the same object from every thread; a pool whose
// construction throws, or a queue whose registration runs out of host memory, leaves the registry
// as usable as before.
//
// Settings are read once per process, so the case that needs CLPOOL_MAX_CACHED_GB set before
// clpool first reads it runs this binary again as a child with the variable set (the
// "registry child:" case, skipped unless its parent asks for it).
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <set>
#include <thread>
#include <vector>

#ifdef CLPOOL_HAS_OPENCL
#include "alloc_counter.hpp"
#include "opencl_env.hpp"
#include "rerun_self.hpp"
#include "sanitizers.hpp"

#include <clpool/interop/transfer.hpp>
#include <clpool/pools/process_snapshot.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

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

// The map slot of a pool is made only once its constructor returned: a constructor that throws
// (here config_error from an invalid CLPOOL_MAX_CACHED_GB, for the persistent pool) must leave no
// empty slot, which size() would count and which snapshot_all(), shutdown()'s trim and
// release_pools() would dereference.
TEST_CASE("registry child: a pool whose construction throws leaves no empty slot in the registry" * doctest::skip()) {
    const auto& q = test::OpenCLEnv::get().queue;
    CHECK_THROWS_AS(get_persistent_pool(q), config_error);
    CHECK_THROWS_AS(get_persistent_pool(q), config_error);  // again: the same answer, not a dangling slot
    auto* reg = detail::context_registry<PersistentBufferPool>::existing();
    REQUIRE(reg);
    CHECK(reg->size() == 0);
    const ProcessSnapshot s = snapshot_all();  // would dereference an empty slot
    for (const auto& p : s.pools) CHECK(p.pool.rfind("PersistentBufferPool", 0) != 0);
    CHECK(reg->trim_all() == 0);  // what shutdown() runs
    release_pools(test::OpenCLEnv::get().context);
}

TEST_CASE("registry: a pool constructor that throws leaves the registry usable (snapshot, trim, release)") {
    CHECK(test::rerun_self("CLPOOL_MAX_CACHED_GB=12x", "registry child: a pool whose construction throws*") == 0);
}

// Every queue passed to get_*_pool, or to upload/download above the direct size, is registered
// (retained, finished at exit). A program whose tasks make and release queues must not keep every
// one alive: once the application released a queue and nothing is pending on it, the registry lets
// it go, so the queues it holds, and the queues each registration looks at, stay bounded.
TEST_CASE("registry: queues the application released are let go; over ten thousand queues the registry stays small") {
    auto& env = test::OpenCLEnv::get();
    // The pools exist first: a pool keeps the queue it was made with (its backend holds it).
    (void)get_buffer_pool(env.queue);
    (void)get_mapped_pinned_pool(env.queue);
    auto& reg = detail::queue_registry::instance();
    const std::size_t before = reg.queues().size();
    const std::size_t examined_before = reg.examined();
    std::size_t most = 0;
    std::vector<char> host(std::size_t{512} << 10, 'x');  // above upload's direct size
    auto dev = get_buffer_pool(env.queue).allocate(host.size());
    constexpr int n = 10000;
    for (int i = 0; i < n; ++i) {
        cl_int err = CL_SUCCESS;
        cl::CommandQueue q(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
        REQUIRE(err == CL_SUCCESS);
        if (i % 10 == 0) {
            upload(q, dev.buffer(), 0, host.data(), host.size()).wait();
        } else {
            auto h = get_buffer_pool(q).allocate(4096);
            h.release();
        }
        most = std::max(most, reg.queues().size());
    }  // each queue released by the application here, nothing pending on it
    // A released queue goes once its marker has run, so a few hundred may wait for the device at a
    // time (how many depends on its speed), never the ten thousand.
    CHECK(most <= before + 2048);
    // Each registration looks at a bounded number of queues, amortised (not at all those before it).
    CHECK(reg.examined() - examined_before <= 4 * std::size_t{n});
    // A driver may keep the last command on a buffer, and so its queue (PoCL does): the last
    // upload's queue is still in use until another queue writes the buffer.
    upload(env.queue, dev.buffer(), 0, host.data(), host.size()).wait();
    // Once the device has run the markers, only the queues still in use remain.
    for (int i = 0; i < 500 && reg.queues().size() > before; ++i) {
        reg.prune();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(reg.queues().size() <= before);
}

// A queue the application released while a command on it still waits is kept (exit finishes it),
// and let go once that command is done.
TEST_CASE("registry: a released queue with a command still pending stays registered until it completes") {
    auto& env = test::OpenCLEnv::get();
    auto& reg = detail::queue_registry::instance();
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(env.context(), &err);
    REQUIRE(err == CL_SUCCESS);
    cl_command_queue raw = nullptr;
    {
        cl::CommandQueue q(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
        REQUIRE(err == CL_SUCCESS);
        raw = q();
        (void)get_buffer_pool(q);
        REQUIRE(clEnqueueMarkerWithWaitList(q(), 1, &gate, nullptr) == CL_SUCCESS);
        REQUIRE(clFlush(q()) == CL_SUCCESS);
    }  // the application's reference goes; the marker waits on `gate`
    const auto registered = [&] {
        const auto qs = reg.queues();
        return std::find(qs.begin(), qs.end(), raw) != qs.end();
    };
    for (int i = 0; i < 4; ++i) {
        reg.prune();
        CHECK(registered());
    }
    REQUIRE(clSetUserEventStatus(gate, CL_COMPLETE) == CL_SUCCESS);
    clReleaseEvent(gate);
    for (int i = 0; i < 500 && registered(); ++i) {  // until the device has run the marker
        reg.prune();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK_FALSE(registered());
}

// Only where operator new is the tests' own, which can fail on demand (sanitizers.hpp).
#if CLPOOL_TEST_COUNTS_NEW
namespace {
bool registry_has_queue(cl_command_queue q) {
    const auto qs = registered_queues();
    return std::find(qs.begin(), qs.end(), q) != qs.end();
}
}  // namespace

// queue_registry::add never throws and, out of host memory, records nothing. A queue must count
// as seen by get() only once it is registered: otherwise no later get_*_pool call with it would
// try again, and it would never be finished at exit or by shutdown().
TEST_CASE("registry: a queue whose exit registration failed out of memory is registered by the next get") {
    auto& env = test::OpenCLEnv::get();
    (void)get_buffer_pool(env.queue);  // the context's pool exists: get() allocates only for the queue
    std::vector<std::unique_ptr<cl::CommandQueue>> queues;
    cl_command_queue failed = nullptr;
    // The registry's vector grows now and then (at powers of two): a queue whose push_back needs
    // room, with that allocation failing (the first or the second of get()'s allocations).
    for (int i = 0; i < 4096 && !failed; ++i) {
        cl_int err = CL_SUCCESS;
        queues.push_back(
            std::make_unique<cl::CommandQueue>(clCreateCommandQueue(env.context(), env.device(), 0, &err), false));
        REQUIRE(err == CL_SUCCESS);
        const cl_command_queue q = (*queues.back())();
        for (std::size_t nth : {1, 2}) {
            bool threw = false;
            {
                test::FailNthAllocation fail(nth);
                try {
                    (void)get_buffer_pool(*queues.back());
                } catch (const std::bad_alloc&) {
                    threw = true;
                }
            }
            if (!threw && !registry_has_queue(q)) {
                failed = q;
                break;
            }
        }
    }
    REQUIRE_MESSAGE(failed, "no registration failed: the registry never needed room");
    (void)get_buffer_pool(*queues.back());  // host memory is back
    CHECK(registry_has_queue(failed));
    release_pools(env.context);  // forgets these queues before they go
}
#endif

#endif
