// snapshot_all(): the process-wide pools (host pools, registry pools) in one snapshot, each agreeing with its stats.
#include "opencl_env.hpp"

#include <clpool/clpool.hpp>
#include <clpool/pools/process_snapshot.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

using namespace clpool;

namespace {

const BufferInfo* find_tag(const ProcessSnapshot& s, const std::string& prefix, const std::string& tag) {
    for (const auto& p : s.pools) {
        if (p.pool.rfind(prefix, 0) != 0) continue;
        for (const auto& b : p.buffers)
            if (b.tag == tag) return &b;
    }
    return nullptr;
}

}  // namespace

TEST_CASE("snapshot_all lists the host pools and the registry pools, each agreeing with its stats") {
    auto h = get_host_buffer_pool().allocate(3000);
    h.set_tag("process-snapshot-host");
#ifdef CLPOOL_HAS_OPENCL
    auto d = get_buffer_pool(test::OpenCLEnv::get().queue).allocate(5000);
    d.set_tag("process-snapshot-device");
#endif
    const ProcessSnapshot s = snapshot_all();
    const BufferInfo* hb = find_tag(s, "host::BufferPool:host", "process-snapshot-host");
    REQUIRE(hb);
    CHECK(hb->state == BufferState::in_use);
    CHECK(hb->bytes_requested == 3000);
#ifdef CLPOOL_HAS_OPENCL
    const BufferInfo* db = find_tag(s, "BufferPool:opencl (context ", "process-snapshot-device");
    REQUIRE(db);
    CHECK(db->bytes_held == 8192);
#endif
    for (const auto& p : s.pools) {
        std::size_t held = 0;
        for (const auto& b : p.buffers) held += b.bytes_held;
        CHECK(held == p.stats.bytes_allocated);
    }
}
