// ShapeMirror on the test OpenCL device (PoCL in CI): contents, one upload, a kernel reads it, back to the pool,
// and no OpenCL call when a mirrored shape is reclaimed after clpool's exit handler.
#include "opencl_env.hpp"

#include <clpool/clpool.hpp>
#include <clpool/shapes/shape_trie.hpp>

#include <doctest/doctest.h>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/shapes/shape_mirror.hpp>

#include "cl_events.hpp"
#include "rerun_self.hpp"

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace clpool;
using i64 = std::int64_t;

namespace {

std::vector<i64> read_back(const cl::Buffer& b, std::size_t words) {
    std::vector<i64> out(words, -7);
    const cl_int err = clEnqueueReadBuffer(test::OpenCLEnv::get().queue(), b(), CL_TRUE, 0, words * sizeof(i64),
                                           out.data(), 0, nullptr, nullptr);
    REQUIRE(err == CL_SUCCESS);
    return out;
}

}  // namespace

TEST_CASE("the device mirror holds the canonical words, uploaded once, and goes back to the pool") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    {
        Shape a = trie.intern({2, 3, 4}, ElementType::f32);
        const i64 ext[] = {5, 7}, str[] = {1, 5};
        Shape b = trie.intern(ext, str, ElementType::i64, Order::f);

        const cl::Buffer& da = mirror.buffer(a);
        CHECK(read_back(da, a.words().size()) == std::vector<i64>(a.words().begin(), a.words().end()));
        const cl::Buffer& db = mirror.buffer(b);
        CHECK(read_back(db, b.words().size()) == std::vector<i64>(b.words().begin(), b.words().end()));
        CHECK(da() != db());
        CHECK(mirror.uploads() == 2);

        // Again, and through another handle to the same shape: the same buffer, no upload.
        Shape a2 = trie.intern({2, 3, 4}, ElementType::f32);
        CHECK(mirror.buffer(a2)() == da());
        CHECK(&mirror.buffer(a) == &da);
        CHECK(mirror.uploads() == 2);
        CHECK(pool.stats().bytes_in_use >= a.size_bytes() + b.size_bytes());

        // A second mirror (as for another device) has its own copy on the same entry.
        BufferPool pool2(env.context);
        ShapeMirror mirror2(pool2, env.queue);
        const cl::Buffer& other = mirror2.buffer(a);
        CHECK(other() != da());
        CHECK(read_back(other, a.words().size()) == read_back(da, a.words().size()));
        CHECK(mirror.buffer(a)() == da());
        // pool2 dies first: its buffer is an orphan freed with the shape.
    }
    // Both shapes are dead: retired with their buffers, which go back to the
    // pool when reclaim frees the entries (collect, or every 128 retires).
    CHECK(pool.stats().bytes_in_use > 0);
    ShapeTrie::collect();
    const auto st = pool.stats();
    CHECK(trie.size() == 0);
    CHECK(st.bytes_in_use == 0);
    CHECK(st.bytes_cached > 0);
    CHECK_THROWS_AS((void)mirror.buffer(Shape()), usage_error);

    // The cached buffer is reused by the next shape's upload, with its own contents.
    Shape c = trie.intern({9}, ElementType::u8);
    const cl::Buffer& dc = mirror.buffer(c);
    CHECK(pool.stats().hits >= 1);
    CHECK(read_back(dc, c.words().size()) == std::vector<i64>(c.words().begin(), c.words().end()));
}

