// interop/: defects found in review, each case failing before its fix.
#include <clpool/clpool.hpp>  // defines CLPOOL_HAS_OPENCL where the OpenCL parts are built
#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"

#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

// --- pinned_allocator.hpp --------------------------------------------------------------------------

// Before: the implicit move constructor and move assignment moved the shared arena out, leaving
// the source without one, against the allocator requirements (a moved-from allocator is
// unchanged and equal to its new copy). A std::vector moves its allocator when it is moved, so
// a moved-from PinnedVector, empty and valid, threw "default-constructed" on its next push_back.
TEST_CASE("a moved-from PinnedAllocator, and a moved-from PinnedVector, still allocate from the pool") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<int> a(pool);
    PinnedAllocator<int> b(std::move(a));
    CHECK(a == b);  // NOLINT(bugprone-use-after-move): the requirement under test
    int* p = nullptr;
    CHECK_NOTHROW(p = a.allocate(4));
    b.deallocate(p, 4);  // equal allocators free each other's memory
    PinnedAllocator<int> c(pool);
    c = std::move(b);
    CHECK(b == c);  // NOLINT(bugprone-use-after-move)
    CHECK(&b.pool() == &pool);

    PinnedVector<int> v{PinnedAllocator<int>(pool)};
    v.push_back(1);
    PinnedVector<int> w(std::move(v));
    v.clear();  // NOLINT(bugprone-use-after-move): a moved-from vector may be reused once cleared
    REQUIRE_NOTHROW(v.push_back(2));
    PinnedVector<int> x{PinnedAllocator<int>(pool)};
    x = std::move(w);  // propagates the allocator
    w.clear();         // NOLINT(bugprone-use-after-move)
    REQUIRE_NOTHROW(w.push_back(3));
    CHECK(x.size() == 1);
    CHECK(x[0] == 1);
    CHECK(v.back() == 2);
    CHECK(w.back() == 3);
}

namespace {
struct alignas(4194304) pinned_over_aligned {  // 4 MiB: beyond any driver's mapping we know
    char c;
};
}  // namespace

// Before: a T aligned beyond the driver's mapping of the pinned buffer (PoCL's: 128 or 1024 bytes,
// so alignas(4096) is enough) got a bare std::bad_alloc, whose what() says "std::bad_alloc":
// neither the alignment asked for nor the one the mapping had.
TEST_CASE("PinnedAllocator: a T aligned beyond the mapping is a size_error naming both alignments") {
    auto& env = OpenCLEnv::get();
    MappedPinnedPool pool(env.context);
    PinnedAllocator<pinned_over_aligned> a(pool);
    constexpr std::size_t asked = alignof(pinned_over_aligned);
    try {
        pinned_over_aligned* p = a.allocate(1);
        // A driver that maps this aligned serves it, aligned.
        CHECK(reinterpret_cast<std::uintptr_t>(p) % asked == 0);
        a.deallocate(p, 1);
    } catch (const size_error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(e.requested() == asked);
        CHECK(e.limit() < asked);
        CHECK(e.limit() > 0);
        CHECK(what.find("aligned to " + std::to_string(asked)) != std::string::npos);
        CHECK(what.find("(limit " + std::to_string(e.limit()) + " bytes)") != std::string::npos);
    } catch (const std::exception& e) {
        FAIL_CHECK("expected size_error, got: ", std::string(e.what()));
    }
    CHECK(pool.stats().bytes_in_use == 0);  // the buffer went back to the pool
}

// --- transfer.hpp ----------------------------------------------------------------------------------

// Before: upload and download with a default-constructed (null) cl::Buffer or cl::CommandQueue
// went to the driver, and the caller got "clGetMemObjectInfo failed with driver code -38" (or
// the enqueue's), naming neither the argument nor the mistake; the Handle overloads already
// refused an empty handle with a usage_error.
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

#endif  // CLPOOL_HAS_OPENCL
