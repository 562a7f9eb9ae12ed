// The drop-in's CL_MEM_COPY_HOST_PTR data against a bucket's old owner, and TransferOptions checked in full:
// each case failed before its fix.
#include <clpool/interop/dropin.hpp>
#include <clpool/interop/transfer.hpp>

#include "opencl_env.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using clpool::test::OpenCLEnv;

namespace {

struct FreshCtx {
    OpenCLEnv& env = OpenCLEnv::get();
    cl::Context context;
    cl::CommandQueue queue;
    FreshCtx() {
        cl_int err = CL_SUCCESS;
        cl_device_id d = env.device();
        context = cl::Context(clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err), false);
        REQUIRE(err == CL_SUCCESS);
        queue = cl::CommandQueue(clCreateCommandQueue(context(), d, 0, &err), false);
        REQUIRE(err == CL_SUCCESS);
    }
    bool wait_cached(std::size_t bytes, cl_mem_flags flags) const {
        for (int i = 0; i < 200; ++i) {
            auto s = dropin_stats(context, flags);
            if (s && s->bytes_cached >= bytes) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return false;
    }
};

}  // namespace

// Before: the drop-in pooled CL_MEM_COPY_HOST_PTR and wrote the data on a queue of its own,
// which nothing ordered after the commands the bucket's old owner still had queued (PoCL
// hands a bucket back while they wait): the old owner's gated write landed on top of the new
// owner's data. Now such buffers go to the driver, as with cl::Buffer.
TEST_CASE("a pooled CL_MEM_COPY_HOST_PTR buffer keeps its data when the bucket's old owner had a queued write") {
    FreshCtx f;
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

// TransferOptions::copy_threads is 0 or 1..8 (transfer.hpp, TRANSFERS.md), and bad options
// throw config_error naming them. Before, it was not checked: any value was taken (a large
// one started that many worker threads, which never end).
TEST_CASE("TransferOptions::copy_threads outside 0..8 is a config_error naming the value") {
    auto& env = OpenCLEnv::get();
    cl::Buffer dev(env.context, CL_MEM_READ_WRITE, 4096);
    std::vector<unsigned char> src(4096, 1);
    TransferOptions o;
    o.copy_threads = 9;
    bool threw = false;
    try {
        upload(env.queue, dev, 0, src.data(), src.size(), o).wait();
    } catch (const config_error& e) {
        threw = true;
        CHECK(std::string(e.what()).find("copy_threads=9") != std::string::npos);
    }
    CHECK_MESSAGE(threw, "copy_threads=9 was accepted");
}
