// Environment configuration: every CLPOOL_* variable, parsed and validated once.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/platform/environment.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace clpool::config {

// Parsers are exposed so tests and tools can check them without touching the
// environment. Each throws config_error naming the variable, the value and
// what is allowed. The parsing itself is platform/environment.hpp's, which
// the core's own variables (CLPOOL_HISTORY) share.

// A positive decimal number of GiB (fractions allowed), at most 1 PiB.
inline std::uint64_t parse_gib(std::string_view name, std::string_view text) {
    return detail::env_gib<config_error>(name, text);
}

// "0"/"1" (also "false"/"true", "off"/"on", "no"/"yes").
inline bool parse_bool(std::string_view name, std::string_view text) {
    return detail::env_bool<config_error>(name, text);
}

inline std::optional<std::string> read(const char* name) { return detail::env_text(name); }

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
    auto s = detail::env_read<T, config_error>(name, std::move(fallback), parse);
    return {std::move(s.value), std::move(s.error)};
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
    return detail::env_count<config_error>(name, text, 86400000, "milliseconds", "e.g. 5000");
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
    return detail::env_trimmed<config_error>(name, text,
                                             "use auto, gpu, cpu, accelerator, host, an index such as 0 or 1:0, "
                                             "platform:NAME or device:NAME (docs/DEVICES.md)");
}

// CLPOOL_DEVICE: the default device for clpool::default_device() ("auto"
// unless set). Throws config_error if set but empty.
inline std::string device_spec() {
    static const auto s = read_setting<std::string>("CLPOOL_DEVICE", "auto", parse_device_spec);
    return s.get();
}

}  // namespace clpool::config
