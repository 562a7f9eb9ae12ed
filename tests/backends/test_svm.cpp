// The SVM pools and OffsetArenaPool on a real OpenCL device: kernels through their blocks, transfers, maps, no driver call per block.
#include "opencl_env.hpp"

#include <clpool/interop/svm.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

// p[first + i] += 1 for every work-item i.
const char* const svm_add_one_source = R"CLC(
kernel void add_one(global int* p, ulong first) { p[first + get_global_id(0)] += 1; }
)CLC";

cl::Kernel svm_add_one_kernel() {
    auto& env = OpenCLEnv::get();
    const char* src = svm_add_one_source;
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(env.context(), 1, &src, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    const cl_device_id dev = env.device();
    REQUIRE(clBuildProgram(prog, 1, &dev, "", nullptr, nullptr) == CL_SUCCESS);
    cl_kernel k = clCreateKernel(prog, "add_one", &err);
    clReleaseProgram(prog);
    REQUIRE(err == CL_SUCCESS);
    return cl::Kernel(k, false);
}

void svm_run(const cl::Kernel& k, std::size_t items) {
    auto& env = OpenCLEnv::get();
    const std::size_t global = items;
    REQUIRE(clEnqueueNDRangeKernel(env.queue(), k(), 1, nullptr, &global, nullptr, 0, nullptr, nullptr) == CL_SUCCESS);
    REQUIRE(clFinish(env.queue()) == CL_SUCCESS);
}

void svm_set_first(const cl::Kernel& k, cl_ulong first) {
    REQUIRE(clSetKernelArg(k(), 1, sizeof first, &first) == CL_SUCCESS);
}

std::vector<int> svm_iota(std::size_t n, int from) {
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), from);
    return v;
}

}  // namespace

TEST_CASE("SVMBackend: the device's SVM capabilities, and flags it refuses by name") {
    auto& env = OpenCLEnv::get();
    SVMBackend backend(env.context);
    CHECK((backend.capabilities() & opencl::svm_coarse_grain_buffer) != 0);
    CHECK(backend.sub_alignment() >= 8);
    CHECK(std::string(backend.name()) == "svm");
    try {
        SVMBackend bad(env.context, CL_MEM_READ_WRITE | opencl::mem_svm_atomics);
        FAIL("atomics without fine grain were accepted");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("CL_MEM_SVM_ATOMICS") != std::string::npos);
    }
    try {
        SVMBackend bad(env.context, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY);
        FAIL("two access flags were accepted");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("0x6") != std::string::npos);
    }
}

TEST_CASE("SVMPool: a kernel, a map and the transfers all see one allocation") {
    auto& env = OpenCLEnv::get();
    SVMPool pool(env.context);
    constexpr std::size_t n = 1000;
    auto h = pool.allocate(n * sizeof(int));
    REQUIRE(h);
    CHECK(h.buffer().size() >= n * sizeof(int));
    CHECK(reinterpret_cast<std::uintptr_t>(h.buffer().get()) % pool.backend().sub_alignment() == 0);
    {
        SVMMapping host(env.queue, h, CL_MAP_WRITE_INVALIDATE_REGION);
        REQUIRE(host.size() == n * sizeof(int));
        for (std::size_t i = 0; i < n; ++i) host.as<int>()[i] = static_cast<int>(i);
    }
    auto k = svm_add_one_kernel();
    set_kernel_arg(k, 0, h);
    svm_set_first(k, 0);
    svm_run(k, n);
    std::vector<int> back(n);
    download(env.queue, back.data(), h, 0, n * sizeof(int)).wait();
    CHECK(back == svm_iota(n, 1));

    const std::vector<int> fresh = svm_iota(n, 100);
    upload(env.queue, h, 0, fresh.data(), n * sizeof(int)).wait();
    {
        SVMMapping host(env.queue, h, CL_MAP_READ);
        CHECK(std::equal(fresh.begin(), fresh.end(), host.as<int>()));
    }
    const void* first = h.buffer().get();
    h.release();
    auto again = pool.allocate(n * sizeof(int));
    CHECK(again.buffer().get() == first);  // a cache hit: the same allocation
    CHECK(pool.stats().misses == 1);
}

