// ArenaPool on a real OpenCL device: sub-buffers that never overlap, aligned origins, kernels through them, fallbacks.
#include "opencl_env.hpp"

#include <clpool/pools/opencl_pools.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

// A backend whose sub-buffers always fail: every block must fall back.
struct NoSubBuffers : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    static Allocation<cl::Buffer> sub_range(const cl::Buffer&, std::size_t, std::size_t) noexcept {
        return {cl::Buffer(), AllocStatus::failed, CL_MISALIGNED_SUB_BUFFER_OFFSET};
    }
};
static_assert(SegmentBackend<NoSubBuffers>);

// Counts the sub-buffers it makes (each a clCreateSubBuffer, a driver call).
struct CountingSubBuffers : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    static inline std::atomic<long> made{0};
    static Allocation<cl::Buffer> sub_range(const cl::Buffer& segment, std::size_t offset, std::size_t n) noexcept {
        ++made;
        return OpenCLBackend::sub_range(segment, offset, n);
    }
};
static_assert(SegmentBackend<CountingSubBuffers>);
using CountingArena = Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<CountingSubBuffers>>;

// A device that reports a base-address alignment of 0.
struct ZeroAlignment : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    std::size_t sub_alignment() const noexcept { return 0; }
};

template <class T>
T mem_info(cl_mem m, cl_mem_info what) {
    T v{};
    REQUIRE(clGetMemObjectInfo(m, what, sizeof v, &v, nullptr) == CL_SUCCESS);
    return v;
}

std::vector<std::size_t> sizes() {
    std::vector<std::size_t> out;
    for (std::size_t n :
         std::vector<std::size_t>{1, 100, 513, 4000, 70000, 1u << 20, (1u << 20) + 1, 3u << 20, 21u << 20})
        for (int i = 0; i < 3; ++i) out.push_back(n + static_cast<std::size_t>(i) * 512);
    return out;
}

}  // namespace

TEST_CASE("opencl: CL_DEVICE_MEM_BASE_ADDR_ALIGN is read in bits; 0 or a non-power of two is refused, naming it") {
    CHECK(opencl::base_address_alignment_bytes(4096, "gpu") == 512);  // NVIDIA's report
    for (cl_uint bits : {0u, 4u, 768u, 12u}) {
        try {
            (void)opencl::base_address_alignment_bytes(bits, "gpu");
            FAIL("accepted " << bits);
        } catch (const config_error& e) {
            CHECK(std::string(e.what()).find("= " + std::to_string(bits) + " bits") != std::string::npos);
        }
    }
    CHECK_THROWS_WITH_AS(SubAllocated<ZeroAlignment>(ZeroAlignment(OpenCLEnv::get().context)),
                         doctest::Contains("alignment of 0 bytes"), config_error);
}

TEST_CASE("opencl: sub-allocated blocks are sub-buffers at aligned origins that never overlap") {
    auto& env = OpenCLEnv::get();
    ArenaPool pool(env.context);
    const std::size_t align = opencl::base_address_alignment_of(env.context());
    std::vector<ArenaPool::handle> hs;
    for (auto n : sizes()) hs.push_back(pool.allocate(n));
    for (std::size_t i = 0; i < hs.size(); i += 2) hs[i].release();  // holes, then carve into them
    for (auto n : sizes()) hs.push_back(pool.allocate(n / 2 + 1));
    std::map<cl_mem, std::vector<std::pair<std::size_t, std::size_t>>> by_segment;
    for (const auto& h : hs) {
        if (!h) continue;
        cl_mem m = h.buffer()();
        const auto parent = mem_info<cl_mem>(m, CL_MEM_ASSOCIATED_MEMOBJECT);
        REQUIRE(parent == h.buffer().segment()());  // a sub-buffer of its segment
        const auto offset = mem_info<std::size_t>(m, CL_MEM_OFFSET);
        CHECK(offset == h.buffer().offset());
        CHECK(offset % align == 0);
        CHECK(mem_info<std::size_t>(m, CL_MEM_SIZE) == h.bucket_size());
        by_segment[parent].emplace_back(offset, h.bucket_size());
    }
    for (auto& [seg, spans] : by_segment) {
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i)
            CHECK(spans[i].first >= spans[i - 1].first + spans[i - 1].second);
    }
    const auto s = pool.stats();
    CHECK(s.segments < hs.size());  // shared segments
    CHECK(s.sub_buffer_fallbacks == 0);
}

