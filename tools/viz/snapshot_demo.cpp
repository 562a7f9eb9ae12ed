// snapshot_demo: writes the snapshot of a small host pool (buffers in use with tags, cached ones, its history with call sites) and of a host arena (segments with holes), for clpool-viz's tests.
// With --pending-completed: one 1 MiB buffer released after an event that completes before the snapshot.
#include <clpool/diagnostics/snapshot_json.hpp>
#include <clpool/pools/aliases.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

// Host memory with events that complete when told: the host backend has none, and an OpenCL
// device is not everywhere the report is tested.
struct EventHostBackend : clpool::HostBackend {
    EventHostBackend() = default;
    using event_type = std::shared_ptr<std::atomic<bool>>;
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::events;
    static bool event_complete(const event_type& e) noexcept { return e->load(); }
    static void wait_for(const event_type* events, std::size_t count) noexcept {
        for (std::size_t i = 0; i < count; ++i)
            while (!events[i]->load()) std::this_thread::yield();
    }
};

// Allocate, release_after an event, the event completes (as after queue.finish()), snapshot:
// the snapshot finds the buffer cached, and no event of the history says it moved.
int pending_completed(const char* path) {
    clpool::BasicBufferPool<EventHostBackend> pool{EventHostBackend{}};
    pool.record_history(64);
    auto h = pool.allocate(std::size_t{1} << 20);
    const auto done = std::make_shared<std::atomic<bool>>(false);
    h.release_after(&done, 1);
    done->store(true);
    clpool::ProcessSnapshot snap;
    snap.pools.push_back(pool.snapshot());
    snap.taken_ns = snap.pools.back().taken_ns;
    if (!clpool::write_snapshot(path, snap)) {
        std::fprintf(stderr, "snapshot_demo: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

}  // namespace

// Named, and exported (the target links with -rdynamic), so that call sites name it.
[[gnu::noinline]] void snapshot_demo_fill(clpool::host::BufferPool& pool,
                                          std::vector<clpool::host::BufferPool::handle>& live) {
    const char* tags[] = {"weights", "activations", "kv-cache", nullptr};
    for (std::size_t i = 0; i < 12; ++i) {
        live.push_back(pool.allocate((std::size_t{1} << (10 + i % 7)) + 100 * i));
        live.back().set_tag(tags[i % 4]);
    }
}

int main(int argc, char** argv) {
    if (argc == 3 && std::strcmp(argv[1], "--pending-completed") == 0) return pending_completed(argv[2]);
    if (argc != 2) {
        std::fprintf(stderr, "usage: snapshot_demo [--pending-completed] out.json\n");
        return 2;
    }
    clpool::host::BufferPool pool{clpool::HostBackend{}};
    pool.record_history(64, clpool::CallSites::on);  // 30 events: none dropped
    std::vector<clpool::host::BufferPool::handle> live;
    snapshot_demo_fill(pool, live);
    for (std::size_t i = 0; i < 5; ++i) pool.allocate(3000 + i).release();  // one cached 4 KiB buffer
    std::vector<clpool::host::BufferPool::handle> gone;
    for (std::size_t i = 0; i < 4; ++i) gone.push_back(pool.allocate(20000 * (i + 1)));
    gone.clear();  // cached
    // A host arena: blocks carved from one 2 MiB segment; three go back to it (holes), three stay cached.
    clpool::host::ArenaPool arena{clpool::HostBackend{}};
    std::vector<clpool::host::ArenaPool::handle> carved;
    for (std::size_t i = 0; i < 10; ++i) carved.push_back(arena.allocate(40000 + 25000 * (i % 4)));
    for (std::size_t i : {1u, 4u, 7u}) carved[i].release();
    arena.trim();  // their blocks go back to the segment: free holes between blocks in use
    carved[8].release();
    arena.allocate(3000).release();  // carved into a hole, then cached
    arena.allocate(5000).release();
    clpool::ProcessSnapshot snap;
    snap.pools.push_back(pool.snapshot());
    snap.pools.push_back(arena.snapshot());
    snap.taken_ns = snap.pools.back().taken_ns;
    if (!clpool::write_snapshot(argv[1], snap)) {
        std::fprintf(stderr, "snapshot_demo: cannot write %s\n", argv[1]);
        return 1;
    }
    std::printf("%zu + %zu buffers\n", snap.pools.front().buffers.size(), snap.pools.back().buffers.size());
    return 0;
}