TEST_CASE("a kernel reads the mirrored shape with no upload per launch") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    const char* source = R"CL(
        __kernel void shape_probe(__global const long* shape, __global long* out) {
            const long r = shape[0];
            long n = 1;
            for (long i = 0; i < r; ++i) n *= shape[1 + i];
            out[0] = r;
            out[1] = n;                   // recomputed from the extents
            out[2] = shape[1 + r];        // first stride
            out[3] = shape[2 * r + 1];    // element type code
            out[4] = shape[2 * r + 2];    // order code
            out[5] = shape[2 * r + 3];    // stored element count
        })CL";
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(env.context(), 1, &source, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
    cl_device_id dev = env.device();
    err = clBuildProgram(program, 1, &dev, "", nullptr, nullptr);
    REQUIRE(err == CL_SUCCESS);
    cl_kernel kernel = clCreateKernel(program, "shape_probe", &err);
    REQUIRE(err == CL_SUCCESS);
    cl_mem out = clCreateBuffer(env.context(), CL_MEM_WRITE_ONLY, 6 * sizeof(i64), nullptr, &err);
    REQUIRE(err == CL_SUCCESS);

    Shape held = trie.intern({2, 3, 4}, ElementType::bf16);  // lives across both of its launches
    for (const auto& ext : std::vector<std::vector<i64>>{{2, 3, 4}, {7}, {1, 2, 3, 4, 5, 6}, {2, 3, 4}}) {
        Shape s = trie.intern(ext, ElementType::bf16, Order::c);
        cl_mem shape_mem = mirror.buffer(s)();
        REQUIRE(clSetKernelArg(kernel, 0, sizeof(cl_mem), &shape_mem) == CL_SUCCESS);
        REQUIRE(clSetKernelArg(kernel, 1, sizeof(cl_mem), &out) == CL_SUCCESS);
        const std::size_t one = 1;
        REQUIRE(clEnqueueNDRangeKernel(env.queue(), kernel, 1, nullptr, &one, nullptr, 0, nullptr, nullptr) ==
                CL_SUCCESS);
        i64 got[6] = {};
        REQUIRE(clEnqueueReadBuffer(env.queue(), out, CL_TRUE, 0, sizeof got, got, 0, nullptr, nullptr) == CL_SUCCESS);
        CHECK(got[0] == static_cast<i64>(ext.size()));
        CHECK(got[1] == s.element_count());
        CHECK(got[2] == s.strides()[0]);
        CHECK(got[3] == static_cast<i64>(ElementType::bf16));
        CHECK(got[4] == 'c');
        CHECK(got[5] == s.element_count());
    }
    CHECK(mirror.uploads() == 3);  // {2, 3, 4}: one upload for two launches
    // {7} died after its launch and its buffer went back; a new {7} uploads again.
    Shape again = trie.intern({7}, ElementType::bf16);
    (void)mirror.buffer(again);
    CHECK(mirror.uploads() == 4);
    clReleaseMemObject(out);
    clReleaseKernel(kernel);
    clReleaseProgram(program);
}

TEST_CASE("threads asking for the same shapes' mirrors get one buffer each") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    std::vector<Shape> shapes;
    for (i64 n = 1; n <= 6; ++n) shapes.push_back(trie.intern({n, n + 1}, ElementType::f32));
    std::vector<std::vector<cl_mem>> seen(8, std::vector<cl_mem>(shapes.size()));
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (std::size_t i = 0; i < shapes.size(); ++i) {
                Shape mine = shapes[(i + static_cast<std::size_t>(t)) % shapes.size()];
                seen[static_cast<std::size_t>(t)][(i + static_cast<std::size_t>(t)) % shapes.size()] =
                    mirror.buffer(mine)();
            }
        });
    for (auto& th : threads) th.join();
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        std::set<cl_mem> distinct;
        for (const auto& row : seen) distinct.insert(row[i]);
        CHECK(distinct.size() == 1);
        CHECK(read_back(mirror.buffer(shapes[i]), shapes[i].words().size()) ==
              std::vector<i64>(shapes[i].words().begin(), shapes[i].words().end()));
    }
    CHECK(mirror.uploads() == shapes.size());
    shapes.clear();
    ShapeTrie::collect();
    CHECK(pool.stats().bytes_in_use == 0);
}

TEST_CASE("a reader keeps a dead shape's mirror buffer out of the pool until it ends") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    ShapeTrie::collect();
    Shape s = trie.intern({4, 4}, ElementType::f64);
    const cl::Buffer& buf = mirror.buffer(s);
    CHECK(read_back(buf, s.words().size()) == std::vector<i64>(s.words().begin(), s.words().end()));
    const auto in_use = pool.stats().bytes_in_use;
    REQUIRE(in_use > 0);
    {
        ShapeTrie::reader r(trie);
        const i64* p = r.find({4, 4}, ElementType::f64);
        REQUIRE(p == s.data());
        s.reset();  // dead and unlinked; the reader may still read it
        ShapeTrie::collect();
        CHECK(pool.stats().bytes_in_use == in_use);
        CHECK(p[1] == 4);
    }
    ShapeTrie::collect();
    CHECK(pool.stats().bytes_in_use == 0);
    CHECK(pool.stats().bytes_cached > 0);
}

// The mirror uploads on its own queue; a command that reads the shape waits on
// the application's queue (held back by a user event here). The shape dies and
// collect() runs meanwhile: the buffer must not go to the next shape's upload.
TEST_CASE("a mirror buffer read by a queued command is not reused before the command ran") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    cl_int err = CL_SUCCESS;
    cl::CommandQueue app(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
    REQUIRE(err == CL_SUCCESS);

    Shape a = trie.intern({2, 3, 4}, ElementType::f32);
    const std::vector<i64> a_words(a.words().begin(), a.words().end());
    std::vector<i64> seen(a_words.size(), -7);
    test::Gate gate;
    cl_event read = nullptr;
    REQUIRE(clEnqueueReadBuffer(app(), mirror.buffer(a)(), CL_FALSE, 0, a.size_bytes(), seen.data(), 1, &gate.event(),
                                &read) == CL_SUCCESS);
    const cl::Event reading(read, false);
    mirror.release_after(a, &reading, 1);
    const auto before = pool.stats().bytes_in_use;

    a.reset();
    ShapeTrie::collect();  // a's entry is freed: its buffer is handed back, pending on the read
    CHECK(pool.stats().bytes_in_use < before);
    Shape b = trie.intern({9, 8, 7}, ElementType::i32);  // same size: the same bucket
    const cl::Buffer& bb = mirror.buffer(b);             // uploads b's words (blocking, on the mirror's queue)
    CHECK(read_back(bb, b.words().size()) == std::vector<i64>(b.words().begin(), b.words().end()));

    gate.open();
    REQUIRE(clWaitForEvents(1, &read) == CL_SUCCESS);
    CHECK(seen == a_words);  // not b's words

    // Once the read has run, the old buffer is reusable.
    b.reset();
    ShapeTrie::collect();
    CHECK(pool.stats().bytes_in_use == 0);
}

