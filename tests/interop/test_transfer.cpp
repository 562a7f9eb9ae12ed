// upload/download: every path moves exactly the bytes asked for, byte for byte, and refuses bad ranges.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "cl_events.hpp"
#include "opencl_env.hpp"

#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;
using clpool::test::status_of;

namespace {

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    std::uint32_t x = seed * 2654435761u + 1;
    for (auto& c : v) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<unsigned char>(x >> 24);
    }
    return v;
}

void fill(const cl::Buffer& b, std::size_t n, unsigned char value) {
    auto& q = OpenCLEnv::get().queue;
    REQUIRE(clEnqueueFillBuffer(q(), b(), &value, 1, 0, n, 0, nullptr, nullptr) == CL_SUCCESS);
}

std::vector<unsigned char> read_all(const cl::Buffer& b, std::size_t n) {
    std::vector<unsigned char> v(n);
    REQUIRE(clEnqueueReadBuffer(OpenCLEnv::get().queue(), b(), CL_TRUE, 0, n, v.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    return v;
}

TransferOptions opts(MappedPinnedPool& staging, bool stage, std::size_t chunk = 64 * 1024, unsigned buffers = 3) {
    TransferOptions o;
    o.staging_pool = &staging;
    o.stage = stage;
    o.chunk_bytes = chunk;
    o.staging_buffers = buffers;
    o.direct_max_bytes = 0;  // let even small sizes take the staged path here
    return o;
}

// Uploads a pattern into [off, off+n) of a fresh device buffer with guard
// bytes around it, checks it landed there and nowhere else, downloads it into
// a host buffer with a guard byte each side and checks it came back intact.
void check_round_trip(BufferPool& device, std::size_t off, std::size_t n, const TransferOptions& o, unsigned seed) {
    auto& env = OpenCLEnv::get();
    const std::size_t total = off + n + 4096;  // room before and after the range
    auto dev = device.allocate(total);
    fill(dev.buffer(), total, 0xEE);
    const auto src = pattern(n, seed);
    upload(env.queue, dev, off, src.data(), n, o).wait();

    const auto all = read_all(dev.buffer(), total);
    CHECK(std::memcmp(all.data() + off, src.data(), n) == 0);
    // Nothing outside [off, off+n) was touched.
    CHECK(std::all_of(all.begin(), all.begin() + off, [](unsigned char c) { return c == 0xEE; }));
    CHECK(std::all_of(all.begin() + off + n, all.end(), [](unsigned char c) { return c == 0xEE; }));

    std::vector<unsigned char> back(n + 2, 0x77);  // a guard byte each side
    download(env.queue, back.data() + 1, dev, off, n, o).wait();
    CHECK(back.front() == 0x77);
    CHECK(back.back() == 0x77);
    CHECK(std::memcmp(back.data() + 1, src.data(), n) == 0);
}

}  // namespace

TEST_CASE("upload then download round-trips exactly, at offsets, for odd and non-chunk-multiple sizes") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t chunk = 64 * 1024;
    const std::size_t sizes[] = {1, 7, 4095, chunk - 1, chunk, chunk + 1, 3 * chunk, 5 * chunk + 13, 11 * chunk + 4097};
    const std::size_t offsets[] = {0, 3, 4096 + 5};
    unsigned seed = 1;
    for (bool stage : {true, false}) {
        for (unsigned buffers : {2u, 4u}) {
            for (std::size_t n : sizes) {
                for (std::size_t off : offsets) {
                    CAPTURE(stage);
                    CAPTURE(buffers);
                    CAPTURE(n);
                    CAPTURE(off);
                    auto o = opts(staging, stage, chunk, buffers);
                    ++seed;
                    o.copy_threads = (seed % 3) + 1;  // 1..3 host threads
                    check_round_trip(device, off, n, o, seed);
                }
            }
        }
    }
    // Every staging buffer went back to its pool.
    CHECK(staging.stats().bytes_in_use == 0);
}

