// Out of memory: give the cache back, retry once, then a typed error whose report says what was
// given back, at a cost that does not grow with the history; nothing leaks.
#include "alloc_counter.hpp"
#include "pool_factory.hpp"
#include "sanitizers.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace clpool;
using namespace clpool::test;

using MockBufferPool = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, MockBackend>;

namespace {
// While set, the pool's next node allocation on this thread fails: the
// memory type's default constructor, which `new` of the node runs, throws
// std::bad_alloc as operator new does when the host is out of memory.
thread_local bool node_allocation_fails = false;

class NodeFailingMemory : public MockMemory {
public:
    NodeFailingMemory() {
        if (node_allocation_fails) throw std::bad_alloc();
    }
    explicit NodeFailingMemory(MockMemory m) noexcept : MockMemory(std::move(m)) {}
};

struct NodeFailingBackend : MockBackend {
    using memory_type = NodeFailingMemory;
    using MockBackend::MockBackend;
    Allocation<NodeFailingMemory> allocate(std::size_t n, MemoryKind k) noexcept {
        auto r = MockBackend::allocate(n, k);
        return {NodeFailingMemory(std::move(r.memory)), r.status, r.native_code};
    }
};
static_assert(Backend<NodeFailingBackend>);
}  // namespace

TEST_CASE("no host memory for the node on a miss: std::bad_alloc, a failed allocation, no driver allocation") {
    // The node is made before the driver allocation: made after, the miss
    // would be counted, the buffer freed again, and no failure counted, so
    // misses would exceed kept driver allocations + failed allocations.
    auto ledger = std::make_shared<Ledger>();
    Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex, NodeFailingBackend> pool{NodeFailingBackend(ledger)};
    node_allocation_fails = true;
    CHECK_THROWS_AS((void)pool.allocate(1000), std::bad_alloc);
    node_allocation_fails = false;
    auto s = pool.stats();
    CHECK(s.misses == 1);
    CHECK(s.failed_allocations == 1);
    CHECK(ledger->attempts == 0);  // the node comes first: the driver was not asked
    CHECK(s.misses == static_cast<std::uint64_t>(ledger->live.load()) + s.failed_allocations);
    CHECK(s.bytes_allocated == 0);
    // The pool works again once the host does.
    auto h = pool.allocate(1000);
    CHECK(h);
    s = pool.stats();
    CHECK(s.misses == 2);
    CHECK(s.failed_allocations == 1);
    CHECK(s.misses == static_cast<std::uint64_t>(ledger->live.load()) + s.failed_allocations);
}

TEST_CASE("a driver out-of-memory is answered by trimming the cache and retrying once") {
    auto ledger = std::make_shared<Ledger>();
    {
        MockBufferPool pool{MockBackend(ledger)};
        // Fill the cache: three 1 MiB buffers, released.
        std::vector<MockBufferPool::handle> hs;
        for (int i = 0; i < 3; ++i) hs.push_back(pool.allocate(1 << 20));
        hs.clear();
        CHECK(ledger->live == 3);

        // The device has room for the cache plus nothing: a 2 MiB request fails until the cache is gone.
        ledger->capacity = 3 << 20;
        auto h = pool.allocate(2 << 20);
        CHECK(h.bucket_size() == (2u << 20));
        const auto s = pool.stats();
        CHECK(s.oom_retries == 1);
        CHECK(s.bytes_cached == 0);
        CHECK(s.driver_frees == 3);
        CHECK(s.bytes_allocated == (2u << 20));
        CHECK(ledger->live == 1);
    }
    CHECK(ledger->live == 0);
}

