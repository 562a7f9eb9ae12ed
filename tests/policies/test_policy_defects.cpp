// Defects found in the policies, one case each: each fails on the code before its fix.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>

using namespace clpool;
using namespace clpool::test;

namespace {

// Capped, with a hook run inside admit() (so while the pool asks the caps).
std::function<void()> policy_defects_admit_hook;
struct PolicyDefectsHookedCapped : Capped {
    using Capped::Capped;
    bool admit(std::size_t bytes, std::size_t cached_total, std::size_t cached_in_bucket) const noexcept {
        if (auto hook = std::exchange(policy_defects_admit_hook, nullptr)) hook();  // once
        return Capped::admit(bytes, cached_total, cached_in_bucket);
    }
};

}  // namespace

// Striped<N>'s byte total reserved first and rolled back on refusal: a
// release on another stripe that asked the caps in between counted the
// refused buffer's bytes as idle and was evicted too, though it fit.
TEST_CASE("Striped + Capped: a release that fits is kept while another stripe's refused release rolls back") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, PolicyDefectsHookedCapped, Striped<4>>;
    P pool(MockBackend{}, PolicyDefectsHookedCapped(16 << 10, 16));
    auto idle = pool.allocate(8 << 10);
    auto big = pool.allocate(16 << 10);
    auto small = pool.allocate(4 << 10);
    idle.release();  // 8 KiB idle: room for 8 KiB more
    REQUIRE(pool.stats().bytes_cached == 8 << 10);
    // While the caps judge the 16 KiB release (refused: it does not fit),
    // a 4 KiB release on another stripe (it fits) asks them.
    policy_defects_admit_hook = [&] { std::thread([&] { small.release(); }).join(); };
    big.release();
    const auto s = pool.stats();
    CHECK(s.evictions == 1);                               // the 16 KiB buffer only
    CHECK(s.bytes_cached == (8 << 10) + (4 << 10));        // the 4 KiB buffer was kept
    CHECK(s.bytes_cached <= pool.limits().max_cached_bytes());
}