TEST_CASE("piece plans cover every byte once, in order, within a chunk, quartering the exposed end") {
    const std::size_t mib = std::size_t{1} << 20;
    for (std::size_t chunk : {64 * std::size_t{1024}, mib, 4 * mib}) {
        for (std::size_t n : {std::size_t{1}, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 4097, 4 * chunk,
                              5 * chunk / 2 + 13, 16 * mib}) {
            for (bool taper_end : {true, false}) {
                CAPTURE(chunk);
                CAPTURE(n);
                CAPTURE(taper_end);
                const auto plan = detail::plan_pieces(n, chunk, taper_end);
                std::size_t next = 0;
                for (const auto& p : plan) {
                    CHECK(p.off == next);
                    CHECK(p.len > 0);
                    CHECK(p.len <= chunk);
                    next = p.off + p.len;
                }
                CHECK(next == n);
                // Quartered where it pays: >= 2 chunks of >= 1 MiB.
                const bool quartered = n >= 2 * chunk && chunk >= mib;
                if (quartered) {
                    const auto& end = taper_end ? plan.back() : plan.front();
                    CHECK(end.len <= chunk / 4);
                    CHECK(plan.size() == (n - chunk + chunk - 1) / chunk + 4);
                } else {
                    CHECK(plan.size() == (n + chunk - 1) / chunk);  // plain chunks
                }
            }
        }
    }
}

TEST_CASE("tapered staged transfers (1 MiB chunks, quarter pieces at the ends) round-trip exactly") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t mib = std::size_t{1} << 20;
    for (std::size_t n : {2 * mib, 3 * mib + 4097, 5 * mib + 13}) {
        for (std::size_t off : {std::size_t{0}, std::size_t{4096 + 5}}) {
            CAPTURE(n);
            CAPTURE(off);
            auto o = opts(staging, true, mib, 3);
            o.copy_threads = 3;
            check_round_trip(device, off, n, o, static_cast<unsigned>(n + off));
        }
    }
    CHECK(staging.stats().bytes_in_use == 0);
}

TEST_CASE("the staged path really stages; small, pinned and stage=false sources go direct") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t n = 1 << 20;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 9);

    auto o = opts(staging, true, 256 * 1024, 2);
    o.direct_max_bytes = 256 * 1024;

    SUBCASE("pageable and large: staged through the pool") {
        upload(env.queue, dev, 0, src.data(), n, o).wait();
        CHECK(staging.stats().misses == 2);  // two rotating staging buffers for four chunks
        CHECK(read_all(dev.buffer(), n) == src);
    }
    SUBCASE("at most direct_max_bytes: direct") {
        upload(env.queue, dev, 0, src.data(), 256 * 1024, o).wait();
        std::vector<unsigned char> back(256 * 1024);
        download(env.queue, back.data(), dev, 0, back.size(), o).wait();
        CHECK(std::equal(back.begin(), back.end(), src.begin()));
        CHECK(staging.stats().misses == 0);
    }
    SUBCASE("stage=false (CLPOOL_PINNED_H2D=0): direct") {
        o.stage = false;
        upload(env.queue, dev, 0, src.data(), n, o).wait();
        CHECK(staging.stats().misses == 0);
        CHECK(read_all(dev.buffer(), n) == src);
    }
    SUBCASE("a PinnedAllocator vector: direct, both ways") {
        PinnedVector<unsigned char> pinned(src.begin(), src.end(), PinnedAllocator<unsigned char>(staging));
        const auto before = staging.stats().misses;  // the vector's own buffer
        upload(env.queue, dev, 0, pinned.data(), n, o).wait();
        std::fill(pinned.begin(), pinned.end(), 0);
        download(env.queue, pinned.data(), dev, 0, n, o).wait();
        CHECK(staging.stats().misses == before);
        CHECK(std::equal(pinned.begin(), pinned.end(), src.begin()));
        // A range that runs past the vector's memory is not "pinned": it would stage.
        CHECK(detail::pinned_ranges::instance().contains(pinned.data(), n));
        CHECK_FALSE(detail::pinned_ranges::instance().contains(pinned.data(), n + 4096 * 1024));
    }
    SUBCASE("host_is_pinned: direct") {
        o.host_is_pinned = true;
        upload(env.queue, dev, 0, src.data(), n, o).wait();
        CHECK(staging.stats().misses == 0);
    }
}