TEST_CASE("opencl: contents written through neighbouring sub-buffers stay apart") {
    auto& env = OpenCLEnv::get();
    ArenaPool pool(env.context);
    std::vector<ArenaPool::handle> hs;
    for (int i = 0; i < 16; ++i) hs.push_back(pool.allocate(4096 + static_cast<std::size_t>(i) * 512));
    for (std::size_t i = 0; i < hs.size(); ++i) {
        std::vector<std::uint32_t> v(hs[i].nbytes() / 4, static_cast<std::uint32_t>(i + 1));
        REQUIRE(clEnqueueWriteBuffer(env.queue(), hs[i].buffer()(), CL_FALSE, 0, v.size() * 4, v.data(), 0, nullptr,
                                     nullptr) == CL_SUCCESS);
        REQUIRE(clFinish(env.queue()) == CL_SUCCESS);
    }
    for (std::size_t i = 0; i < hs.size(); ++i) {
        std::vector<std::uint32_t> v(hs[i].nbytes() / 4);
        REQUIRE(clEnqueueReadBuffer(env.queue(), hs[i].buffer()(), CL_TRUE, 0, v.size() * 4, v.data(), 0, nullptr,
                                    nullptr) == CL_SUCCESS);
        CHECK(std::all_of(v.begin(), v.end(), [&](std::uint32_t x) { return x == i + 1; }));
    }
}