TEST_CASE("SVM transfers: ranges are checked against what the holder asked for, and staging gives the same bytes") {
    auto& env = OpenCLEnv::get();
    SVMArenaPool pool(env.context);
    constexpr std::size_t n = std::size_t{3} << 20;  // above direct_max_bytes: a staged candidate
    auto h = pool.allocate(n);
    std::vector<unsigned char> src(n), back(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    TransferOptions staged;
    staged.stage = true;
    upload(env.queue, h, 0, src.data(), n, staged).wait();
    download(env.queue, back.data(), h, 0, n, staged).wait();
    CHECK(back == src);
    std::fill(back.begin(), back.end(), 0);
    TransferOptions direct;
    direct.stage = false;
    download(env.queue, back.data(), h, 0, n, direct).wait();
    CHECK(back == src);

    try {
        upload(env.queue, h, 1, src.data(), n);
        FAIL("an upload past nbytes() was accepted");
    } catch (const size_error& e) {
        CHECK(std::string(e.what()).find(std::to_string(n)) != std::string::npos);
    }
    SVMArenaPool::handle empty;
    CHECK_THROWS_AS(upload(env.queue, empty, 0, src.data(), 1), usage_error);
    CHECK_THROWS_AS(SVMMapping(env.queue, empty, CL_MAP_READ), usage_error);
    auto none = pool.allocate(0);
    try {
        SVMMapping zero(env.queue, none, CL_MAP_READ);
        FAIL("a map of 0 bytes was accepted");
    } catch (const usage_error& e) {
        CHECK(std::string(e.what()).find("0 bytes") != std::string::npos);
    }
}

TEST_CASE("SVMArenaPool: blocks are disjoint pointers into few segments, made with no driver call") {
    auto& env = OpenCLEnv::get();
    SVMArenaPool pool(env.context);
    const std::size_t align = pool.backend().parent().sub_alignment();
    std::vector<SVMArenaPool::handle> held;
    const std::size_t sizes[] = {4000, 100, 65536, 12345, 1, 300000, 4096, 777};
    for (int round = 0; round < 4; ++round)
        for (std::size_t s : sizes) held.push_back(pool.allocate(s));
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> spans;
    for (const auto& h : held) {
        const auto p = reinterpret_cast<std::uintptr_t>(h.buffer().get());
        CHECK(p % align == 0);
        spans.emplace_back(p, p + h.nbytes());
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1].second <= spans[i].first);

    // Each block its own value through a kernel at its own pointer.
    auto k = svm_add_one_kernel();
    svm_set_first(k, 0);
    for (std::size_t i = 0; i < held.size(); ++i) {
        const std::size_t ints = held[i].nbytes() / sizeof(int);
        if (ints == 0) continue;
        std::vector<int> v(ints, static_cast<int>(i) * 10);
        upload(env.queue, held[i], 0, v.data(), ints * sizeof(int)).wait();
        set_kernel_arg(k, 0, held[i]);
        svm_run(k, ints);
    }
    for (std::size_t i = 0; i < held.size(); ++i) {
        const std::size_t ints = held[i].nbytes() / sizeof(int);
        if (ints == 0) continue;
        std::vector<int> v(ints);
        download(env.queue, v.data(), held[i], 0, ints * sizeof(int)).wait();
        CHECK(std::all_of(v.begin(), v.end(), [&](int x) { return x == static_cast<int>(i) * 10 + 1; }));
    }

    const auto s = pool.stats();
    CHECK(s.sub_buffers_made == 0);
    CHECK(s.sub_buffers_cached == 0);
    CHECK(s.segments >= 1);
    CHECK(s.segment_allocations < held.size());
    // Released and asked again in another order: served from the segments, no new one.
    const auto before = s.segment_allocations;
    held.clear();
    for (int round = 0; round < 4; ++round)
        for (auto it = std::rbegin(sizes); it != std::rend(sizes); ++it) held.push_back(pool.allocate(*it));
    CHECK(pool.stats().segment_allocations == before);
    held.clear();
    pool.trim();
    CHECK(pool.stats().segments == 0);
}

TEST_CASE_TEMPLATE("SVM pools: a block released after an incomplete event is neither reused nor re-carved", P, SVMPool,
                   SVMArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    auto h = pool.allocate(1 << 16);
    const void* p = h.buffer().get();
    cl_int err = CL_SUCCESS;
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    h.release_after(&gate, 1);
    std::vector<typename P::handle> more;
    for (int i = 0; i < 8; ++i) {
        more.push_back(pool.allocate(1 << 16));
        const auto q = reinterpret_cast<std::uintptr_t>(more.back().buffer().get());
        const auto base = reinterpret_cast<std::uintptr_t>(p);
        CHECK((q + (1 << 16) <= base || base + (1 << 16) <= q));
    }
    REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
    more.clear();
    bool reused = false;
    for (int i = 0; i < 9 && !reused; ++i) {
        more.push_back(pool.allocate(1 << 16));
        reused = more.back().buffer().get() == p;
    }
    CHECK(reused);
}

