// NUMA placement: the node and CPUs chosen for a device, read from a fake sysfs tree, and the copy workers bound to them.
#include "opencl_env.hpp"

#include <clpool/platform/numa.hpp>
#include <clpool/interop/detail/parallel_copy.hpp>
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/platform/numa_opencl.hpp>
#endif

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// Named, not anonymous: the suites build in unity batches, so helpers carry this suite's name.
namespace numa_test {

namespace fs = std::filesystem;
using clpool::numa::pci_address;

// A sysfs root of the test's own, removed at the end.
struct fake_sysfs {
    fs::path root;

    fake_sysfs() {
        std::string templ = (fs::temp_directory_path() / "clpool-numa-XXXXXX").string();
        if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
        root = templ;
    }
    ~fake_sysfs() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    void write(const std::string& rel, const std::string& text) const {
        const fs::path p = root / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
    }
    void node(int n, const std::string& cpulist) const {
        write("devices/system/node/node" + std::to_string(n) + "/cpulist", cpulist + "\n");
    }
    void device(const std::string& address, const std::string& numa_node) const {
        write("bus/pci/devices/" + address + "/numa_node", numa_node + "\n");
    }
    clpool::numa::topology topology() const { return clpool::numa::topology(root.string()); }
};

// Two sockets as a 2-socket server lays them out: node 0 has CPUs 0-3 and their siblings 8-11.
void two_nodes(const fake_sysfs& s) {
    s.node(0, "0-3,8-11");
    s.node(1, "4-7,12-15");
    s.write("devices/system/node/online", "0-1\n");  // a file beside the node folders, not a node
    s.device("0000:17:00.0", "0");
    s.device("0000:65:00.0", "1");
    s.device("0000:b3:00.0", "-1");  // firmware without proximity information
}

std::vector<unsigned> range(unsigned lo, unsigned hi) {
    std::vector<unsigned> v;
    for (unsigned c = lo; c <= hi; ++c) v.push_back(c);
    return v;
}

// How many of this process's threads may run on exactly `cpus` (/proc/self/task/*/status).
int threads_bound_to(const std::string& cpus) {
    int n = 0;
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
        std::ifstream f(task.path() / "status");
        for (std::string line; std::getline(f, line);)
            if (line.rfind("Cpus_allowed_list:", 0) == 0) {
                const std::string v = line.substr(line.find_first_not_of(" \t", 18));
                if (v == cpus) ++n;
            }
    }
    return n;
}

}  // namespace numa_test

TEST_CASE("numa: a CPU list is parsed, and a malformed one is refused naming it") {
    using clpool::numa::parse_cpulist;
    CHECK(parse_cpulist("0-3,8-11,16\n") == std::vector<unsigned>{0, 1, 2, 3, 8, 9, 10, 11, 16});
    CHECK(parse_cpulist("5") == std::vector<unsigned>{5});
    CHECK(parse_cpulist("3,1-2,2") == std::vector<unsigned>{1, 2, 3});
    CHECK(parse_cpulist("\n").empty());  // a node with memory and no CPUs
    for (const char* bad : {"0-", "3-1", "a", "1,,2", "1;2", "99999", "-1"}) {
        CAPTURE(bad);
        try {
            parse_cpulist(bad);
            FAIL("accepted");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
        }
    }
}

TEST_CASE("numa: a device's node and that node's CPUs are chosen from the topology") {
    numa_test::fake_sysfs s;
    numa_test::two_nodes(s);
    const auto t = s.topology();
    CHECK(t.nodes() == std::vector<int>{0, 1});

    const auto far = clpool::numa::place(t, clpool::numa::pci_address{0, 0x65, 0, 0});
    CHECK(far.node == 1);
    std::vector<unsigned> want = numa_test::range(4, 7);
    for (unsigned c : numa_test::range(12, 15)) want.push_back(c);
    CHECK(far.cpus == want);
    CHECK(far.why == "0000:65:00.0 is on node 1");

    const auto near = clpool::numa::place(t, clpool::numa::pci_address{0, 0x17, 0, 0});
    CHECK(near.node == 0);
    CHECK(near.cpus.front() == 0);
    CHECK(near.cpus.size() == 8);

    SUBCASE("the kernel gives the device no node") {
        const auto p = clpool::numa::place(t, clpool::numa::pci_address{0, 0xb3, 0, 0});
        CHECK(p.node == -1);
        CHECK(p.cpus.empty());
        CHECK(p.why.find("no NUMA node") != std::string::npos);
    }
    SUBCASE("no such device") { CHECK(clpool::numa::place(t, clpool::numa::pci_address{0, 0x99, 0, 0}).node == -1); }
    SUBCASE("the driver gives no PCI address") {
        const auto p = clpool::numa::place(t, std::nullopt);
        CHECK(p.node == -1);
        CHECK(p.why.find("PCI address") != std::string::npos);
    }
    SUBCASE("the device's node has no CPUs") {
        s.node(1, "");
        const auto p = clpool::numa::place(t, clpool::numa::pci_address{0, 0x65, 0, 0});
        CHECK(p.node == -1);
        CHECK(p.why.find("no CPUs") != std::string::npos);
    }
    SUBCASE("a malformed CPU list is reported, not thrown") {
        s.node(1, "4-x");
        const auto p = clpool::numa::place(t, clpool::numa::pci_address{0, 0x65, 0, 0});
        CHECK(p.node == -1);
        CHECK(p.why.find("'4-x'") != std::string::npos);
    }
}

