// numa: the NUMA node a PCI device sits on, the CPUs of a node (read from sysfs), and binding a thread to them.
#pragma once

// On a host with several NUMA nodes, a staged copy to a device is fastest when the staging
// memory and the threads that fill it are on the device's node: the DMA then reads local memory
// and the copy threads write it without crossing the socket link. This header holds the pieces
// that need no OpenCL: the topology as Linux describes it under /sys (a root that tests replace
// with a directory tree of their own), the node a device at a PCI address belongs to, and the
// binding of a thread to a node's CPUs. Memory is placed by first touch, with no libnuma and no
// set_mempolicy: a thread bound to the node's CPUs commits it, and the kernel's default policy
// puts each page on the node of the CPU that first touched it.
//
// Everything here degrades to "no placement" (node -1): a host with one node, a device the
// kernel gives no node (numa_node -1), a sysfs that is not there (another OS, a container
// without /sys), or a node with no CPUs.

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace clpool::numa {

// A PCI function's address, as sysfs names it: domain:bus:device.function ("0000:65:00.0").
struct pci_address {
    unsigned domain = 0, bus = 0, device = 0, function = 0;

    std::string text() const {
        char s[32];
        std::snprintf(s, sizeof s, "%04x:%02x:%02x.%x", domain & 0xffffu, bus & 0xffu, device & 0x1fu, function & 0x7u);
        return s;
    }
    friend bool operator==(const pci_address&, const pci_address&) = default;
};

// The highest CPU number parse_cpulist accepts (the kernel's NR_CPUS is at most 8192).
inline constexpr unsigned max_cpu = 8191;

// A kernel CPU list ("0-3,8-11,16", as in nodeN/cpulist) as CPU numbers, ascending and without
// repeats. Blank text (a node with memory but no CPUs) gives an empty list. Throws
// std::invalid_argument naming the text for anything else that is not such a list, or for a
// CPU number above max_cpu.
inline std::vector<unsigned> parse_cpulist(std::string_view text) {
    auto fail = [&](const std::string& why) {
        throw std::invalid_argument("clpool: CPU list '" + std::string(text) + "': " + why +
                                    " (expected numbers and ranges separated by commas, e.g. 0-3,8-11)");
    };
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    std::vector<unsigned> cpus;
    if (text.empty()) return cpus;
    std::size_t i = 0;
    auto number = [&]() -> unsigned {
        if (i >= text.size() || text[i] < '0' || text[i] > '9')
            fail("a number is missing at offset " + std::to_string(i));
        unsigned long v = 0;
        for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
            v = v * 10 + static_cast<unsigned>(text[i] - '0');
            if (v > max_cpu) fail("CPU number above " + std::to_string(max_cpu));
        }
        return static_cast<unsigned>(v);
    };
    for (;;) {
        const unsigned lo = number();
        unsigned hi = lo;
        if (i < text.size() && text[i] == '-') {
            ++i;
            hi = number();
            if (hi < lo) fail("range " + std::to_string(lo) + "-" + std::to_string(hi) + " runs backwards");
        }
        for (unsigned c = lo; c <= hi; ++c) cpus.push_back(c);
        if (i == text.size()) break;
        if (text[i] != ',') fail(std::string("unexpected '") + text[i] + "' at offset " + std::to_string(i));
        ++i;
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

// The NUMA topology under a sysfs root ("/sys" on a real host; a test passes a directory of its
// own holding bus/pci/devices/<address>/numa_node and devices/system/node/nodeN/cpulist). Reads
// the files on each call: cheap, and only done when a device is first seen.
class topology {
public:
    explicit topology(std::string sysfs_root = "/sys") : root_(std::move(sysfs_root)) {}

    const std::string& root() const noexcept { return root_; }

    // The nodes, ascending (devices/system/node/nodeN); empty where sysfs says nothing.
    std::vector<int> nodes() const {
        std::vector<int> out;
#if defined(__linux__)
        DIR* d = ::opendir((root_ + "/devices/system/node").c_str());
        if (!d) return out;
        while (const dirent* e = ::readdir(d)) {
            const std::string_view name(e->d_name);
            if (name.size() <= 4 || name.substr(0, 4) != "node") continue;
            int n = 0;
            bool digits = true;
            for (char c : name.substr(4)) {
                if (c < '0' || c > '9' || n > 100000) digits = false;
                else n = n * 10 + (c - '0');
            }
            if (digits) out.push_back(n);
        }
        ::closedir(d);
        std::sort(out.begin(), out.end());
#endif
        return out;
    }

    // The node the kernel gives the PCI function at `a` (its numa_node file), or -1: no such
    // device, no file, or -1 there (one node, or firmware without proximity information).
    int node_of(const pci_address& a) const {
        const std::optional<std::string> s = read(root_ + "/bus/pci/devices/" + a.text() + "/numa_node");
        if (!s) return -1;
        std::istringstream in(*s);
        int n = -1;
        if (!(in >> n) || n < 0) return -1;
        return n;
    }

    // The PCI functions on `bus` at device.function in any domain (the NVIDIA query has no domain
    // on older drivers): their addresses as sysfs lists them.
    std::vector<pci_address> find_in_any_domain(unsigned bus, unsigned device, unsigned function) const {
        std::vector<pci_address> out;
#if defined(__linux__)
        DIR* d = ::opendir((root_ + "/bus/pci/devices").c_str());
        if (!d) return out;
        while (const dirent* e = ::readdir(d)) {
            unsigned dom = 0, b = 0, dv = 0, fn = 0;
            char tail = 0;
            if (std::sscanf(e->d_name, "%x:%x:%x.%x%c", &dom, &b, &dv, &fn, &tail) == 4 && b == bus && dv == device &&
                fn == function)
                out.push_back({dom, b, dv, fn});
        }
        ::closedir(d);
#endif
        return out;
    }

    // The CPUs of `node` (nodeN/cpulist); empty if there is no such node or it has no CPUs.
    // Throws std::invalid_argument if the file holds something that is not a CPU list.
    std::vector<unsigned> cpus_of(int node) const {
        if (node < 0) return {};
        const std::optional<std::string> s =
            read(root_ + "/devices/system/node/node" + std::to_string(node) + "/cpulist");
        return s ? parse_cpulist(*s) : std::vector<unsigned>{};
    }

private:
    static std::optional<std::string> read(const std::string& path) {
        std::ifstream f(path);
        if (!f) return std::nullopt;
        std::ostringstream s;
        s << f.rdbuf();
        return s.str();
    }

    std::string root_;
};

// Where the staging memory and copy threads for one device go.
struct placement {
    int node = -1;               // -1: no placement (see why)
    std::vector<unsigned> cpus;  // the node's CPUs; empty when node is -1
    std::string why;             // one line for diagnostics
};

// The placement for the device at `address` (nullopt: the driver did not say where it is): its
// node and that node's CPUs, if the host has more than one node, the kernel knows the device's
// node and that node has CPUs; otherwise node -1 and the reason. Never throws for a missing or
// malformed file: it is reported in `why`.
inline placement place(const topology& t, const std::optional<pci_address>& address) {
    placement p;
    const std::vector<int> nodes = t.nodes();
    if (nodes.size() < 2) {
        p.why = nodes.empty() ? "no NUMA information under " + t.root() : "one NUMA node";
        return p;
    }
    if (!address) {
        p.why = "the driver does not report the device's PCI address";
        return p;
    }
    const int node = t.node_of(*address);
    if (node < 0) {
        p.why = "the kernel gives " + address->text() + " no NUMA node";
        return p;
    }
    try {
        p.cpus = t.cpus_of(node);
    } catch (const std::exception& e) {
        p.why = e.what();
        return p;
    }
    if (p.cpus.empty()) {
        p.why = "node " + std::to_string(node) + " of " + address->text() + " has no CPUs";
        return p;
    }
    p.node = node;
    p.why = address->text() + " is on node " + std::to_string(node);
    return p;
}

// The process's own topology, read from /sys.
inline const topology& system_topology() {
    static const topology t;
    return t;
}

// Binds the calling thread to `cpus` (pthread_setaffinity_np). Returns false, leaving the thread
// as it was, if cpus is empty, not Linux, or the kernel refuses (none of them in this process's
// cpuset, say).
inline bool bind_current_thread(const std::vector<unsigned>& cpus) noexcept {
#if defined(__linux__)
    if (cpus.empty()) return false;
    const unsigned top = *std::max_element(cpus.begin(), cpus.end());
    cpu_set_t* set = CPU_ALLOC(top + 1);
    if (!set) return false;
    const std::size_t size = CPU_ALLOC_SIZE(top + 1);
    CPU_ZERO_S(size, set);
    for (unsigned c : cpus) CPU_SET_S(c, size, set);
    const bool ok = pthread_setaffinity_np(pthread_self(), size, set) == 0;
    CPU_FREE(set);
    return ok;
#else
    static_cast<void>(cpus);
    return false;
#endif
}

// The CPUs the calling thread may run on; empty if unknown.
inline std::vector<unsigned> current_affinity() {
    std::vector<unsigned> out;
#if defined(__linux__)
    constexpr unsigned n = max_cpu + 1;
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) return out;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    if (pthread_getaffinity_np(pthread_self(), size, set) == 0)
        for (unsigned c = 0; c < n; ++c)
            if (CPU_ISSET_S(c, size, set)) out.push_back(c);
    CPU_FREE(set);
#endif
    return out;
}

// Binds the calling thread to `cpus` for its lifetime and gives it its previous CPUs back: for
// work that must run on a device's node (the allocation and first touch of staging memory) on a
// thread that runs elsewhere afterwards. Does nothing for an empty list, or if the thread's
// CPUs cannot be read (then it could not give them back). Never throws.
class scoped_binding {
public:
    explicit scoped_binding(const std::vector<unsigned>& cpus) noexcept {
        if (cpus.empty()) return;
        try {
            previous_ = current_affinity();
        } catch (...) {
            return;  // out of memory: stay unbound
        }
        bound_ = !previous_.empty() && bind_current_thread(cpus);
    }
    scoped_binding(const scoped_binding&) = delete;
    scoped_binding& operator=(const scoped_binding&) = delete;
    ~scoped_binding() {
        if (bound_) bind_current_thread(previous_);
    }
    bool bound() const noexcept { return bound_; }

private:
    std::vector<unsigned> previous_;
    bool bound_ = false;
};

// Writes one byte per page of [p, p + n) (the value already there), so each page is committed
// now, by the calling thread: on the node of its CPU under the kernel's default policy. Pages
// already committed stay where they are: touch memory before anything else does.
inline void touch_pages(void* p, std::size_t n) noexcept {
#if defined(__unix__)
    const long ps = ::sysconf(_SC_PAGESIZE);
    const std::size_t page = ps > 0 ? static_cast<std::size_t>(ps) : 4096;
#else
    const std::size_t page = 4096;
#endif
    auto* c = static_cast<volatile char*>(p);
    for (std::size_t i = 0; i < n; i += page) c[i] = c[i];
    if (n) c[n - 1] = c[n - 1];
}

}  // namespace clpool::numa
