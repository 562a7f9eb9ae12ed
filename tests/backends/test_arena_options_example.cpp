// docs/ARENA.md's ArenaOptions example, extracted at configure time (tests/CMakeLists.txt), built and run.
#include "opencl_env.hpp"

#include "arena_options_example.hpp"  // generated from docs/ARENA.md

#include <doctest/doctest.h>

TEST_CASE("docs/ARENA.md's ArenaOptions example builds its pools and each carves from its own arena") {
    CHECK(arena_with_options(clpool::test::OpenCLEnv::get().context) == 3);
}
