// HostBackend's alignment: every buffer a pool over it hands out starts at a multiple of it,
// whole allocations and blocks carved by SubAllocated alike; the default's rule under the arena.
#include <clpool/clpool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace clpool;

namespace {
std::uintptr_t carved_address(const HostRange& r) { return reinterpret_cast<std::uintptr_t>(r.data()); }
std::uintptr_t carved_address(const HostMemory& m) { return reinterpret_cast<std::uintptr_t>(m.data()); }
}  // namespace

TEST_CASE("host::ArenaPool over HostBackend(alignment): every carved block starts at a multiple of it") {
    for (const std::size_t alignment : {std::size_t{4096}, std::size_t{65536}}) {
        CAPTURE(alignment);
        ArenaOptions full;  // full-size segments from the start: the small blocks share one
        full.min_segment = full.large_segment;
        host::ArenaPool pool{SubAllocated<HostBackend>(HostBackend(alignment), full)};
        CHECK(pool.backend().granularity() == alignment);
        std::vector<host::ArenaPool::handle> live;
        // Small blocks share a segment; odd sizes, so that unaligned rounding would show.
        for (const std::size_t n : {1u, 100u, 513u, 4097u, 3000u, 70000u, 12u, 2u << 20, 5u << 20, 11u << 20})
            live.push_back(pool.allocate(n));
        for (const auto& h : live) {
            CAPTURE(h.nbytes());
            CHECK(carved_address(h.buffer()) % alignment == 0);
        }
        const auto stats = pool.stats();
        CHECK(stats.segments < live.size());  // carved, not a whole allocation each
    }
}

TEST_CASE("HostBackend(): whole allocations page-aligned; under the arena, blocks at the arena's granularity") {
    HostBackend host;
    CHECK(host.alignment() == 4096);
    auto m = host.allocate(100, MemoryKind::device_local);
    REQUIRE(m.status == AllocStatus::ok);
    CHECK(carved_address(m.memory) % 4096 == 0);
    // As an OpenCL device's sub-buffers: 512-byte blocks (ArenaOptions::granularity), not pages.
    host::ArenaPool pool{HostBackend{}};
    CHECK(pool.backend().granularity() == 512);
    auto a = pool.allocate(100);
    auto b = pool.allocate(100);
    CHECK(carved_address(a.buffer()) % 512 == 0);
    CHECK(carved_address(b.buffer()) % 512 == 0);
    const auto gap = carved_address(a.buffer()) > carved_address(b.buffer())
                         ? carved_address(a.buffer()) - carved_address(b.buffer())
                         : carved_address(b.buffer()) - carved_address(a.buffer());
    CHECK(gap == 512);  // neighbours in one segment
}

TEST_CASE(
    "HostBackend(alignment) under the arena: an alignment that is not a power of two is a config_error naming "
    "it") {
    try {
        host::ArenaPool pool{HostBackend(3000)};
        FAIL("no error");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("3000") != std::string::npos);
    }
}
