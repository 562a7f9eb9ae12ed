// snapshot_demo: writes the snapshot of a small host pool (buffers in use with tags, cached ones, its history with call sites), for clpool-viz's tests.
#include <clpool/core/snapshot_json.hpp>
#include <clpool/pools/aliases.hpp>

#include <cstdio>
#include <vector>

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
    if (argc != 2) {
        std::fprintf(stderr, "usage: snapshot_demo out.json\n");
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
    clpool::ProcessSnapshot snap;
    snap.pools.push_back(pool.snapshot());
    snap.taken_ns = snap.pools.back().taken_ns;
    if (!clpool::write_snapshot(argv[1], snap)) {
        std::fprintf(stderr, "snapshot_demo: cannot write %s\n", argv[1]);
        return 1;
    }
    std::printf("%zu buffers\n", snap.pools.back().buffers.size());
    return 0;
}
