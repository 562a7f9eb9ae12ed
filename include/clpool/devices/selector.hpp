// The device selector grammar (CLPOOL_DEVICE, select_device): match_device, pure functions over device descriptions.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/devices/device_description.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clpool {

namespace detail {

inline std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}
// The words of s, lower-cased: maximal runs of ASCII letters and digits;
// every other character separates ("pthread-skylake-avx512-AMD EPYC" is
// pthread, skylake, avx512, amd, epyc).
inline std::vector<std::string> words_of(std::string_view s) {
    std::vector<std::string> out;
    std::string word;
    for (const char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!word.empty()) {
            out.push_back(std::move(word));
            word.clear();
        }
    }
    if (!word.empty()) out.push_back(std::move(word));
    return out;
}
inline std::string join(const std::vector<std::string>& words) {
    std::string s;
    for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
    return s;
}
// True if the words of `needle` (not empty) appear in `hay` as whole words, in a row.
inline bool has_words(std::string_view hay, const std::vector<std::string>& needle) {
    const auto words = words_of(hay);
    return !needle.empty() && std::search(words.begin(), words.end(), needle.begin(), needle.end()) != words.end();
}
// Any run of digits is an index, leading zeros and all; one too large for
// size_t is SIZE_MAX, so it is reported as out of range, not as a name.
inline std::optional<std::size_t> parse_index(std::string_view s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    std::size_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) return static_cast<std::size_t>(-1);
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
//   platform:TEXT a device (a GPU first) of a platform whose name or vendor has TEXT's words
//   device:TEXT   the first device whose name has TEXT's words
//   TEXT          as platform:TEXT: a vendor or platform (amd, nvidia, intel, pocl)
// TEXT matches whole words, case-insensitively: a word is a run of letters and
// digits (detail::words_of), and TEXT's words must appear in a row, so "x" does
// not match "avx512", nor "amd" a platform that only runs on an AMD CPU.
// Spaces and tabs around the selector are ignored, as in CLPOOL_DEVICE.
// `source` names where the selector came from, for the message. Throws
// config_error naming the selector and listing every device if it is empty
// or matches nothing. Pure: touches no driver. Thread-safe.
inline DeviceMatch match_device(std::string_view selector, std::span<const DeviceDescription> devices,
                                std::string_view source = "device selector") {
    // Trimmed as CLPOOL_DEVICE is (config::parse_device_spec), whoever passes it.
    const auto first = selector.find_first_not_of(" \t");
    const auto trimmed = first == std::string_view::npos
                             ? std::string_view{}
                             : selector.substr(first, selector.find_last_not_of(" \t") - first + 1);
    const std::string spec = detail::lower(trimmed);
    auto fail = [&](const std::string& why) -> DeviceMatch {
        throw config_error("clpool: " + std::string(source) + "='" + std::string(selector) + "' " + why +
                           ". Devices:" + detail::list_for_error(devices) +
                           "\nSelectors: auto, gpu, cpu, accelerator, host, N, P:D, platform:TEXT, device:TEXT, "
                           "TEXT (docs/DEVICES.md)");
    };
    auto opencl = [](std::size_t i) { return DeviceMatch{BackendKind::opencl, i}; };
    auto platform_has = [](const std::vector<std::string>& words) {
        return [&words](const DeviceDescription& x) {
            return detail::has_words(x.platform_name, words) || detail::has_words(x.platform_vendor, words);
        };
    };
    // The first device whose name has the words, if any.
    auto by_name = [&](const std::vector<std::string>& words) -> std::optional<std::size_t> {
        for (const auto& x : devices)
            if (detail::has_words(x.device_name, words)) return x.index;
        return std::nullopt;
    };

    if (spec.empty()) return fail("is empty");

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
        if (head != "platform" && head != "device")
            return fail("has an unknown prefix '" + std::string(head) + ":' (use platform: or device:)");
        const auto words = detail::words_of(tail);
        if (words.empty()) return fail("has no letter or digit to match after '" + std::string(head) + ":'");
        if (head == "platform") {
            if (auto i = detail::prefer_gpu(devices, platform_has(words))) return opencl(*i);
            return fail("matches no device: no platform name or vendor has the whole words '" + detail::join(words) +
                        "'");
        }
        if (auto i = by_name(words)) return opencl(*i);
        return fail("matches no device: no device name has the whole words '" + detail::join(words) + "'");
    }
    const auto words = detail::words_of(spec);
    if (words.empty()) return fail("has no letter or digit to match");
    if (auto i = detail::prefer_gpu(devices, platform_has(words))) return opencl(*i);
    std::string why = "matches no device: no platform name or vendor has the whole words '" + detail::join(words) +
                      "' (a plain TEXT names a platform)";
    if (auto i = by_name(words))
        why += "; device:" + std::string(trimmed) + " selects device " + std::to_string(*i) + " by its name";
    return fail(why);
}

}  // namespace clpool
