// The device selector grammar (CLPOOL_DEVICE, select_device): match_device, pure functions over device descriptions.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/devices/device_description.hpp>

#include <cctype>
#include <charconv>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace clpool {

namespace detail {

inline std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}
inline bool contains_nocase(std::string_view hay, std::string_view needle) {
    return lower(hay).find(lower(needle)) != std::string::npos;
}
inline std::optional<std::size_t> parse_index(std::string_view s) {
    std::size_t v = 0;
    if (s.empty() || s.size() > 9) return std::nullopt;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

// The first GPU among the candidates, else the first candidate.
template <class Pred>
std::optional<std::size_t> prefer_gpu(std::span<const DeviceDescription> devices, Pred pred) {
    std::optional<std::size_t> first;
    for (const auto& d : devices) {
        if (!pred(d)) continue;
        if (d.type == DeviceType::gpu) return d.index;
        if (!first) first = d.index;
    }
    return first;
}

inline std::string list_for_error(std::span<const DeviceDescription> devices) {
    std::string s;
    for (const auto& d : devices) {
        s += "\n  " + std::to_string(d.index) + " (" + std::to_string(d.platform_index) + ":" +
             std::to_string(d.device_index) + ") " + to_string(d.type) + " '" + d.device_name + "' on platform '" +
             d.platform_name + "' (" + d.platform_vendor + ")";
    }
    if (devices.empty()) s += "\n  (no OpenCL device found)";
    s += "\n  host (the host backend: aligned host memory)";
    return s;
}

}  // namespace detail

// Resolves a device selector against `devices` (docs/DEVICES.md):
//   auto          a GPU if any, else the first OpenCL device, else the host backend
//   gpu | cpu | accelerator   the first OpenCL device of that type
//   host          the host backend
//   N             list_devices()[N];   P:D  device D of platform P
//   platform:TEXT a device (a GPU first) of a platform whose name or vendor contains TEXT
//   device:TEXT   the first device whose name contains TEXT
//   TEXT          a device (a GPU first) whose platform name, vendor or device name contains TEXT
// Case-insensitive. `source` names where the selector came from, for the
// message. Throws config_error naming the selector and listing every device
// if nothing matches. Pure: touches no driver. Thread-safe.
inline DeviceMatch match_device(std::string_view selector, std::span<const DeviceDescription> devices,
                                std::string_view source = "device selector") {
    const std::string spec = detail::lower(selector);
    auto fail = [&](const std::string& why) -> DeviceMatch {
        throw config_error("clpool: " + std::string(source) + "='" + std::string(selector) + "' " + why +
                           ". Devices:" + detail::list_for_error(devices) +
                           "\nSelectors: auto, gpu, cpu, accelerator, host, N, P:D, platform:TEXT, device:TEXT, "
                           "TEXT (docs/DEVICES.md)");
    };
    auto opencl = [](std::size_t i) { return DeviceMatch{BackendKind::opencl, i}; };

    if (spec == "host") return {BackendKind::host, 0};
    if (spec == "auto") {
        if (devices.empty()) return {BackendKind::host, 0};
        // Not empty, and the predicate takes any device: prefer_gpu finds one.
        // NOLINTNEXTLINE(bugprone-unchecked-optional-access)
        return opencl(*detail::prefer_gpu(devices, [](const auto&) { return true; }));
    }
    for (auto [word, type] : {std::pair{"gpu", DeviceType::gpu}, std::pair{"cpu", DeviceType::cpu},
                              std::pair{"accelerator", DeviceType::accelerator}}) {
        if (spec != word) continue;
        for (const auto& d : devices)
            if (d.type == type) return opencl(d.index);
        return fail(std::string("matches no device: there is no OpenCL ") + word + " device");
    }
    if (auto n = detail::parse_index(spec)) {
        if (*n < devices.size()) return opencl(*n);
        return fail("is out of range: " + std::to_string(devices.size()) + " OpenCL device(s)");
    }
    if (const auto colon = spec.find(':'); colon != std::string::npos) {
        const auto head = std::string_view(spec).substr(0, colon);
        const auto tail = std::string_view(spec).substr(colon + 1);
        auto p = detail::parse_index(head);
        auto d = detail::parse_index(tail);
        if (p && d) {
            for (const auto& x : devices)
                if (x.platform_index == *p && x.device_index == *d) return opencl(x.index);
            return fail("names no device (platform:device indices)");
        }
        if (tail.empty()) return fail("has nothing after ':'");
        if (head == "platform") {
            if (auto i = detail::prefer_gpu(devices, [&](const DeviceDescription& x) {
                    return detail::contains_nocase(x.platform_name, tail) ||
                           detail::contains_nocase(x.platform_vendor, tail);
                }))
                return opencl(*i);
            return fail("matches no platform name or vendor");
        }
        if (head == "device") {
            for (const auto& x : devices)
                if (detail::contains_nocase(x.device_name, tail)) return opencl(x.index);
            return fail("matches no device name");
        }
        return fail("has an unknown prefix '" + std::string(head) + ":' (use platform: or device:)");
    }
    if (auto i = detail::prefer_gpu(devices, [&](const DeviceDescription& x) {
            return detail::contains_nocase(x.platform_name, spec) || detail::contains_nocase(x.platform_vendor, spec) ||
                   detail::contains_nocase(x.device_name, spec);
        }))
        return opencl(*i);
    return fail("matches no device");
}

}  // namespace clpool
