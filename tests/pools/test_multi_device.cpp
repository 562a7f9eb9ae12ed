// Several devices: pools per (context, device), staging per device, release_pools over all of a
// context's devices. Its own binary (clpool_multi_device_tests), run by ctest with
// POCL_DEVICES="pthread pthread" so that PoCL exposes two CPU devices on one platform. Fewer than
// two devices on one platform is a failure: the binary is only run where two are configured.
#include <clpool/devices/device_handle.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/pools/registry.hpp>
#include <clpool/runtime/shutdown.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;

namespace {

// Two devices of one platform, one context over both, a queue on each; and a second context
// over the first device alone.
struct TwoDevices {
    cl_device_id dev[2] = {};
    cl::Context shared;  // both devices
    cl::CommandQueue queue[2];
    cl::Context solo;  // device 0 only
    cl::CommandQueue solo_queue;

    static TwoDevices& get() {
        static auto* env = new TwoDevices(make());  // never destroyed: no OpenCL call at exit
        return *env;
    }

private:
    static cl::CommandQueue queue_on(cl_context ctx, cl_device_id d) {
        cl_int err = CL_SUCCESS;
        cl_command_queue q = clCreateCommandQueue(ctx, d, 0, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("clCreateCommandQueue failed: " + std::to_string(err));
        return cl::CommandQueue(q, false);
    }

    static TwoDevices make() {
        cl_uint nplatforms = 0;
        clGetPlatformIDs(0, nullptr, &nplatforms);
        std::vector<cl_platform_id> platforms(nplatforms);
        if (nplatforms) clGetPlatformIDs(nplatforms, platforms.data(), nullptr);
        for (cl_platform_id p : platforms) {
            cl_uint n = 0;
            if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n < 2) continue;
            TwoDevices e;
            clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 2, e.dev, nullptr);
            cl_int err = CL_SUCCESS;
            e.shared = cl::Context(clCreateContext(nullptr, 2, e.dev, nullptr, nullptr, &err), false);
            if (err != CL_SUCCESS)
                throw std::runtime_error("clCreateContext (2 devices) failed: " + std::to_string(err));
            e.queue[0] = queue_on(e.shared(), e.dev[0]);
            e.queue[1] = queue_on(e.shared(), e.dev[1]);
            e.solo = cl::Context(clCreateContext(nullptr, 1, e.dev, nullptr, nullptr, &err), false);
            if (err != CL_SUCCESS)
                throw std::runtime_error("clCreateContext (1 device) failed: " + std::to_string(err));
            e.solo_queue = queue_on(e.solo(), e.dev[0]);
            return e;
        }
        throw std::runtime_error("no OpenCL platform with two devices (run with POCL_DEVICES=\"pthread pthread\")");
    }
};

template <class PoolT>
std::uint64_t handed_out(const PoolT& pool) {
    const PoolStats s = pool.stats();
    return s.hits + s.misses;
}

std::size_t pools_made() { return detail::context_registry<BufferPool>::instance().size(); }

}  // namespace