TEST_CASE("blocking and non-blocking uploads, and a staged download's event") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t n = 300 * 1024;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 3);
    for (bool stage : {true, false}) {
        CAPTURE(stage);
        auto o = opts(staging, stage);
        o.async = false;  // CLPOOL_ASYNC_H2D=0
        const cl::Event e = upload(env.queue, dev, 0, src.data(), n, o);
        CHECK(status_of(e) == CL_COMPLETE);
        std::vector<unsigned char> back(n);
        const cl::Event d = download(env.queue, back.data(), dev, 0, n, o);
        d.wait();
        CHECK(back == src);
    }
    // A staged download returns with the bytes in place and its event complete.
    std::vector<unsigned char> back(n);
    const cl::Event d = download(env.queue, back.data(), dev, 0, n, opts(staging, true));
    CHECK(status_of(d) == CL_COMPLETE);
    CHECK(back == src);
}

TEST_CASE("an async upload waits for wait_for events and returns before the data moved") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t n = 200 * 1024;
    auto dev = device.allocate(n);
    fill(dev.buffer(), n, 0);
    const auto src = pattern(n, 5);
    for (bool stage : {true, false}) {
        CAPTURE(stage);
        cl_int err = CL_SUCCESS;
        cl::Event gate(clCreateUserEvent(env.context(), &err), false);
        REQUIRE(err == CL_SUCCESS);
        // Two chunks on three staging buffers: the host never has to wait for a
        // held copy (with more chunks than buffers a staged upload would block).
        auto o = opts(staging, stage, 128 * 1024, 3);
        o.async = true;
        o.wait_for = {gate};
        const cl::Event e = upload(env.queue, dev, 0, src.data(), n, o);
        CHECK(status_of(e) > CL_COMPLETE);
        clSetUserEventStatus(gate(), CL_COMPLETE);
        e.wait();
        CHECK(read_all(dev.buffer(), n) == src);
    }
}

TEST_CASE("bad transfers are refused with the numbers, and nothing is written") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    auto dev = device.allocate(1000);
    fill(dev.buffer(), dev.bucket_size(), 0xEE);
    std::vector<unsigned char> src(2000, 1);
    auto o = opts(staging, true);

    try {
        upload(env.queue, dev, 10, src.data(), 991, o);
        FAIL("expected size_error");
    } catch (const size_error& e) {
        CHECK(std::string(e.what()).find("991") != std::string::npos);
        CHECK(std::string(e.what()).find("offset 10") != std::string::npos);
        CHECK(e.limit() == 1000);
        // Nothing was being allocated: the message names the transfer, not an allocation.
        CHECK(std::string(e.what()).find("allocate") == std::string::npos);
        CHECK(std::string(e.what()).find("transfer of 991 bytes at offset 10") != std::string::npos);
        CHECK(std::string(e.what()).find("1000-byte") != std::string::npos);
    }
    // The handle's nbytes is the limit, not the bucket (1024) behind it.
    CHECK_THROWS_AS(download(env.queue, src.data(), dev, 0, 1001, o), size_error);
    // The raw buffer's limit is its real size.
    CHECK_THROWS_AS(upload(env.queue, dev.buffer(), 0, src.data(), dev.bucket_size() + 1, o), size_error);
    CHECK_THROWS_AS(upload(env.queue, dev, std::size_t(-1), src.data(), 2, o), size_error);
    CHECK_THROWS_WITH_AS(upload(env.queue, dev, 0, nullptr, 10, o),
                         doctest::Contains("clpool: transfer of 10 bytes with a null host pointer"), usage_error);
    BufferPool::handle empty;
    CHECK_THROWS_WITH_AS(upload(env.queue, empty, 0, src.data(), 1, o),
                         doctest::Contains("clpool: upload of 1 bytes at offset 0 into an empty handle"), usage_error);
    CHECK_THROWS_WITH_AS(download(env.queue, src.data(), empty, 3, 1, o),
                         doctest::Contains("clpool: download of 1 bytes at offset 3 from an empty handle"),
                         usage_error);

    auto bad = o;
    bad.staging_buffers = 1;
    try {
        upload(env.queue, dev, 0, src.data(), 10, bad);
        FAIL("expected config_error");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("staging_buffers=1") != std::string::npos);
    }
    bad = o;
    bad.chunk_bytes = (std::size_t{1} << 30) + 1;
    try {
        upload(env.queue, dev, 0, src.data(), 10, bad);
        FAIL("expected config_error");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("chunk_bytes=1073741825") != std::string::npos);
    }

    const auto after = read_all(dev.buffer(), 1000);
    CHECK(std::all_of(after.begin(), after.end(), [](unsigned char c) { return c == 0xEE; }));
    CHECK(staging.stats().bytes_in_use == 0);

    // Zero bytes is fine anywhere inside, including the end.
    upload(env.queue, dev, 1000, src.data(), 0, o).wait();
    download(env.queue, src.data(), dev, 0, 0, o).wait();
}