TEST_CASE("numa: one node, or no NUMA information, places nothing") {
    numa_test::fake_sysfs s;
    SUBCASE("one node") {
        s.node(0, "0-15");
        s.device("0000:65:00.0", "0");
        const auto p = clpool::numa::place(s.topology(), clpool::numa::pci_address{0, 0x65, 0, 0});
        CHECK(p.node == -1);
        CHECK(p.why == "one NUMA node");
    }
    SUBCASE("an empty sysfs") {
        const auto p = clpool::numa::place(s.topology(), clpool::numa::pci_address{0, 0x65, 0, 0});
        CHECK(p.node == -1);
        CHECK(p.why.find("no NUMA information") != std::string::npos);
    }
}

TEST_CASE("numa: a bus, device and function is found in whichever PCI domain holds it") {
    numa_test::fake_sysfs s;
    numa_test::two_nodes(s);
    s.device("0001:ca:00.0", "1");
    const auto t = s.topology();
    CHECK(t.find_in_any_domain(0xca, 0, 0) == std::vector<clpool::numa::pci_address>{{1, 0xca, 0, 0}});
    CHECK(t.find_in_any_domain(0xca, 0, 1).empty());
    CHECK(t.node_of({1, 0xca, 0, 0}) == 1);
    CHECK(clpool::numa::pci_address{1, 0xca, 0x1f, 7}.text() == "0001:ca:1f.7");
}

#if defined(__linux__)
TEST_CASE("numa: a scoped binding moves the calling thread to the CPUs and back") {
    const std::vector<unsigned> before = clpool::numa::current_affinity();
    REQUIRE(!before.empty());
    {
        clpool::numa::scoped_binding bind({before.back()});
        CHECK(bind.bound());
        CHECK(clpool::numa::current_affinity() == std::vector<unsigned>{before.back()});
    }
    CHECK(clpool::numa::current_affinity() == before);
    clpool::numa::scoped_binding none({});
    CHECK_FALSE(none.bound());
}

TEST_CASE("numa: the copy workers for a node run on that node's CPUs") {
    // A fake second node whose CPU is a real one of this process, so the binding can succeed.
    const std::vector<unsigned> mine = clpool::numa::current_affinity();
    REQUIRE(!mine.empty());
    numa_test::fake_sysfs s;
    s.node(0, "0");
    s.node(1, std::to_string(mine.back()));
    s.device("0000:65:00.0", "1");
    const auto p = clpool::numa::place(s.topology(), clpool::numa::pci_address{0, 0x65, 0, 0});
    REQUIRE(p.node == 1);

    using clpool::detail::copy_workers;
    CHECK(&copy_workers::for_node(-1, p.cpus) == &copy_workers::instance());
    CHECK(&copy_workers::for_node(p.node, {}) == &copy_workers::instance());
    auto& w = copy_workers::for_node(p.node, p.cpus);
    CHECK(&w != &copy_workers::instance());
    CHECK(&copy_workers::for_node(p.node, p.cpus) == &w);
    CHECK(w.cpus() == p.cpus);

    const std::string bound = std::to_string(mine.back());
    const int already = numa_test::threads_bound_to(bound);
    std::vector<unsigned char> src(std::size_t{4} << 20), dst(src.size());
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
    w.copy(dst.data(), src.data(), src.size(), 2, /*stream=*/true);
    CHECK(dst == src);
    // The worker binds itself as it starts; give a slow start up to 10 s to be seen.
    int now = numa_test::threads_bound_to(bound);
    for (int i = 0; i < 1000 && now <= already; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        now = numa_test::threads_bound_to(bound);
    }
    CHECK(now > already);
}
#endif

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("numa: an OpenCL device off the PCI bus (PoCL's CPU device) gets no placement, and no error") {
    const cl_device_id d = clpool::test::OpenCLEnv::get().device();
    numa_test::fake_sysfs s;
    numa_test::two_nodes(s);
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
    if (type & CL_DEVICE_TYPE_CPU) {
        CHECK_FALSE(clpool::numa::pci_address_of(d, s.topology()).has_value());
        CHECK(clpool::numa::placement_of(d, s.topology()).node == -1);
    }
    const auto& p = clpool::numa::placement_of(d);  // this host's own sysfs, kept per device
    CHECK(&clpool::numa::placement_of(d) == &p);
    CHECK_FALSE(p.why.empty());
}
#endif