TEST_CASE("kernel: a kernel writes through a sub-allocated buffer; release_after keeps its block until it ends") {
    auto& env = OpenCLEnv::get();
    const char* src = "__kernel void inc(__global uint* p) { p[get_global_id(0)] += 1u; }";
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(env.context(), 1, &src, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    cl_device_id dev = env.device();
    REQUIRE(clBuildProgram(prog, 1, &dev, "", nullptr, nullptr) == CL_SUCCESS);
    cl_kernel k = clCreateKernel(prog, "inc", &err);
    REQUIRE(err == CL_SUCCESS);
    ArenaPool pool(env.context);
    auto neighbour = pool.allocate(1 << 16);
    auto h = pool.allocate(1 << 16);
    const std::size_t n = h.nbytes() / 4;
    std::vector<std::uint32_t> v(n, 41), w(n, 7);
    REQUIRE(clEnqueueWriteBuffer(env.queue(), h.buffer()(), CL_TRUE, 0, n * 4, v.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    REQUIRE(clEnqueueWriteBuffer(env.queue(), neighbour.buffer()(), CL_TRUE, 0, n * 4, w.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    cl_mem m = h.buffer()();
    REQUIRE(clSetKernelArg(k, 0, sizeof m, &m) == CL_SUCCESS);
    cl_event done = nullptr;
    REQUIRE(clEnqueueNDRangeKernel(env.queue(), k, 1, nullptr, &n, nullptr, 0, nullptr, &done) == CL_SUCCESS);
    REQUIRE(clEnqueueReadBuffer(env.queue(), m, CL_TRUE, 0, n * 4, v.data(), 0, nullptr, nullptr) == CL_SUCCESS);
    CHECK(std::all_of(v.begin(), v.end(), [](std::uint32_t x) { return x == 42; }));
    REQUIRE(clEnqueueReadBuffer(env.queue(), neighbour.buffer()(), CL_TRUE, 0, n * 4, w.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(std::all_of(w.begin(), w.end(), [](std::uint32_t x) { return x == 7; }));
    const cl::Event e(done, false);
    h.release_after(&e, 1);
    pool.trim();  // waits for the event before the block's range goes back
    CHECK(pool.stats().bytes_pending == 0);
    clReleaseKernel(k);
    clReleaseProgram(prog);
}

TEST_CASE("opencl: a large block released after events stays pending, then is cached; released plainly it goes back") {
    auto& env = OpenCLEnv::get();
    ArenaPool pool(env.context);
    const std::size_t n = (3u << 20) + 1000;  // above ArenaBuckets::exact_above: held at 3 MiB + 1 KiB
    auto h = pool.allocate(n);
    REQUIRE(h.bucket_size() == (3u << 20) + 1024);
    const cl_mem first = h.buffer()();
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(env.context(), &err);
    REQUIRE(err == CL_SUCCESS);
    const cl::Event e(gate, true);
    h.release_after(&e, 1);  // freeing now would wait: it stays in the pool
    auto s = pool.stats();
    CHECK(s.bytes_pending == (3u << 20) + 1024);
    CHECK(s.driver_frees == 0);
    REQUIRE(clSetUserEventStatus(gate, CL_COMPLETE) == CL_SUCCESS);
    clReleaseEvent(gate);
    auto again = pool.allocate(n);  // its events done: a hit on the same block
    CHECK(again.buffer()() == first);
    CHECK(pool.stats().hits == 1);
    again.release();  // no events: back to the arena
    s = pool.stats();
    CHECK(s.bytes_cached == 0);
    CHECK(s.bytes_allocated == 0);
    CHECK(s.driver_frees == 1);
    CHECK(s.segment_free_bytes == s.segment_bytes);
}

TEST_CASE("opencl: when a sub-buffer cannot be made, the block is a whole buffer, counted") {
    auto& env = OpenCLEnv::get();
    Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<NoSubBuffers>> pool(
        SubAllocated<NoSubBuffers>(NoSubBuffers(env.context)));
    auto h = pool.allocate(5000);
    REQUIRE(h);
    CHECK(h.buffer().is_fallback());
    CHECK(mem_info<cl_mem>(h.buffer()(), CL_MEM_ASSOCIATED_MEMOBJECT) == nullptr);  // a buffer of its own
    std::vector<std::uint32_t> v(h.nbytes() / 4, 9), back(v.size());
    REQUIRE(clEnqueueWriteBuffer(env.queue(), h.buffer()(), CL_TRUE, 0, v.size() * 4, v.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    REQUIRE(clEnqueueReadBuffer(env.queue(), h.buffer()(), CL_TRUE, 0, v.size() * 4, back.data(), 0, nullptr,
                                nullptr) == CL_SUCCESS);
    CHECK(back == v);
    const auto s = pool.stats();
    CHECK(s.sub_buffer_fallbacks == 1);
    CHECK(s.segment_free_bytes == s.segment_bytes);  // its carved range went back
}

TEST_CASE("opencl: no sub-buffer of a sub-allocated block; one of its segment at offset() instead") {
    auto& env = OpenCLEnv::get();
    ArenaPool pool(env.context);
    auto h = pool.allocate(8192);
    cl_buffer_region r{0, 1024};
    cl_int err = CL_SUCCESS;
    cl_mem nested = clCreateSubBuffer(h.buffer()(), 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    if (nested) {
        // NVIDIA's driver accepts a sub-buffer of a sub-buffer (the spec refuses it) and
        // composes the offsets: then it must address the block's bytes, not the segment's start.
        CHECK(err == CL_SUCCESS);
        CHECK(mem_info<std::size_t>(nested, CL_MEM_OFFSET) == h.buffer().offset());
        clReleaseMemObject(nested);
    } else {
        CHECK(err == CL_INVALID_MEM_OBJECT);  // OpenCL: buffer must not be a sub-buffer (PoCL)
    }
    auto part = sub_buffer_of(h, 4096, 1024);
    REQUIRE(part.status == AllocStatus::ok);
    CHECK(mem_info<cl_mem>(part.memory(), CL_MEM_ASSOCIATED_MEMOBJECT) == h.buffer().segment()());
    CHECK(mem_info<std::size_t>(part.memory(), CL_MEM_OFFSET) == h.buffer().offset() + 4096);
    CHECK(sub_buffer_of(h, 8000, 1024).status == AllocStatus::failed);  // past the block: refused
}

TEST_CASE("opencl: mapped pinned staging blocks carved from one pinned segment carry data to the device") {
    auto& env = OpenCLEnv::get();
    MappedPinnedArenaPool pool(env.context);
    std::vector<MappedPinnedArenaPool::handle> hs;
    for (int i = 0; i < 8; ++i) hs.push_back(pool.allocate(60000));
    CHECK(pool.stats().segments == 1);  // one pinned allocation and one map for all eight
    std::map<const char*, std::size_t> spans;
    for (const auto& h : hs) spans[static_cast<const char*>(h.buffer().host())] = h.bucket_size();
    const char* end = nullptr;
    for (const auto& [p, n] : spans) {
        CHECK((end == nullptr || p >= end));
        end = p + n;
    }
    cl_int err = CL_SUCCESS;
    cl_mem dev = clCreateBuffer(env.context(), CL_MEM_READ_WRITE, 60000, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    for (std::size_t i = 0; i < hs.size(); ++i) std::memset(hs[i].buffer().host(), static_cast<int>(i + 1), 60000);
    for (std::size_t i = 0; i < hs.size(); ++i) {
        REQUIRE(clEnqueueWriteBuffer(env.queue(), dev, CL_TRUE, 0, 60000, hs[i].buffer().host(), 0, nullptr, nullptr) ==
                CL_SUCCESS);
        std::vector<unsigned char> back(60000);
        REQUIRE(clEnqueueReadBuffer(env.queue(), dev, CL_TRUE, 0, 60000, back.data(), 0, nullptr, nullptr) ==
                CL_SUCCESS);
        CHECK(std::all_of(back.begin(), back.end(), [&](unsigned char c) { return c == i + 1; }));
    }
    clReleaseMemObject(dev);
    hs.clear();
    pool.trim();
    CHECK(pool.stats().segments == 0);  // unmapped and freed
}

namespace {
// Writes `value` through buffer m (n bytes), then reads it back: true if every word came back.
bool round_trip(OpenCLEnv& env, cl_mem m, std::size_t n, std::uint32_t value) {
    std::vector<std::uint32_t> v(n / 4, value), back(v.size(), 0);
    if (clEnqueueWriteBuffer(env.queue(), m, CL_TRUE, 0, v.size() * 4, v.data(), 0, nullptr, nullptr) != CL_SUCCESS)
        return false;
    if (clEnqueueReadBuffer(env.queue(), m, CL_TRUE, 0, v.size() * 4, back.data(), 0, nullptr, nullptr) != CL_SUCCESS)
        return false;
    return back == v;
}
}  // namespace

TEST_CASE(
    "opencl: a large block asked for again at its size gets its kept sub-buffer back: the same cl_mem, none made") {
    auto& env = OpenCLEnv::get();
    CountingArena pool(SubAllocated<CountingSubBuffers>(CountingSubBuffers(env.context)));
    const std::size_t n = (3u << 20) + 1000;  // above exact_above: given back to the arena on release
    auto a = pool.allocate(n);
    const cl_mem first = a.buffer()();
    REQUIRE(first != nullptr);
    REQUIRE(clRetainMemObject(first) == CL_SUCCESS);  // held: no new object can take its address
    CHECK(round_trip(env, first, a.nbytes(), 3));
    const long made = CountingSubBuffers::made;
    a.release();
    CHECK(mem_info<cl_uint>(first, CL_MEM_REFERENCE_COUNT) == 2);  // ours and the segment's kept view
    CHECK(pool.stats().sub_buffers_cached == 1);
    auto b = pool.allocate(n);
    CHECK(b.buffer()() == first);
    CHECK(CountingSubBuffers::made == made);  // no clCreateSubBuffer
    const auto s = pool.stats();
    CHECK(s.sub_buffers_made == 1);
    CHECK(s.sub_buffers_reused == 1);
    CHECK(s.sub_buffers_cached == 0);
    CHECK(round_trip(env, b.buffer()(), b.nbytes(), 4));
    clReleaseMemObject(first);
}

TEST_CASE(
    "opencl: a carve over a kept sub-buffer of another range releases it first; data through the new block is right") {
    auto& env = OpenCLEnv::get();
    CountingArena pool(SubAllocated<CountingSubBuffers>(CountingSubBuffers(env.context)));
    auto a = pool.allocate(3u << 20);
    const cl_mem old = a.buffer()();
    const std::size_t offset = a.buffer().offset();
    REQUIRE(clRetainMemObject(old) == CL_SUCCESS);
    CHECK(round_trip(env, old, a.nbytes(), 1));
    a.release();
    REQUIRE(mem_info<cl_uint>(old, CL_MEM_REFERENCE_COUNT) == 2);  // kept with the segment
    auto b = pool.allocate((2u << 20) + 512);  // the same free range, from its start: over a's kept view
    REQUIRE(b.buffer().offset() == offset);
    CHECK(b.buffer()() != old);
    CHECK(mem_info<cl_uint>(old, CL_MEM_REFERENCE_COUNT) == 1);  // the pool let go of it: only ours
    CHECK(pool.stats().sub_buffers_cached == 0);
    CHECK(pool.stats().sub_buffers_reused == 0);
    CHECK(round_trip(env, b.buffer()(), b.nbytes(), 2));
    std::vector<std::uint32_t> back(b.nbytes() / 4, 0);
    REQUIRE(clEnqueueReadBuffer(env.queue(), b.buffer()(), CL_TRUE, 0, back.size() * 4, back.data(), 0, nullptr,
                                nullptr) == CL_SUCCESS);
    CHECK(std::all_of(back.begin(), back.end(), [](std::uint32_t x) { return x == 2; }));
    clReleaseMemObject(old);
}

TEST_CASE("opencl: trim() releases the kept sub-buffers") {
    auto& env = OpenCLEnv::get();
    ArenaPool pool(env.context);
    auto keep = pool.allocate(3u << 20);
    auto a = pool.allocate((3u << 20) + 1000);
    const cl_mem m = a.buffer()();
    REQUIRE(clRetainMemObject(m) == CL_SUCCESS);
    a.release();
    CHECK(pool.stats().sub_buffers_cached == 1);
    CHECK(mem_info<cl_uint>(m, CL_MEM_REFERENCE_COUNT) == 2);
    pool.trim();
    CHECK(pool.stats().sub_buffers_cached == 0);
    CHECK(mem_info<cl_uint>(m, CL_MEM_REFERENCE_COUNT) == 1);
    clReleaseMemObject(m);
}