// A null cl::Buffer or cl::CommandQueue is the caller's mistake, refused as an empty handle is:
// passed on to the driver, it would come back as a bare driver code (CL_INVALID_MEM_OBJECT from
// clGetMemObjectInfo) naming neither the argument nor the mistake.
TEST_CASE("upload and download refuse a null cl::Buffer or cl::CommandQueue with a usage_error naming it") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    auto dev = device.allocate(64);
    std::vector<unsigned char> host(64, 7);
    const cl::Buffer null_buffer;
    const cl::CommandQueue null_queue;
    CHECK_THROWS_WITH_AS(upload(env.queue, null_buffer, 0, host.data(), 16),
                         doctest::Contains("clpool: upload of 16 bytes at offset 0 into a null cl::Buffer"),
                         usage_error);
    CHECK_THROWS_WITH_AS(download(env.queue, host.data(), null_buffer, 4, 16),
                         doctest::Contains("clpool: download of 16 bytes at offset 4 from a null cl::Buffer"),
                         usage_error);
    CHECK_THROWS_WITH_AS(upload(env.queue, null_buffer, 0, host.data(), 0), doctest::Contains("null cl::Buffer"),
                         usage_error);
    CHECK_THROWS_WITH_AS(upload(null_queue, dev.buffer(), 0, host.data(), 16),
                         doctest::Contains("clpool: upload of 16 bytes on a null cl::CommandQueue"), usage_error);
    CHECK_THROWS_WITH_AS(download(null_queue, host.data(), dev, 0, 16),
                         doctest::Contains("clpool: download of 16 bytes on a null cl::CommandQueue"), usage_error);
}

TEST_CASE("CLPOOL_PINNED_H2D / CLPOOL_ASYNC_H2D values parse or fail naming the variable") {
    CHECK(config::parse_bool("CLPOOL_PINNED_H2D", "0") == false);
    CHECK(config::parse_bool("CLPOOL_ASYNC_H2D", "1") == true);
    try {
        (void)config::parse_bool("CLPOOL_PINNED_H2D", "maybe");
        FAIL("expected config_error");
    } catch (const config_error& e) {
        CHECK(std::string(e.what()).find("CLPOOL_PINNED_H2D='maybe'") != std::string::npos);
    }
    // The process's own value: the default, the value given, or (ctest runs
    // this case once with CLPOOL_PINNED_H2D=maybe) a config_error on every use.
    const char* env = std::getenv("CLPOOL_PINNED_H2D");
    bool valid = true;
    std::optional<bool> value;  // unset: decided per device
    if (env) {
        try {
            value = config::parse_bool("CLPOOL_PINNED_H2D", env);
        } catch (const config_error&) {
            valid = false;
        }
    }
    if (valid) {
        CHECK(config::pinned_h2d() == value);
    } else {
        auto& q = OpenCLEnv::get().queue;
        BufferPool device(OpenCLEnv::get().context);
        auto dev = device.allocate(1 << 20);
        std::vector<unsigned char> src(1 << 20, 1);
        for (int i = 0; i < 2; ++i) {  // read once, reported on every use
            try {
                upload(q, dev, 0, src.data(), src.size());
                FAIL("expected config_error");
            } catch (const config_error& e) {
                CHECK(std::string(e.what()).find("CLPOOL_PINNED_H2D='maybe'") != std::string::npos);
            }
        }
    }
}