TEST_CASE("ShapeMirror::release_after keeps its event list short and refuses an empty shape") {
    auto& env = test::OpenCLEnv::get();
    BufferPool pool(env.context);
    ShapeTrie trie;
    ShapeMirror mirror(pool, env.queue);
    CHECK_THROWS_AS(mirror.release_after(Shape(), env.queue), usage_error);
    Shape s = trie.intern({5}, ElementType::u8);
    mirror.release_after(s, env.queue);  // no buffer from this mirror yet: nothing to hold
    const cl_mem old = mirror.buffer(s)();
    const std::size_t bytes = s.size_bytes();
    test::Gate gate;
    std::vector<i64> sink(s.words().size());
    std::vector<cl::Event> reads;
    for (int i = 0; i < 100; ++i) {  // far more than are kept: merged into markers
        cl_event e = nullptr;
        REQUIRE(clEnqueueReadBuffer(env.queue(), mirror.buffer(s)(), CL_FALSE, 0, s.size_bytes(), sink.data(), 1,
                                    &gate.event(), &e) == CL_SUCCESS);
        reads.emplace_back(e, false);
        mirror.release_after(s, &reads.back(), 1);
    }
    s.reset();
    ShapeTrie::collect();
    CHECK(pool.stats().bytes_in_use == 0);
    {
        auto h = pool.allocate(bytes);  // the gate still holds every read: the old buffer is pending
        CHECK(h.buffer()() != old);
    }
    gate.open();
    REQUIRE(clFinish(env.queue()) == CL_SUCCESS);
}

namespace {
// Constructed before main, so destroyed after clpool's exit handler (armed
// when the child's pool registers its queue): drops the mirrored shape there,
// collects, and ends the process with what it saw. The event's reference
// count tells whether the attachment released its copy through the driver.
struct mirror_exit_probe {
    Shape shape;
    cl_event event = nullptr;
    cl_uint refs_before = 0;
    ~mirror_exit_probe() {
        if (!event) return;  // not the child
        if (!detail::exiting()) _exit(2);
        shape.reset();
        ShapeTrie::collect();
        cl_uint refs_after = 0;
        clGetEventInfo(event, CL_EVENT_REFERENCE_COUNT, sizeof refs_after, &refs_after, nullptr);
        _exit(refs_after == refs_before ? 0 : 3);
    }
};
mirror_exit_probe mirror_probe;
}  // namespace

// A mirror's attachment destroyed by a reclaim round at exit (a static's last Shape dropped and
// collected from its destructor, after clpool's exit handler) must make no OpenCL call: it leaks
// the reader events it keeps, as it leaks its buffer's handle there and as pools and handles do,
// rather than release them through a driver that may be gone.
TEST_CASE("shape child: a mirrored shape with a pending reader event, dropped at exit" * doctest::skip()) {
    auto& env = test::OpenCLEnv::get();
    ShapeMirror<> mirror(get_buffer_pool(env.queue), env.queue);  // the registry's pool: never destroyed
    mirror_probe.shape = ShapeTrie::global().intern({7, 11, 13}, ElementType::i16);
    REQUIRE(mirror.buffer(mirror_probe.shape)() != nullptr);
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(env.context(), &err);  // never completed: the attachment keeps it
    REQUIRE(err == CL_SUCCESS);
    {
        const cl::Event held(gate, true);
        mirror.release_after(mirror_probe.shape, &held, 1);
    }
    REQUIRE(clGetEventInfo(gate, CL_EVENT_REFERENCE_COUNT, sizeof mirror_probe.refs_before, &mirror_probe.refs_before,
                           nullptr) == CL_SUCCESS);
    CHECK(mirror_probe.refs_before == 2);  // this test's, the attachment's copy
    CHECK_FALSE(detail::exiting());
    mirror_probe.event = gate;
}

TEST_CASE("a mirrored shape reclaimed by a static destructor at exit makes no OpenCL release") {
    const int status =
        test::rerun_self("CLPOOL_TEST_SHAPE_CHILD=1", "shape child: a mirrored shape with a pending reader event*");
    INFO("child exit status " << status
                              << " (3: the attachment released its event through the driver; 2: the "
                                 "exit handler had not run)");
    CHECK(status == 0);
}
#endif
