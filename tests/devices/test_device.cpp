// Devices: enumeration, DeviceHandle, facts, scopes (the selector grammar: test_selector.cpp).
#include <clpool/clpool.hpp>
#include <clpool/devices/device_handle.hpp>
#include <clpool/devices/device_list.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

using namespace clpool;

TEST_CASE("CLPOOL_DEVICE values are trimmed, and an empty one is a config_error") {
    CHECK(config::parse_device_spec("CLPOOL_DEVICE", "  gpu ") == "gpu");
    CHECK_THROWS_AS(config::parse_device_spec("CLPOOL_DEVICE", "   "), config_error);
    CHECK_THROWS_WITH_AS(config::parse_device_spec("CLPOOL_DEVICE", ""), doctest::Contains("CLPOOL_DEVICE=''"),
                         config_error);
    // select_device("") is the same error, not the first device.
    CHECK_THROWS_WITH_AS(select_device(""), doctest::Contains("is empty"), config_error);
}

TEST_CASE("has_extension matches whole names only") {
    CHECK(has_extension("cl_khr_icd cl_khr_fp16 cl_khr_fp64", "cl_khr_fp16"));
    CHECK(has_extension("cl_khr_fp16", "cl_khr_fp16"));
    CHECK_FALSE(has_extension("cl_khr_fp16_extra cl_khr_fp64", "cl_khr_fp16"));
    CHECK_FALSE(has_extension("", "cl_khr_fp16"));
}

TEST_CASE("the host device: host backend, host pools, no OpenCL pools") {
    const auto& h = select_device("host");
    CHECK(h.backend() == BackendKind::host);
    CHECK(&h == &select_device("HOST"));
    CHECK(h.facts().unified_memory);
    CHECK_FALSE(h.facts().fp16);
    CHECK(h.facts().base_address_align == 4096);
    CHECK(&h.host_buffer_pool() == &get_host_buffer_pool());
    auto buf = h.host_buffer_pool().allocate(1000);
    REQUIRE(buf);
    CHECK(reinterpret_cast<std::uintptr_t>(buf.buffer().data()) % h.facts().base_address_align == 0);
    const std::size_t bucket = h.with_buffer_pool([](auto& pool) { return pool.bucket_size_for(1000); });
    CHECK(bucket == buf.bucket_size());
#ifdef CLPOOL_HAS_OPENCL
    CHECK(h.context()() == nullptr);
    CHECK_THROWS_AS((void)h.buffer_pool(), usage_error);
#endif
}

TEST_CASE("DeviceScope: thread-local, nested scopes restore the previous device") {
    const auto& host = select_device("host");
    const auto& outer_default = current_device();
    {
        DeviceScope a(host);
        CHECK(&current_device() == &host);
        const DeviceHandle* seen_by_other = nullptr;
        std::thread([&] { seen_by_other = &current_device(); }).join();
        CHECK(seen_by_other == &outer_default);  // another thread keeps its own current device
        {
            DeviceScope b("auto");
            CHECK(&current_device() == &select_device("auto"));
            CHECK(&b.device() == &current_device());
        }
        CHECK(&current_device() == &host);
        CHECK_THROWS_AS(DeviceScope("no-such-device-anywhere"), config_error);
        CHECK(&current_device() == &host);  // a failed scope changes nothing
    }
    CHECK(&current_device() == &outer_default);
}

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("list_devices finds the test device, and auto selects an OpenCL device when one exists") {
    const auto& env = test::OpenCLEnv::get();
    const auto devs = list_devices();
    REQUIRE_FALSE(devs.empty());  // CI has PoCL: no platform is a failure
    bool found = false;
    for (const auto& d : devs) {
        CHECK(d.index < devs.size());
        CHECK_FALSE(d.device_name.empty());
        found |= d.id == env.device();
    }
    CHECK(found);
    const auto& dev = select_device("auto");
    CHECK(dev.backend() == BackendKind::opencl);
    const auto m = match_device("auto", devs);
    CHECK(dev.device_id() == devs[m.index].id);
    CHECK(dev.device_name() == devs[m.index].device_name);
    CHECK(dev.platform_name() == devs[m.index].platform_name);
    CHECK(dev.type() == devs[m.index].type);
    // One handle per device: every selector that names it gives the same object.
    CHECK(&dev == &select_device(std::to_string(m.index)));
    CHECK(&dev == &select_device(std::to_string(devs[m.index].platform_index) + ":" +
                                 std::to_string(devs[m.index].device_index)));
    CHECK(&dev == &select_device("device:" + devs[m.index].device_name));
    CHECK(dev.usable());
}

TEST_CASE("device facts match the driver's answers") {
    const auto& dev = select_device("auto");
    const cl_device_id id = dev.device_id();
    const auto& f = dev.facts();
    CHECK(f.max_alloc == opencl::device_info<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    CHECK(f.base_address_align * 8 == opencl::device_info<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN));
    CHECK(f.base_address_align >= 4);
    CHECK((f.base_address_align & (f.base_address_align - 1)) == 0);
    CHECK(f.unified_memory == (opencl::device_info<cl_bool>(id, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE));
    const auto ext = opencl::device_string(id, CL_DEVICE_EXTENSIONS);
    CHECK(f.fp16 == (ext.find("cl_khr_fp16") != std::string::npos));
    CHECK(f.global_memory >= f.max_alloc);
}

TEST_CASE("a DeviceHandle reaches its context's pools, and its queue runs work") {
    const auto& dev = select_device("auto");
    CHECK(&dev.buffer_pool() == &get_buffer_pool(dev.queue()));
    CHECK(&dev.pinned_pool() == &get_pinned_pool(dev.queue()));
    CHECK(&dev.persistent_pool() == &get_persistent_pool(dev.queue()));
    auto h = dev.buffer_pool().allocate(4096);
    REQUIRE(h);
    cl_context owner = nullptr;
    clGetMemObjectInfo(h.buffer()(), CL_MEM_CONTEXT, sizeof owner, &owner, nullptr);
    CHECK(owner == dev.context()());
    const int pattern = 0x5a5a5a5a;
    REQUIRE(clEnqueueFillBuffer(dev.queue()(), h.buffer()(), &pattern, sizeof pattern, 0, 4096, 0, nullptr, nullptr) ==
            CL_SUCCESS);
    dev.finish();
    std::vector<int> back(1024);
    REQUIRE(clEnqueueReadBuffer(dev.queue()(), h.buffer()(), CL_TRUE, 0, 4096, back.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    CHECK(back[1023] == pattern);
    // The handle's queue is finished at exit and by shutdown().
    const auto queues = detail::queue_registry::instance().queues();
    CHECK(std::find(queues.begin(), queues.end(), dev.queue()()) != queues.end());
    const std::size_t bucket = dev.with_buffer_pool([](auto& pool) { return pool.bucket_size_for(3000); });
    CHECK(bucket == 4096);
}
#endif
