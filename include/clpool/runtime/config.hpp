// Environment configuration: every CLPOOL_* variable, parsed and validated once.
#pragma once

#include <clpool/core/errors.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace clpool::config {

// Parsers are exposed so tests and tools can check them without touching the
// environment. Each throws config_error naming the variable, the value and
// what is allowed.

// A positive decimal number of GiB (fractions allowed), at most 1 PiB.
inline std::uint64_t parse_gib(std::string_view name, std::string_view text) {
    const std::string s(text);
    // Plain decimal only, with a point whatever the program's locale (from_chars, not strtod,
    // which reads LC_NUMERIC and would also take spaces, signs, hex and exponents).
    const bool decimal = !s.empty() && s[0] != '.' && s.find_first_not_of("0123456789.") == std::string::npos &&
                         s.find('.') == s.rfind('.');
    double gib = std::nan("");
    const char* const last = s.data() + s.size();
    const bool parsed = decimal && [&] {
        const auto [end, ec] = std::from_chars(s.data(), last, gib, std::chars_format::fixed);
        return ec == std::errc{} && end == last;
    }();
    if (!parsed || !std::isfinite(gib) || gib < 0 || gib > 1024.0 * 1024.0) {
        throw config_error("clpool: " + std::string(name) + "='" + s +
                           "' is not a number of GiB between 0 and 1048576 (e.g. 4 or 0.5)");
    }
    return static_cast<std::uint64_t>(gib * 1024.0 * 1024.0 * 1024.0);
}

// "0"/"1" (also "false"/"true", "off"/"on", "no"/"yes").
inline bool parse_bool(std::string_view name, std::string_view text) {
    for (auto t : {"1", "true", "on", "yes"})
        if (text == t) return true;
    for (auto f : {"0", "false", "off", "no"})
        if (text == f) return false;
    throw config_error("clpool: " + std::string(name) + "='" + std::string(text) + "' is not a boolean; use 0 or 1");
}

inline std::optional<std::string> read(const char* name) {
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
}

// The outcome of parsing one variable, kept for the life of the process so
// the variable is read once and an invalid value is reported on every use.
template <class T>
struct setting {
    std::optional<T> value;
    std::string error;
    T get() const {
        if (!value) throw config_error(error);
        return *value;
    }
};

template <class T, class Parse>
setting<T> read_setting(const char* name, T fallback, Parse parse) {
    auto text = read(name);
    if (!text) return {fallback, {}};
    try {
        return {parse(name, *text), {}};
    } catch (const config_error& e) {
        return {std::nullopt, e.what()};
    }
}

// CLPOOL_MAX_CACHED_GB: the byte cap of capped pools (default 4 GiB).
inline std::uint64_t max_cached_bytes() {
    static const auto s = read_setting<std::uint64_t>("CLPOOL_MAX_CACHED_GB", std::uint64_t{4} << 30, parse_gib);
    return s.get();
}

// CLPOOL_PINNED_H2D: 1 stages large pageable host<->device copies through
// pinned buffers; 0 sends them straight to enqueueWrite/ReadBuffer (integrated
// GPUs and CPU devices, where the device shares host memory). Unset (nullopt):
// stage unless the device reports host-unified memory. Throws config_error if invalid.
inline std::optional<bool> pinned_h2d() {
    static const auto s = read_setting<std::optional<bool>>(
        "CLPOOL_PINNED_H2D", std::nullopt,
        [](std::string_view name, std::string_view text) { return std::optional<bool>(parse_bool(name, text)); });
    return s.get();
}

// CLPOOL_ASYNC_H2D: 1 (default) lets uploads return before the device has the
// data (wait on the returned event); 0 makes every upload blocking.
// Throws config_error if invalid.
inline bool async_h2d() {
    static const auto s = read_setting<bool>("CLPOOL_ASYNC_H2D", true, parse_bool);
    return s.get();
}

// A whole number of milliseconds, 0 to 86400000 (a day).
inline std::uint64_t parse_milliseconds(std::string_view name, std::string_view text) {
    const std::string s(text);
    const auto first = s.find_first_not_of('0');  // leading zeros do not count towards the length
    const std::size_t significant = first == std::string::npos ? 1 : s.size() - first;
    const bool digits = !s.empty() && significant <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    const std::uint64_t ms = digits ? std::stoull(first == std::string::npos ? std::string("0") : s.substr(first)) : 0;
    if (!digits || ms > 86400000)
        throw config_error("clpool: " + std::string(name) + "='" + s +
                           "' is not a whole number of milliseconds between 0 and 86400000 (e.g. 5000)");
    return ms;
}

// CLPOOL_EXIT_WAIT_MS: how long normal exit waits, in all, for the registered
// queues to finish (default 5000). Throws config_error if invalid.
inline std::uint64_t exit_wait_ms() {
    static const auto s = read_setting<std::uint64_t>("CLPOOL_EXIT_WAIT_MS", 5000, parse_milliseconds);
    return s.get();
}

// A device selector as typed (docs/DEVICES.md has the grammar), trimmed of
// spaces. Whether it names an existing device is checked when a device is
// selected, against the devices found then.
inline std::string parse_device_spec(std::string_view name, std::string_view text) {
    const auto first = text.find_first_not_of(" \t");
    const auto last = text.find_last_not_of(" \t");
    if (first == std::string_view::npos)
        throw config_error("clpool: " + std::string(name) + "='" + std::string(text) +
                           "' is empty; use auto, gpu, cpu, accelerator, host, an index such as 0 or 1:0, "
                           "platform:NAME or device:NAME (docs/DEVICES.md)");
    return std::string(text.substr(first, last - first + 1));
}

// CLPOOL_DEVICE: the default device for clpool::default_device() ("auto"
// unless set). Throws config_error if set but empty.
inline std::string device_spec() {
    static const auto s = read_setting<std::string>("CLPOOL_DEVICE", "auto", parse_device_spec);
    return s.get();
}

}  // namespace clpool::config
