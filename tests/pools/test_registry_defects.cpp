// Defects found in include/clpool/pools/ (registry.hpp), each with the case that shows it.
//
// Settings are read once per process, so the case that needs CLPOOL_MAX_CACHED_GB
// set before clpool first reads it runs this binary again as a child with the
// variable set (the "registry child:" case, skipped unless its parent asks for it).
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "alloc_counter.hpp"
#include "opencl_env.hpp"
#include "rerun_self.hpp"
#include "sanitizers.hpp"

#include <clpool/pools/process_snapshot.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace clpool;

// context_registry::get() made the map slot (pools_[{ctx, device}])
// before constructing the pool; when the pool's constructor threw (here
// config_error from an invalid CLPOOL_MAX_CACHED_GB, for the persistent pool),
// an empty unique_ptr stayed in the map. size() counted a pool that does not
// exist, and snapshot_all(), shutdown()'s trim and release_pools() then
// dereferenced the null pointer (a crash).
TEST_CASE("registry child: a pool whose construction throws leaves no empty slot in the registry" * doctest::skip()) {
    const auto& q = test::OpenCLEnv::get().queue;
    CHECK_THROWS_AS(get_persistent_pool(q), config_error);
    CHECK_THROWS_AS(get_persistent_pool(q), config_error);  // again: the same answer, not a dangling slot
    auto* reg = detail::context_registry<PersistentBufferPool>::existing();
    REQUIRE(reg);
    CHECK(reg->size() == 0);
    const ProcessSnapshot s = snapshot_all();  // crashed on the empty slot
    for (const auto& p : s.pools) CHECK(p.pool.rfind("PersistentBufferPool", 0) != 0);
    CHECK(reg->trim_all() == 0);  // what shutdown() runs: crashed too
    release_pools(test::OpenCLEnv::get().context);
}

TEST_CASE("registry: a pool constructor that throws leaves the registry usable (snapshot, trim, release)") {
    CHECK(test::rerun_self("CLPOOL_MAX_CACHED_GB=12x", "registry child: a pool whose construction throws*") == 0);
}
// Only where operator new is the tests' own, which can fail on demand (sanitizers.hpp).
#if CLPOOL_TEST_COUNTS_NEW
namespace {
bool registry_defects_queue_registered(cl_command_queue q) {
    const auto qs = registered_queues();
    return std::find(qs.begin(), qs.end(), q) != qs.end();
}
}  // namespace

// Before: get() marked a queue as seen (seen_queues_) before queue_registry::add, which never
// throws and, out of host memory, silently records nothing. The pool was returned, the queue
// counted as registered, and no later get_*_pool call with it tried again: it was never
// finished at exit or by shutdown(). A queue is now seen only once it is registered.
TEST_CASE("registry: a queue whose exit registration failed out of memory is registered by the next get") {
    auto& env = test::OpenCLEnv::get();
    (void)get_buffer_pool(env.queue);  // the context's pool exists: get() allocates only for the queue
    std::vector<std::unique_ptr<cl::CommandQueue>> queues;
    cl_command_queue failed = nullptr;
    // The registry's vector grows now and then (at powers of two): a queue whose push_back needs
    // room, with that allocation failing (the first is seen_queues_' node, before the fix).
    for (int i = 0; i < 64 && !failed; ++i) {
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
            if (!threw && !registry_defects_queue_registered(q)) {
                failed = q;
                break;
            }
        }
    }
    REQUIRE_MESSAGE(failed, "no registration failed: the registry never needed room");
    (void)get_buffer_pool(*queues.back());  // host memory is back
    CHECK(registry_defects_queue_registered(failed));
    release_pools(env.context);  // forgets these queues before they go
}
#endif

#endif
