// clpool with CL-HPP exceptions enabled: the same calls work, and clpool's own
// errors (not cl::Error) still report failures.
#define CL_HPP_ENABLE_EXCEPTIONS
#include "opencl_env.hpp"

#include <clpool/clpool.hpp>

#include <doctest/doctest.h>

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