TEST_CASE("SVMArenaPool: snapshots list its segments and join them to the blocks held") {
    auto& env = OpenCLEnv::get();
    SVMArenaPool pool(env.context);
    auto a = pool.allocate(5000);
    auto b = pool.allocate(70000);
    a.set_tag("a");
    const auto snap = pool.snapshot();
    REQUIRE(!snap.segments.empty());
    std::size_t in_use = 0;
    for (const auto& seg : snap.segments)
        for (const auto& blk : seg.blocks)
            if (!blk.free && blk.state == BufferState::in_use && blk.buffer_id != 0) ++in_use;
    CHECK(in_use == 2);
}

TEST_CASE("OffsetArenaPool: kernels take (segment, offset); no sub-buffer unless asked") {
    auto& env = OpenCLEnv::get();
    OffsetArenaPool pool(env.context);
    std::vector<OffsetArenaPool::handle> held;
    for (int i = 0; i < 12; ++i) held.push_back(pool.allocate(static_cast<std::size_t>(1000 + 333 * i) * sizeof(int)));
    auto k = svm_add_one_kernel();
    for (std::size_t i = 0; i < held.size(); ++i) {
        const std::size_t ints = held[i].nbytes() / sizeof(int);
        const auto v = svm_iota(ints, static_cast<int>(i) * 1000);
        upload(env.queue, held[i], 0, v.data(), ints * sizeof(int)).wait();
        REQUIRE(held[i].buffer().offset() % sizeof(int) == 0);
        set_kernel_arg(k, 0, held[i].buffer().segment());
        svm_set_first(k, held[i].buffer().offset() / sizeof(int));
        svm_run(k, ints);
    }
    for (std::size_t i = 0; i < held.size(); ++i) {
        const std::size_t ints = held[i].nbytes() / sizeof(int);
        std::vector<int> v(ints);
        download(env.queue, v.data(), held[i], 0, ints * sizeof(int)).wait();
        CHECK(v == svm_iota(ints, static_cast<int>(i) * 1000 + 1));
        CHECK_FALSE(held[i].buffer().has_sub_buffer());
    }
    CHECK(pool.stats().sub_buffers_made == 0);

    // Asked for, the sub-buffer covers just the block and sees its bytes.
    const cl::Buffer& sub = held[3].buffer().sub_buffer();
    CHECK(held[3].buffer().has_sub_buffer());
    std::size_t size = 0;
    REQUIRE(clGetMemObjectInfo(sub(), CL_MEM_SIZE, sizeof size, &size, nullptr) == CL_SUCCESS);
    CHECK(size == held[3].buffer().size());
    int first = 0;
    REQUIRE(clEnqueueReadBuffer(env.queue(), sub(), CL_TRUE, 0, sizeof first, &first, 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(first == 3001);
    CHECK(&held[3].buffer().sub_buffer() == &sub);  // made once
}

namespace {
// Runs `call` while a user event gates a block's release; if `call` is still running after 10 s
// the event is set so that it returns, and the test fails instead of hanging. Returns whether it
// returned by itself.
template <class Call>
bool returns_while_gated(const cl::Event& gate, Call&& call) {
    std::atomic<bool> done{false}, fired{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!done) {
            fired = true;
            clSetUserEventStatus(gate(), CL_COMPLETE);
        }
    });
    call();
    done = true;
    watchdog.join();
    return !fired;
}
}  // namespace

TEST_CASE_TEMPLATE("SVM pools: release_after and trim never wait for a block's events", P, SVMPool, SVMArenaPool) {
    auto& env = OpenCLEnv::get();
    P pool(env.context);
    auto h = pool.allocate(1 << 16);
    cl_int err = CL_SUCCESS;
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    h.release_after(&gate, 1);
    std::size_t freed = 1;
    CHECK(returns_while_gated(gate, [&] { freed = pool.trim(); }));
    CHECK(freed == 0);  // the gated block stays pending: freeing it would wait
    CHECK(pool.stats().bytes_pending > 0);
    REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
    CHECK(pool.trim() > 0);  // complete now: given back
    CHECK(pool.stats().bytes_pending == 0);
}

TEST_CASE("SVM pools: a release_after the caps refuse does not wait for its events") {
    auto& env = OpenCLEnv::get();
    using CachesNothing = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, SingleMutex, SVMBackend, Diagnostics>;
    CachesNothing pool(SVMBackend(env.context), Capped{std::size_t{1} << 20, 0});
    auto h = pool.allocate(1 << 16);
    cl_int err = CL_SUCCESS;
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    CHECK(returns_while_gated(gate, [&] { h.release_after(&gate, 1); }));
    CHECK(pool.stats().bytes_pending == pool.bucket_size_for(1 << 16));  // kept past the cap while it runs
    REQUIRE(clSetUserEventStatus(gate(), CL_COMPLETE) == CL_SUCCESS);
    CHECK(pool.trim() == pool.bucket_size_for(1 << 16));
}
