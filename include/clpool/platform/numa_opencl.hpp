// numa_opencl: an OpenCL device's PCI address (cl_khr_pci_bus_info or NVIDIA's query) and its NUMA placement.
#pragma once

#include <clpool/platform/numa.hpp>
#include <clpool/platform/opencl.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace clpool::numa {

namespace detail {
// The queries, by value, so that no extension header is needed.
inline constexpr cl_device_info pci_bus_info_khr = 0x410F;  // cl_khr_pci_bus_info: 4 cl_uint
inline constexpr cl_device_info pci_bus_id_nv = 0x4008;     // cl_nv_device_attribute_query
inline constexpr cl_device_info pci_slot_id_nv = 0x4009;    // (device << 3) | function
inline constexpr cl_device_info pci_domain_id_nv = 0x400A;  // newer NVIDIA drivers only
}  // namespace detail

// The device's PCI address: from cl_khr_pci_bus_info, else NVIDIA's bus and slot queries (and its
// domain query where the driver has it; without it the one function on that bus, device and
// function in any domain of `t`, if there is exactly one); nullopt for a device that is not on
// PCI (a CPU device) or a driver that says nothing. Never throws for a driver error.
inline std::optional<pci_address> pci_address_of(cl_device_id device, const topology& t = system_topology()) {
    struct {
        cl_uint domain, bus, device, function;
    } khr{};
    std::size_t got = 0;
    if (clGetDeviceInfo(device, detail::pci_bus_info_khr, sizeof khr, &khr, &got) == CL_SUCCESS && got == sizeof khr)
        return pci_address{khr.domain, khr.bus, khr.device, khr.function};
    cl_uint bus = 0, slot = 0, domain = 0;
    if (clGetDeviceInfo(device, detail::pci_bus_id_nv, sizeof bus, &bus, nullptr) != CL_SUCCESS ||
        clGetDeviceInfo(device, detail::pci_slot_id_nv, sizeof slot, &slot, nullptr) != CL_SUCCESS)
        return std::nullopt;
    const pci_address a{0, bus & 0xffu, (slot >> 3) & 0x1fu, slot & 0x7u};
    if (clGetDeviceInfo(device, detail::pci_domain_id_nv, sizeof domain, &domain, nullptr) == CL_SUCCESS)
        return pci_address{domain, a.bus, a.device, a.function};
    const std::vector<pci_address> found = t.find_in_any_domain(a.bus, a.device, a.function);
    if (found.size() == 1) return found.front();
    return a;  // domain 0: the usual case, and sysfs will say "no node" if it is wrong
}

// The placement for an OpenCL device: place(t, pci_address_of(device, t)).
inline placement placement_of(cl_device_id device, const topology& t) { return place(t, pci_address_of(device, t)); }

// The same against /sys, worked out once per device and kept for the process (a device's node
// does not change): the staged transfers ask on every call.
inline const placement& placement_of(cl_device_id device) {
    static std::mutex m;
    static auto* known = new std::vector<std::pair<cl_device_id, placement*>>;  // never freed: used until exit
    std::lock_guard lock(m);
    for (const auto& [d, p] : *known)
        if (d == device) return *p;
    auto* p = new placement(placement_of(device, system_topology()));
    known->emplace_back(device, p);
    return *p;
}

}  // namespace clpool::numa