TEST_CASE("CLPOOL_ASYNC_H2D=0 makes uploads without an override blocking") {
    const char* a = std::getenv("CLPOOL_ASYNC_H2D");
    CHECK(config::async_h2d() == (a ? config::parse_bool("CLPOOL_ASYNC_H2D", a) : true));
    if (config::async_h2d()) return;  // ctest runs this case with CLPOOL_ASYNC_H2D=0
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    const std::size_t n = 1 << 20;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 21);
    for (bool stage : {true, false}) {
        TransferOptions o;
        o.stage = stage;
        cl_int s = CL_QUEUED;
        const cl::Event e = upload(env.queue, dev, 0, src.data(), n, o);
        clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
        CHECK(s == CL_COMPLETE);
    }
}

TEST_CASE("with no override, staging follows the device: off where it shares host memory") {
    auto& env = OpenCLEnv::get();
    if (std::getenv("CLPOOL_PINNED_H2D")) return;  // the variable decides instead (the case above)
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t n = 2 << 20;
    auto dev = device.allocate(n);
    const auto src = pattern(n, 11);
    TransferOptions o;
    o.staging_pool = &staging;
    upload(env.queue, dev, 0, src.data(), n, o).wait();
    CHECK((staging.stats().misses > 0) == !staging.backend().unified_memory());
    CHECK(read_all(dev.buffer(), n) == src);
}

TEST_CASE("chunks: at most chunk_bytes, a short transfer cut in staging_buffers pieces, never below 64 KiB") {
    TransferOptions o;
    o.chunk_bytes = 4 << 20;
    o.staging_buffers = 4;
    CHECK(detail::chunk_for(64 << 20, o) == (4u << 20));
    CHECK(detail::chunk_for(16 << 20, o) == (4u << 20));
    CHECK(detail::chunk_for(1 << 20, o) == (256u << 10));
    CHECK(detail::chunk_for((1 << 20) + 1, o) == (512u << 10));
    CHECK(detail::chunk_for(100 << 10, o) == (64u << 10));
    CHECK(detail::chunk_for(1000, o) == 1000);
    o.staging_buffers = 3;
    CHECK(detail::chunk_for(12 << 20, o) == (4u << 20));
    CHECK(detail::chunk_for(3 << 20, o) == (1u << 20));
    CHECK(detail::chunk_for(1 << 20, o) == (512u << 10));  // 341 KiB rounds up: 2 chunks on 3 buffers
    o.chunk_bytes = 100000;  // not a power of two: still the cap
    CHECK(detail::chunk_for(1 << 30, o) == 100000);
    // Never more chunks than buffers below staging_buffers * chunk_bytes.
    for (unsigned b = 2; b <= 8; ++b) {
        o.staging_buffers = b;
        o.chunk_bytes = 4 << 20;
        for (std::size_t n = 1; n <= b * o.chunk_bytes; n = n * 3 + 1) {
            const std::size_t c = detail::chunk_for(n, o);
            CHECK((n + c - 1) / c <= b);
        }
    }
}

TEST_CASE("chunks: chunk_bytes 0 picks a power of two near n/8 between 4 and 16 MiB") {
    TransferOptions o;  // chunk_bytes 0 is the default
    CHECK(o.chunk_bytes == 0);
    CHECK(detail::chunk_for(std::size_t{1} << 30, o) == (16u << 20));
    CHECK(detail::chunk_for(std::size_t{256} << 20, o) == (16u << 20));
    CHECK(detail::chunk_for(64 << 20, o) == (8u << 20));
    CHECK(detail::chunk_for(32 << 20, o) == (4u << 20));
    CHECK(detail::chunk_for(16 << 20, o) == (4u << 20));
    CHECK(detail::chunk_for(4 << 20, o) == (2u << 20));  // fewer chunks than buffers: cut in 3, rounded up
    CHECK(detail::chunk_for(1 << 20, o) == (512u << 10));  // fewer chunks than buffers: cut in 3
    CHECK(detail::chunk_for(1000, o) == 1000);
}