TEST_CASE("when the retry fails too, out_of_memory says what was asked, what is held and the driver code") {
    auto ledger = std::make_shared<Ledger>();
    {
        MockBufferPool pool{MockBackend(ledger)};
        auto kept = pool.allocate(4096);  // in use: trimming cannot free it
        pool.allocate(8192).release();    // cached: trimming frees it
        ledger->fail_from = ledger->attempts.load();
        ledger->fail_count = 2;
        try {
            (void)pool.allocate(100'000);
            FAIL("expected out_of_memory");
        } catch (const out_of_memory& e) {
            CHECK(e.requested() == 100'000);
            CHECK(e.pool_held() == 4096);
            CHECK(e.native_code() == MockBackend::oom_code);
            const std::string what = e.what();
            CHECK(what.find("100000") != std::string::npos);
            CHECK(what.find("4096") != std::string::npos);
            CHECK(what.find("-4") != std::string::npos);
            const std::bad_alloc& as_bad_alloc = e;  // catchable as std::bad_alloc
            CHECK(as_bad_alloc.what() == e.what());
        }
        const auto s = pool.stats();
        CHECK(s.oom_retries == 1);
        CHECK(s.failed_allocations == 1);
        CHECK(s.bytes_allocated == 4096);
        CHECK(s.bytes_in_use == 4096);
        CHECK(ledger->live == 1);

        // try_allocate reports the same failure without throwing.
        ledger->fail_from = ledger->attempts.load();
        CHECK_FALSE(pool.try_allocate(100'000));
        // And the pool works again once the driver does.
        CHECK(pool.allocate(100'000));
    }
    CHECK(ledger->live == 0);
}

TEST_CASE("a backend failure that is not out-of-memory is a driver_error with the code, no retry") {
    struct FailingBackend : MockBackend {
        FailingBackend() : MockBackend(nullptr) {}
        Allocation<MockMemory> allocate(std::size_t, MemoryKind) noexcept {
            return {MockMemory{}, AllocStatus::failed, -61};  // CL_INVALID_BUFFER_SIZE
        }
    };
    Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, FailingBackend> pool{FailingBackend()};
    try {
        (void)pool.allocate(10);
        FAIL("expected driver_error");
    } catch (const driver_error& e) {
        CHECK(e.native_code() == -61);
    }
    CHECK(pool.stats().oom_retries == 0);
}

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("the OpenCL backend commits memory at allocation and maps driver codes") {
    CHECK(opencl::is_out_of_memory(CL_MEM_OBJECT_ALLOCATION_FAILURE));
    CHECK(opencl::is_out_of_memory(CL_OUT_OF_RESOURCES));
    CHECK(opencl::is_out_of_memory(CL_OUT_OF_HOST_MEMORY));
    CHECK_FALSE(opencl::is_out_of_memory(CL_INVALID_BUFFER_SIZE));
    OpenCLBackend backend(OpenCLEnv::get().context);
    for (auto kind : {MemoryKind::device_local, MemoryKind::host_pinned}) {
        auto r = backend.allocate(1 << 16, kind);
        REQUIRE(r.status == AllocStatus::ok);
        cl_mem_flags flags = 0;
        REQUIRE(clGetMemObjectInfo(r.memory(), CL_MEM_FLAGS, sizeof flags, &flags, nullptr) == CL_SUCCESS);
        CHECK(((flags & CL_MEM_ALLOC_HOST_PTR) != 0) == (kind == MemoryKind::host_pinned));
        CHECK((flags & CL_MEM_READ_WRITE) != 0);
    }
    // A size the driver refuses outright is a failure with the driver's code, not a crash.
    auto r = backend.allocate(0, MemoryKind::device_local);
    CHECK(r.status == AllocStatus::failed);
    CHECK(r.native_code == CL_INVALID_BUFFER_SIZE);
}
#endif

// A sub-allocating pool gives its cache back to the arena before it asks the driver for a new
// segment (Pool::obtain), so by the out-of-memory retry's trim nothing is left cached. The report
// must still count what the pool gave back on the way, not "0 bytes".
TEST_CASE("out_of_memory of a sub-allocating pool counts the cache it gave back before the retry") {
    using P = MockArenaPool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    ledger->capacity = 65536;  // one large segment
    P pool(SubAllocated<MockBackend>(MockBackend(ledger), small_arena_options()));
    pool.allocate(40000).release();  // a cached block of 40960 bytes
    REQUIRE(pool.stats().bytes_cached == 40960);
    std::string what;
    try {
        (void)pool.allocate(70000);  // a segment of its own, which the device cannot hold
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("given back before the retry: 40960 bytes") != std::string::npos);
}

// Out-of-memories on two threads at once (two pools here) both write the CLPOOL_OOM_SNAPSHOT
// dump and both say "snapshot written to": the file must hold one whole snapshot, never a
// short one written over the start of a longer one, leaving its tail after it.
TEST_CASE("CLPOOL_OOM_SNAPSHOT: out-of-memories on two threads at once leave one whole snapshot") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    const char* path = "clpool_test_oom_snapshot_race.json";
    ::setenv("CLPOOL_OOM_SNAPSHOT", path, 1);
    auto la = std::make_shared<Ledger>(), lb = std::make_shared<Ledger>();
    P a{MockBackend(la)}, b{MockBackend(lb)};
    std::vector<P::handle> ka, kb;
    for (std::size_t i = 0; i < 200; ++i) ka.push_back(a.allocate(100 + i));  // a long snapshot
    kb.push_back(b.allocate(100));  // a short one
    la->capacity = la->live_bytes.load();  // the devices are full
    lb->capacity = lb->live_bytes.load();
    int bad = 0;
    for (int round = 0; round < 300 && bad == 0; ++round) {
        std::thread ta([&] {
            for (int i = 0; i < 5; ++i) (void)a.try_allocate(1 << 20);
        });
        std::thread tb([&] {
            for (int i = 0; i < 5; ++i) (void)b.try_allocate(1 << 20);
        });
        ta.join();
        tb.join();
        std::FILE* f = std::fopen(path, "rb");
        REQUIRE(f);
        std::string text(1 << 20, '\0');
        text.resize(std::fread(text.data(), 1, text.size(), f));
        std::fclose(f);
        const auto end = text.find("]}\n");  // the end of the top-level object: the file's end
        bad += end == std::string::npos || end + 3 != text.size();
    }
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
    std::remove(path);
    CHECK(bad == 0);
}

#if CLPOOL_TEST_COUNTS_NEW
// out_of_memory's report shows the largest live buffers, not the history: without
// CLPOOL_OOM_SNAPSHOT (the dump, which carries the history) it must not copy every ring under the
// pool's locks, merge them and name each event's call site, so its cost does not grow with the
// 4096 events recorded here (their frames).
TEST_CASE("out_of_memory without CLPOOL_OOM_SNAPSHOT does not gather the history it does not report") {
    using P = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, SingleMutex>;
    ::unsetenv("CLPOOL_OOM_SNAPSHOT");
    auto ledger = std::make_shared<Ledger>();
    P pool{MockBackend(ledger)};
    constexpr std::size_t oom_history_events = 4096;
    pool.record_history(oom_history_events, CallSites::on);
    for (std::size_t i = 0; i < oom_history_events; ++i) pool.allocate(1000).release();
    auto kept = pool.allocate(1000);
    ledger->capacity = ledger->live_bytes.load();  // the device is full
    std::string what;
    std::size_t allocations = 0;
    {
        CountAllocations counting;
        try {
            (void)pool.allocate(1 << 20);
        } catch (const out_of_memory& e) {
            what = e.what();
        }
        allocations = counting.count();
    }
    INFO(what);
    CHECK(what.find("largest live buffers:") != std::string::npos);  // the report is still made
    CHECK(allocations < oom_history_events / 4);
    REQUIRE(pool.snapshot().history);  // a snapshot still carries it
    CHECK(pool.snapshot().history->events.size() == oom_history_events);
}
#endif

// An arena that runs out of room with most of its segment free in holes: the report must show the
// segments, their free bytes and the largest free block (what fragmentation() is made of), not
// only the buckets' rounding and the pool's idle buffers, which are both zero here.
TEST_CASE("out_of_memory of an arena pool reports its segments, their free bytes and the largest free block") {
    using P = MockArenaPool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex>;
    auto ledger = std::make_shared<Ledger>();
    constexpr std::size_t seg = 2u << 20;
    ledger->capacity = static_cast<long>(seg);  // one small segment
    ArenaOptions o;
    o.min_segment = seg;  // a full small segment at once
    P pool(SubAllocated<MockBackend>(MockBackend(ledger), o));
    constexpr std::size_t quarter = seg / 4;
    std::vector<P::handle> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(pool.allocate(quarter));
    hs[0].release();
    hs[1].release();
    hs[3].release();  // holes of 1 MiB and 512 KiB around the one live block
    std::string what;
    try {
        (void)pool.allocate(seg - quarter);  // 1.5 MiB: fits no hole, and no second segment fits the device
        FAIL("expected out_of_memory");
    } catch (const out_of_memory& e) {
        what = e.what();
    }
    INFO(what);
    const PoolStats s = pool.stats();
    REQUIRE(s.segments == 1);
    REQUIRE(s.segment_free_bytes == seg - quarter);
    REQUIRE(s.largest_free_block == 2 * quarter);
    CHECK(s.fragmentation() > 0.3);
    CHECK(what.find("segments: 1, " + std::to_string(seg) + " bytes, " + std::to_string(seg - quarter) +
                    " bytes free (75%), largest free block " + std::to_string(2 * quarter) + " bytes") !=
          std::string::npos);
    CHECK(what.find("fragmentation: 33% of the free bytes") != std::string::npos);
    CHECK(what.find("fragmentation: 0 bytes") == std::string::npos);  // the rounding is not called that here
}
