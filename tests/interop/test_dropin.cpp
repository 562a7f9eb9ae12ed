// clpool::Buffer and the C pair: pooled where cl::Buffer stands, returned when the driver deletes it.
#define CLPOOL_DROPIN_IMPLEMENTATION
#include <clpool/interop/dropin.hpp>

#include "opencl_env.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

// Each test case uses its own context, so pools and counts start empty.
struct Fresh {
    OpenCLEnv& env = OpenCLEnv::get();
    cl::Context context;
    cl::CommandQueue queue;
    Fresh() {
        cl_int err = CL_SUCCESS;
        cl_device_id d = env.device();
        context = cl::Context(clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err), false);
        REQUIRE(err == CL_SUCCESS);
        queue = cl::CommandQueue(clCreateCommandQueue(context(), d, 0, &err), false);
        REQUIRE(err == CL_SUCCESS);
    }
    PoolStats stats(cl_mem_flags flags = CL_MEM_READ_WRITE) const {
        auto s = dropin_stats(context, flags);
        REQUIRE(s.has_value());
        return *s;
    }
    // The bucket comes back from a driver callback: give the driver a moment.
    bool wait_cached(std::size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE) const {
        for (int i = 0; i < 200; ++i) {
            if (stats(flags).bytes_cached >= bytes) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return false;
    }
};

std::size_t mem_size(const cl::Buffer& b) { return b.getInfo<CL_MEM_SIZE>(); }

}  // namespace

TEST_CASE("clpool::Buffer stands where cl::Buffer stands: setArg, enqueue, CL_MEM_SIZE") {
    Fresh f;
    cl_int err = CL_SUCCESS;
    clpool::Buffer buf(f.context, CL_MEM_READ_WRITE, 1000 * sizeof(int), nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    CHECK(mem_size(buf) == 1000 * sizeof(int));  // the size asked for, not the 4 KiB bucket

    cl::Program program(f.context,
                        "__kernel void iota(__global int* out) { int i = get_global_id(0); out[i] = 3 * i; }");
    REQUIRE(program.build() == CL_SUCCESS);
    cl::Kernel kernel(program, "iota");
    REQUIRE(kernel.setArg(0, buf) == CL_SUCCESS);
    REQUIRE(f.queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(1000)) == CL_SUCCESS);
    std::vector<int> out(1000, -1);
    REQUIRE(f.queue.enqueueReadBuffer(buf, CL_TRUE, 0, out.size() * sizeof(int), out.data()) == CL_SUCCESS);
    CHECK(out[0] == 0);
    CHECK(out[999] == 2997);
    // The driver enforces the asked size.
    CHECK(f.queue.enqueueReadBuffer(buf, CL_TRUE, 3996, 8, out.data()) == CL_INVALID_VALUE);

    const auto s = f.stats();
    CHECK(s.misses == 1);
    CHECK(s.bytes_in_use == 4096);
    CHECK(s.bytes_requested == 4000);
}

TEST_CASE("a destroyed clpool::Buffer goes back to its pool and the next one of the bucket is a hit") {
    Fresh f;
    { clpool::Buffer a(f.context, CL_MEM_READ_WRITE, 3000); }
    REQUIRE(f.wait_cached(4096));
    clpool::Buffer b(f.context, CL_MEM_READ_WRITE, 2500);
    CHECK(mem_size(b) == 2500);
    const auto s = f.stats();
    CHECK(s.hits == 1);
    CHECK(s.misses == 1);
    CHECK(s.bytes_cached == 0);
}