TEST_CASE("small pageable copies without wait_for block and return a complete event") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    const std::size_t n = 64 * 1024;
    auto dev = device.allocate(n);
    fill(dev.buffer(), n, 0);
    auto src = pattern(n, 11);
    const auto expect = src;
    TransferOptions o;
    o.async = true;  // CLPOOL_ASYNC_H2D=1 permits an early return; a small pageable write still blocks
    const cl::Event up = upload(env.queue, dev, 0, src.data(), n, o);
    CHECK(status_of(up) == CL_COMPLETE);
    std::memset(src.data(), 0, n);  // the source is free at once
    std::vector<unsigned char> back(n, 0);
    const cl::Event down = download(env.queue, back.data(), dev, 0, n);
    CHECK(status_of(down) == CL_COMPLETE);
    CHECK(back == expect);

    // With wait_for they stay non-blocking: a held gate must not hang the call.
    cl_int err = CL_SUCCESS;
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    TransferOptions held;
    held.wait_for = {gate};
    std::vector<unsigned char> later(n, 0);
    const cl::Event d2 = download(env.queue, later.data(), dev, 0, n, held);
    CHECK(status_of(d2) > CL_COMPLETE);
    clSetUserEventStatus(gate(), CL_COMPLETE);
    d2.wait();
    CHECK(later == expect);

    // Pinned destinations stay non-blocking (the event is what the caller waits on).
    PinnedVector<unsigned char> pv(n, 0, PinnedAllocator<unsigned char>(env.queue));
    download(env.queue, pv.data(), dev, 0, n).wait();
    CHECK(std::equal(pv.begin(), pv.end(), expect.begin()));
}