TEST_CASE("one context over two devices: a pool per device, each committing on its own device") {
    auto& e = TwoDevices::get();
    const std::size_t before = pools_made();
    auto& p0 = get_buffer_pool(e.queue[0]);
    auto& p1 = get_buffer_pool(e.queue[1]);
    CHECK(&p0 != &p1);
    CHECK(p0.backend().device() == e.dev[0]);
    CHECK(p1.backend().device() == e.dev[1]);
    CHECK(pools_made() == before + 2);

    // Another queue on device 1 gets device 1's pool again.
    cl_int err = CL_SUCCESS;
    cl::CommandQueue again(clCreateCommandQueue(e.shared(), e.dev[1], 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    CHECK(&get_buffer_pool(again) == &p1);

    // Each kind of pool, per device.
    CHECK(&get_pinned_pool(e.queue[0]) != &get_pinned_pool(e.queue[1]));
    CHECK(&get_persistent_pool(e.queue[0]) != &get_persistent_pool(e.queue[1]));
    CHECK(&get_mapped_pinned_pool(e.queue[0]) != &get_mapped_pinned_pool(e.queue[1]));

    // A buffer released to device 1's pool is a hit there, and nothing lands in device 0's.
    const auto cached0 = p0.stats().bytes_cached;
    p1.allocate(4096).release();
    const auto hits1 = p1.stats().hits;
    p1.allocate(4096).release();
    CHECK(p1.stats().hits == hits1 + 1);
    CHECK(p0.stats().bytes_cached == cached0);
}

TEST_CASE("two contexts on one device: separate pools") {
    auto& e = TwoDevices::get();
    auto& shared0 = get_buffer_pool(e.queue[0]);
    auto& solo0 = get_buffer_pool(e.solo_queue);
    CHECK(&shared0 != &solo0);
    CHECK(solo0.backend().device() == e.dev[0]);
    auto h = solo0.allocate(100);
    cl_context owner = nullptr;
    REQUIRE(clGetMemObjectInfo(h.buffer()(), CL_MEM_CONTEXT, sizeof owner, &owner, nullptr) == CL_SUCCESS);
    CHECK(owner == e.solo());
}

TEST_CASE("uploads to two devices at once stage through each device's own pool, and arrive whole") {
    auto& e = TwoDevices::get();
    constexpr std::size_t n = std::size_t{12} << 20;  // staged: above direct_max_bytes, several chunks
    TransferOptions o;
    o.stage = true;
    o.chunk_bytes = std::size_t{1} << 20;
    o.async = false;
    std::vector<std::vector<std::uint32_t>> src(2, std::vector<std::uint32_t>(n / 4));
    std::iota(src[0].begin(), src[0].end(), 0u);
    std::iota(src[1].begin(), src[1].end(), 0x40000000u);
    std::vector<std::vector<std::uint32_t>> back(2, std::vector<std::uint32_t>(n / 4));

    const std::uint64_t staged0 = handed_out(get_mapped_pinned_pool(e.queue[0]));
    const std::uint64_t staged1 = handed_out(get_mapped_pinned_pool(e.queue[1]));
    std::vector<std::thread> threads;
    for (int d = 0; d < 2; ++d) {
        threads.emplace_back([&, d] {
            auto dst = get_buffer_pool(e.queue[d]).allocate(n);
            upload(e.queue[d], dst, 0, src[d].data(), n, o);
            download(e.queue[d], back[d].data(), dst, 0, n, o).wait();
        });
    }
    for (auto& t : threads) t.join();
    CHECK(back[0] == src[0]);
    CHECK(back[1] == src[1]);
    // Each device's staging pool handed out its own staging buffers.
    CHECK(handed_out(get_mapped_pinned_pool(e.queue[0])) > staged0);
    CHECK(handed_out(get_mapped_pinned_pool(e.queue[1])) > staged1);
}

TEST_CASE("release_pools drops the pools of every device of the context, and no other") {
    auto& e = TwoDevices::get();
    cl_int err = CL_SUCCESS;
    cl::Context ctx(clCreateContext(nullptr, 2, e.dev, nullptr, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl::CommandQueue q0(clCreateCommandQueue(ctx(), e.dev[0], 0, &err), false);
    cl::CommandQueue q1(clCreateCommandQueue(ctx(), e.dev[1], 0, &err), false);
    auto& keep = get_buffer_pool(e.queue[0]);
    const auto keep_hits = keep.stats().hits;

    get_buffer_pool(q0).allocate(64).release();
    auto out = get_buffer_pool(q1).allocate(64);  // still out when its pool is dropped
    const std::size_t with_ctx = pools_made();
    release_pools(ctx);
    CHECK(pools_made() == with_ctx - 2);
    out.release();  // an orphan: frees its buffer, no pool needed

    // Another context's pool is untouched and still serves.
    CHECK(&get_buffer_pool(e.queue[0]) == &keep);
    keep.allocate(64).release();
    keep.allocate(64).release();
    CHECK(keep.stats().hits > keep_hits);
}

TEST_CASE("copy workers go to the copy with the fewest workers, the oldest among equals") {
    struct FakeJob {
        unsigned attached;
        bool is_open;
        bool open() const noexcept { return is_open; }
    };
    FakeJob a{3, true}, b{1, true}, c{1, true}, full{0, false};
    std::vector<FakeJob*> jobs{&a, &full, &b, &c};
    CHECK(detail::fewest_attached(jobs) == &b);
    b.is_open = false;
    CHECK(detail::fewest_attached(jobs) == &c);
    std::vector<FakeJob*> none{&full};
    CHECK(detail::fewest_attached(none) == nullptr);
}

TEST_CASE("a DeviceHandle per device, each with its own pools on its own device") {
    const DeviceHandle& d0 = select_device("0");
    const DeviceHandle& d1 = select_device("1");
    REQUIRE(&d0 != &d1);
    CHECK(&d0.buffer_pool() != &d1.buffer_pool());
    CHECK(d0.buffer_pool().backend().device() == d0.device_id());
    CHECK(d1.buffer_pool().backend().device() == d1.device_id());
    CHECK(d0.device_id() != d1.device_id());
}

// Last in the file (doctest runs a file's cases in order): after it, every pool refuses work.
TEST_CASE("shutdown gives back the caches of every device's pools and finishes every device's queue") {
    auto& e = TwoDevices::get();
    get_buffer_pool(e.queue[0]).allocate(8192).release();
    get_buffer_pool(e.queue[1]).allocate(8192).release();
    REQUIRE(get_buffer_pool(e.queue[0]).stats().bytes_cached > 0);
    REQUIRE(get_buffer_pool(e.queue[1]).stats().bytes_cached > 0);
    auto& p0 = get_buffer_pool(e.queue[0]);
    auto& p1 = get_buffer_pool(e.queue[1]);
    const auto queues = registered_queues();
    CHECK(std::find(queues.begin(), queues.end(), e.queue[0]()) != queues.end());
    CHECK(std::find(queues.begin(), queues.end(), e.queue[1]()) != queues.end());

    const ShutdownReport r = shutdown();
    CHECK(r.queues_failed == 0);
    CHECK(r.bytes_released >= 2 * 8192);
    CHECK(p0.stats().bytes_cached == 0);
    CHECK(p1.stats().bytes_cached == 0);
    CHECK_THROWS_AS(get_buffer_pool(e.queue[1]), usage_error);
}