TEST_CASE("copies share the buffer: it returns only when the last copy, sliced ones too, is gone") {
    Fresh f;
    cl::Buffer sliced;
    {
        clpool::Buffer a(f.context, CL_MEM_READ_WRITE, 5000);
        clpool::Buffer copy = a;
        sliced = a;  // a plain cl::Buffer now shares it
        CHECK(copy() == a());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(f.stats().bytes_cached == 0);  // still referenced by `sliced`
    CHECK(f.stats().bytes_in_use == 8192);
    sliced = cl::Buffer();
    CHECK(f.wait_cached(8192));
}

TEST_CASE("reuse is ordered on one in-order queue: a queued write lands before the next owner reads") {
    // Drivers differ in when a released buffer's destructor callback runs.
    // NVIDIA waits for the commands that use it, so the bucket comes back only
    // once the gate opens. PoCL runs it while a command still waits, so the
    // bucket comes back early; then the in-order queue must still order the
    // old owner's write before the new owner's read (docs/DROPIN.md). Either
    // way the new owner must read the old owner's bytes, never stale ones.
    Fresh f;
    cl_int err = CL_SUCCESS;
    cl::UserEvent gate(f.context, &err);
    REQUIRE(err == CL_SUCCESS);
    std::vector<unsigned char> pattern(8192, 0x5a);
    {
        clpool::Buffer a(f.context, CL_MEM_READ_WRITE, 8192);
        std::vector<cl::Event> wait{gate};
        REQUIRE(f.queue.enqueueWriteBuffer(a, CL_FALSE, 0, pattern.size(), pattern.data(), &wait) == CL_SUCCESS);
        f.queue.flush();
    }
    const bool early = f.wait_cached(8192);  // ~1 s: PoCL hands it back before the gate opens
    if (!early) {
        // The driver holds the buffer while its write waits: nothing to race.
        CHECK(f.stats().bytes_cached == 0);
        REQUIRE(gate.setStatus(CL_COMPLETE) == CL_SUCCESS);
        REQUIRE(f.wait_cached(8192));
    }
    const std::string when = early ? "before" : "after";
    MESSAGE("released buffer came back " << when << " its queued write ran");
    clpool::Buffer b(f.context, CL_MEM_READ_WRITE, 8192);
    CHECK(f.stats().hits == 1);  // the same bucket
    std::vector<unsigned char> back(8192, 0);
    cl::Event read_done;
    REQUIRE(f.queue.enqueueReadBuffer(b, CL_FALSE, 0, back.size(), back.data(), nullptr, &read_done) == CL_SUCCESS);
    if (early) REQUIRE(gate.setStatus(CL_COMPLETE) == CL_SUCCESS);
    REQUIRE(read_done.wait() == CL_SUCCESS);
    CHECK(back == pattern);  // the read ran after the old owner's write
}

TEST_CASE("CL_MEM_COPY_HOST_PTR and CL_MEM_USE_HOST_PTR pass through to the driver") {
    Fresh f;
    std::vector<unsigned char> data(6000);
    std::iota(data.begin(), data.end(), static_cast<unsigned char>(1));
    for (int round = 0; round < 2; ++round) {
        for (auto& x : data) x = static_cast<unsigned char>(x + 17);
        clpool::Buffer b(f.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, data.size(), data.data());
        std::vector<unsigned char> back(data.size());
        REQUIRE(f.queue.enqueueReadBuffer(b, CL_TRUE, 0, back.size(), back.data()) == CL_SUCCESS);
        CHECK(back == data);
        CHECK(mem_size(b) == data.size());
        CHECK(b.getInfo<CL_MEM_ASSOCIATED_MEMOBJECT>()() == nullptr);  // the driver's own buffer, not a bucket's
    }
    CHECK_FALSE(dropin_stats(f.context, CL_MEM_READ_ONLY).has_value());  // no pool was made for them

    std::array<char, 4096> host{};
    clpool::Buffer u(f.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, host.size(), host.data());
    CHECK(u.getInfo<CL_MEM_HOST_PTR>() == host.data());
    CHECK_FALSE(dropin_stats(f.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR).has_value());
}

TEST_CASE("poolable: the calls a pool serves unseen, and those left to the driver") {
    using clpool::detail::poolable;
    int data = 0;
    CHECK(poolable(CL_MEM_READ_WRITE, 64, nullptr));
    CHECK(poolable(0, 64, nullptr));  // flags 0 is CL_MEM_READ_WRITE
    CHECK(poolable(CL_MEM_READ_ONLY | CL_MEM_HOST_NO_ACCESS | CL_MEM_ALLOC_HOST_PTR, 1, nullptr));
    CHECK(poolable(CL_MEM_WRITE_ONLY | CL_MEM_COPY_HOST_PTR, 4, &data));
    CHECK_FALSE(poolable(CL_MEM_READ_WRITE, 0, nullptr));                            // size 0: the driver's error
    CHECK_FALSE(poolable(CL_MEM_READ_WRITE, 64, &data));                             // host_ptr without a copy flag
    CHECK_FALSE(poolable(CL_MEM_COPY_HOST_PTR, 4, nullptr));                         // copy from nothing
    CHECK_FALSE(poolable(CL_MEM_COPY_HOST_PTR | CL_MEM_HOST_NO_ACCESS, 4, &data));  // the copy is a write
    CHECK_FALSE(poolable(CL_MEM_USE_HOST_PTR, 4, &data));
    CHECK_FALSE(poolable(CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, nullptr));
    CHECK_FALSE(poolable(CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY, 64, nullptr));
    CHECK_FALSE(poolable(cl_mem_flags{1} << 40, 64, nullptr));  // a flag clpool does not know
}

TEST_CASE("invalid arguments get the driver's own errors") {
    Fresh f;
    cl_int err = CL_SUCCESS;
    clpool::Buffer zero(f.context, CL_MEM_READ_WRITE, 0, nullptr, &err);
    CHECK(err == CL_INVALID_BUFFER_SIZE);
    CHECK(zero() == nullptr);
    clpool::Buffer both(f.context, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, nullptr, &err);
    CHECK(err == CL_INVALID_VALUE);
    clpool::Buffer no_ptr(f.context, CL_MEM_COPY_HOST_PTR, 64, nullptr, &err);
    CHECK(err == CL_INVALID_HOST_PTR);
}

TEST_CASE("the C pair creates through the pools and releases back to them") {
    Fresh f;
    cl_int err = CL_INVALID_VALUE;
    cl_mem m = clpool_create_buffer(f.context(), CL_MEM_WRITE_ONLY, 10000, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    REQUIRE(m != nullptr);
    std::size_t size = 0;
    REQUIRE(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, nullptr) == CL_SUCCESS);
    CHECK(size == 10000);
    CHECK(clpool_release_buffer(m) == CL_SUCCESS);
    REQUIRE(f.wait_cached(16384, CL_MEM_WRITE_ONLY));
    m = clpool_create_buffer(f.context(), CL_MEM_WRITE_ONLY, 9000, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    CHECK(f.stats(CL_MEM_WRITE_ONLY).hits == 1);
    CHECK(clpool_release_buffer(m) == CL_SUCCESS);
    CHECK(clpool_create_buffer(f.context(), CL_MEM_READ_WRITE, 0, nullptr, &err) == nullptr);
    CHECK(err == CL_INVALID_BUFFER_SIZE);
}

// A pooled CL_MEM_COPY_HOST_PTR buffer would need its data written on a queue of the drop-in's
// own, which nothing orders after the commands the bucket's old owner still has queued (PoCL
// hands a bucket back while they wait): the old owner's gated write would land on top of the new
// owner's data. Such buffers go to the driver, as with cl::Buffer.
TEST_CASE("a pooled CL_MEM_COPY_HOST_PTR buffer keeps its data when the bucket's old owner had a queued write") {
    Fresh f;
    cl_int err = CL_SUCCESS;
    cl::UserEvent gate(f.context, &err);
    REQUIRE(err == CL_SUCCESS);
    const std::vector<unsigned char> old_bytes(8192, 0x5a);
    {
        clpool::Buffer a(f.context, CL_MEM_READ_WRITE, 8192);
        std::vector<cl::Event> wait{gate};
        REQUIRE(f.queue.enqueueWriteBuffer(a, CL_FALSE, 0, old_bytes.size(), old_bytes.data(), &wait) == CL_SUCCESS);
        f.queue.flush();
    }
    const bool early = f.wait_cached(8192, CL_MEM_READ_WRITE);
    if (!early) {
        // A driver that holds the bucket until the write ran has nothing to race.
        REQUIRE(gate.setStatus(CL_COMPLETE) == CL_SUCCESS);
        REQUIRE(f.wait_cached(8192, CL_MEM_READ_WRITE));
    }
    std::vector<unsigned char> mine(8192, 0xc3);
    clpool::Buffer b(f.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, mine.size(), mine.data(), &err);
    REQUIRE(err == CL_SUCCESS);
    if (auto s = dropin_stats(f.context, CL_MEM_READ_WRITE); s && s->hits == 1)
        MESSAGE("the COPY_HOST_PTR buffer took the old owner's bucket (bucket came back "
                << std::string(early ? "before" : "after") << " its queued write ran)");
    std::vector<unsigned char> back(8192, 0);
    cl::Event read_done;
    REQUIRE(f.queue.enqueueReadBuffer(b, CL_FALSE, 0, back.size(), back.data(), nullptr, &read_done) == CL_SUCCESS);
    if (early) REQUIRE(gate.setStatus(CL_COMPLETE) == CL_SUCCESS);
    REQUIRE(read_done.wait() == CL_SUCCESS);
    CHECK_MESSAGE(back == mine,
                  "first byte read back: " << int(back[0]) << " (own data 195 = 0xc3, old owner's 90 = 0x5a)");
}

// Each pool holds its context (and a queue and buffers in it), so pools kept for the process
// kept every context alive: a program that makes and releases contexts one after another grew
// by a context per round. The drop-in keeps the pools of a bounded number of contexts, the
// least recently used let go first.
TEST_CASE("contexts made and released one after another are freed: the drop-in keeps a bounded number") {
    OpenCLEnv& env = OpenCLEnv::get();
    // OpenCL 3.0's clSetContextDestructorCallback, which the headers hide below CL_TARGET_OPENCL_VERSION 300.
    using set_destructor_fn = cl_int(CL_API_CALL*)(cl_context, void(CL_CALLBACK*)(cl_context, void*), void*);
    const auto set_destructor =
        reinterpret_cast<set_destructor_fn>(dlsym(RTLD_DEFAULT, "clSetContextDestructorCallback"));
    REQUIRE_MESSAGE(bool(set_destructor), "the OpenCL loader has no clSetContextDestructorCallback (3.0)");
    static std::atomic<int> destroyed{0};
    destroyed = 0;
    Fresh busy;  // a context with a buffer out: never let go, so its bucket never goes back to a freed pool
    auto kept = std::make_unique<clpool::Buffer>(busy.context, CL_MEM_READ_WRITE, 1000);
    constexpr int rounds = 40;
    for (int i = 0; i < rounds; ++i) {
        cl_int err = CL_SUCCESS;
        cl_device_id d = env.device();
        cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        REQUIRE(err == CL_SUCCESS);
        REQUIRE(set_destructor(ctx, [](cl_context, void*) { destroyed.fetch_add(1); }, nullptr) == CL_SUCCESS);
        {
            cl::Context context(ctx, true);
            clpool::Buffer b(context, CL_MEM_READ_WRITE, 4096, nullptr, &err);
            REQUIRE(err == CL_SUCCESS);
            REQUIRE(dropin_stats(context, CL_MEM_READ_WRITE).has_value());  // pooled
        }
        REQUIRE(clReleaseContext(ctx) == CL_SUCCESS);  // the application's last reference
    }
    // Buckets come back from driver callbacks, which may run late: wait for them.
    const int bound = static_cast<int>(detail::dropin_pools::max_contexts);
    for (int i = 0; i < 400 && destroyed.load() < rounds - bound; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(destroyed.load() >= rounds - bound);
    CHECK(detail::dropin_pools::instance().contexts_held() <= detail::dropin_pools::max_contexts);
    REQUIRE(dropin_stats(busy.context, CL_MEM_READ_WRITE).has_value());  // kept all along
    CHECK(busy.stats().bytes_in_use == 1024);
    kept.reset();
    CHECK(busy.wait_cached(1024));  // back in its pool
}