TEST_CASE("a staged transfer never waits behind another one held by a user event, nor reuses its staging") {
    auto& env = OpenCLEnv::get();
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t n = 256 * 1024;
    auto held_dst = device.allocate(n);
    auto other = device.allocate(n);
    fill(held_dst.buffer(), n, 0);
    const auto src = pattern(n, 13);
    REQUIRE(clEnqueueWriteBuffer(env.queue(), other.buffer()(), CL_TRUE, 0, n, src.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);

    cl_int err = CL_SUCCESS;
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl_command_queue raw_q = clCreateCommandQueue(env.context(), env.device(), 0, &err);
    REQUIRE(err == CL_SUCCESS);
    const cl::CommandQueue held_queue(raw_q, false);

    // Two chunks, two staging buffers: the upload returns with both under copies held by the gate.
    auto o = opts(staging, true, 128 * 1024, 2);
    o.wait_for = {gate};
    o.async = true;
    const cl::Event held = upload(held_queue, held_dst, 0, src.data(), n, o);
    CHECK(status_of(held) > CL_COMPLETE);
    CHECK(staging.stats().bytes_pending == 2 * staging.bucket_size_for(128 * 1024));

    // Meanwhile a staged download on the test queue completes, through other staging buffers.
    auto o2 = opts(staging, true, 128 * 1024, 2);
    std::vector<unsigned char> back(n, 0);
    download(env.queue, back.data(), other, 0, n, o2);
    CHECK(back == src);
    CHECK(staging.stats().misses == 4);  // the held two were not handed out
    CHECK(status_of(held) > CL_COMPLETE);

    clSetUserEventStatus(gate(), CL_COMPLETE);
    held.wait();
    CHECK(read_all(held_dst.buffer(), n) == src);
    CHECK(staging.stats().bytes_in_use == 0);
}

TEST_CASE("on an out-of-order queue every staged chunk waits for wait_for, and the event covers them all") {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_command_queue raw_q =
        clCreateCommandQueue(env.context(), env.device(), CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    REQUIRE(err == CL_SUCCESS);  // PoCL supports out-of-order queues
    const cl::CommandQueue ooo(raw_q, false);
    BufferPool device(env.context);
    MappedPinnedPool staging(env.context);
    const std::size_t chunk = 64 * 1024, n = 4 * chunk + 77;
    auto dev = device.allocate(n);
    fill(dev.buffer(), n, 0xEE);
    env.queue.finish();
    const auto src = pattern(n, 21);
    cl::Event gate(clCreateUserEvent(env.context(), &err), false);
    REQUIRE(err == CL_SUCCESS);
    auto o = opts(staging, true, chunk, 8);  // five chunks, five buffers: no host wait
    o.wait_for = {gate};
    o.async = true;
    const cl::Event done = upload(ooo, dev, 0, src.data(), n, o);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(status_of(done) > CL_COMPLETE);
    CHECK(read_all(dev.buffer(), n) == std::vector<unsigned char>(n, 0xEE));  // no chunk ran early
    clSetUserEventStatus(gate(), CL_COMPLETE);
    done.wait();
    CHECK(read_all(dev.buffer(), n) == src);
}

TEST_CASE("parallel host copies from several threads at once are each exact") {
    const std::size_t n = (3 << 20) + 4097;
    std::vector<std::thread> threads;
    std::atomic<int> bad{0};
    for (unsigned t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            const auto src = pattern(n, 100 + t);
            std::vector<unsigned char> dst(n);
            for (int round = 0; round < 20; ++round) {
                std::fill(dst.begin(), dst.end(), 0);
                detail::copy_workers::instance().copy(dst.data(), src.data(), n, 3 + t % 2);
                if (std::memcmp(dst.data(), src.data(), n) != 0) bad.fetch_add(1);
            }
        });
    for (auto& th : threads) th.join();
    CHECK(bad == 0);
}

TEST_CASE("parallel host copies are exact for odd sizes, part counts and alignments, streaming or not") {
    for (std::size_t n :
         {std::size_t{1}, std::size_t{63}, std::size_t{300000}, std::size_t{(1 << 20) + 4097}, std::size_t{5 << 20}}) {
        for (unsigned parts : {1u, 2u, 3u, 8u}) {
            for (bool stream : {false, true}) {
                for (std::size_t skew : {std::size_t{0}, std::size_t{1}, std::size_t{17}}) {
                    CAPTURE(n);
                    CAPTURE(parts);
                    CAPTURE(stream);
                    CAPTURE(skew);
                    const auto src = pattern(n + skew, static_cast<unsigned>(n + parts + skew));
                    std::vector<unsigned char> dst(n + 2 + skew, 0x42);
                    // dst at an odd offset, src at another: both unaligned for the vector stores
                    detail::copy_workers::instance().copy(dst.data() + 1 + skew / 2, src.data() + skew, n, parts,
                                                          stream);
                    CHECK(std::all_of(dst.begin(), dst.begin() + 1 + skew / 2,
                                      [](unsigned char c) { return c == 0x42; }));
                    CHECK(std::all_of(dst.begin() + 1 + skew / 2 + n, dst.end(),
                                      [](unsigned char c) { return c == 0x42; }));
                    CHECK(std::memcmp(dst.data() + 1 + skew / 2, src.data() + skew, n) == 0);
                }
            }
        }
    }
}

// TransferOptions::copy_threads is 0 or 1..32 (transfer.hpp, TRANSFERS.md), and bad options
// throw config_error naming them: a large value taken as is would start that many worker
// threads, which never end.
TEST_CASE("TransferOptions::copy_threads outside 0..32 is a config_error naming the value") {
    auto& env = OpenCLEnv::get();
    cl::Buffer dev(env.context, CL_MEM_READ_WRITE, 4096);
    std::vector<unsigned char> src(4096, 1);
    TransferOptions o;
    o.copy_threads = 33;
    bool threw = false;
    try {
        upload(env.queue, dev, 0, src.data(), src.size(), o).wait();
    } catch (const config_error& e) {
        threw = true;
        CHECK(std::string(e.what()).find("copy_threads=33") != std::string::npos);
    }
    CHECK_MESSAGE(threw, "copy_threads=33 was accepted");
}

#endif  // CLPOOL_HAS_OPENCL
