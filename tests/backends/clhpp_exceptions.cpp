// clpool with CL-HPP exceptions enabled: the same calls work, clpool's own
// errors (not cl::Error) still report failures, and a release the driver
// reports as failed never throws out of clpool's noexcept paths.
#define CL_HPP_ENABLE_EXCEPTIONS
#include "opencl_env.hpp"

#include <clpool/clpool.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <atomic>
#include <vector>

namespace {
// While set, every clReleaseMemObject from this program releases and then
// reports CL_OUT_OF_RESOURCES, as a driver may: CL-HPP's move-assignment
// turns that code into a cl::Error.
std::atomic<bool> releases_fail{false};
std::atomic<long> failed_releases{0};

struct FailingReleases {
    FailingReleases() { releases_fail = true; }
    ~FailingReleases() { releases_fail = false; }
    FailingReleases(const FailingReleases&) = delete;
    FailingReleases& operator=(const FailingReleases&) = delete;
};
}  // namespace

// This program's calls (CL-HPP's and clpool's) bind here before libOpenCL.
extern "C" CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem m) CL_API_SUFFIX__VERSION_1_0 {
    using release_fn = cl_int(CL_API_CALL*)(cl_mem);
    static const auto real = reinterpret_cast<release_fn>(dlsym(RTLD_NEXT, "clReleaseMemObject"));
    const cl_int err = real(m);
    if (err != CL_SUCCESS || !releases_fail) return err;
    ++failed_releases;
    return CL_OUT_OF_RESOURCES;
}

TEST_CASE("pools work with CL_HPP_ENABLE_EXCEPTIONS") {
    auto& env = clpool::test::OpenCLEnv::get();
    clpool::BufferPool pool(env.context);
    auto h = pool.allocate(1000);
    REQUIRE(h);
    h.release();
    CHECK(pool.allocate(1000));
    CHECK(pool.stats().hits == 1);
    CHECK_THROWS_AS((void)pool.allocate(pool.max_alloc_size() + 1), clpool::size_error);
    auto& registered = clpool::get_persistent_pool(env.queue);
    CHECK(&registered == &clpool::get_persistent_pool(env.queue));
    CHECK(registered.allocate(1 << 20).bucket_size() == (1u << 20));
}

// Before detail::discard / replace, each of these ended in std::terminate:
// a sub-buffer's move-assignment threw inside a noexcept release path.
TEST_CASE("a release the driver reports as failed throws out of no pool (CL_HPP_ENABLE_EXCEPTIONS)") {
    using namespace clpool;
    auto& env = test::OpenCLEnv::get();
    const long before = failed_releases;

    SUBCASE("a block's sub-buffer, none kept (Carved::reset)") {
        ArenaOptions o;
        o.cached_views = 0;
        ArenaPool pool(SubAllocated<OpenCLBackend>(OpenCLBackend(env.context), o));
        pool.allocate(4096).release();
        FailingReleases failing;
        pool.trim();
        CHECK(pool.stats().segments == 0);
    }
    SUBCASE("a kept sub-buffer replaced by a newer one (keep_view)") {
        ArenaOptions o;
        o.cached_views = 1;
        ArenaPool pool(SubAllocated<OpenCLBackend>(OpenCLBackend(env.context), o));
        {
            std::vector<ArenaPool::handle> hs;
            for (int i = 0; i < 4; ++i) hs.push_back(pool.allocate(4096));  // one segment
        }
        FailingReleases failing;
        pool.trim();  // each block's view replaces the one kept before it
        CHECK(pool.stats().segments == 0);
    }
    SUBCASE("a kept sub-buffer under a new carve (take_view)") {
        using Uncached = Pool<ArenaBuckets, DeviceLocal, Capped, SingleMutex, SubAllocated<OpenCLBackend>>;
        Uncached pool(SubAllocated<OpenCLBackend>(OpenCLBackend(env.context)), Capped(std::size_t{1} << 30, 0));
        pool.allocate(4096).release();  // not cached: its range and view go back to the segment
        REQUIRE(pool.stats().sub_buffers_cached == 1);
        FailingReleases failing;
        auto h = pool.allocate(8192);  // over the kept view's bytes: it is released first
        CHECK(h);
        CHECK(pool.stats().sub_buffers_cached == 0);
    }
    SUBCASE("a mapped pinned block's buffer (MappedRange)") {
        MappedPinnedArenaPool pool(MappedPinnedBackend(env.queue));
        pool.allocate(4096).release();
        FailingReleases failing;
        pool.trim();
        CHECK(pool.stats().segments == 0);
    }
    CHECK(failed_releases > before);  // the driver did report failures
}
