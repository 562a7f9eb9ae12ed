// Out of memory: give the cache back, retry once, then a typed error; nothing leaks.
#include "pool_factory.hpp"

#include <doctest/doctest.h>

#include <new>
#include <string>
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
    // Before, the node was made after the driver allocation: the miss was
    // counted, the buffer freed again, and no failure counted, so misses
    // exceeded kept driver allocations + failed allocations.
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
