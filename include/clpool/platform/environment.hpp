// environment: the one parser of clpool's CLPOOL_* variables (reading, validating, the message naming what is allowed).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace clpool::detail {

// Every parser takes the variable's name and text and returns the value, or
// throws Error (constructible from std::string) with a message naming the
// variable, the value and what is allowed. The caller names Error
// (clpool::config_error): the platform layer knows no clpool type.

// The variable's text, or nullopt when it is unset.
inline std::optional<std::string> env_text(const char* name) {
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
}

// "0"/"1" (also "false"/"true", "off"/"on", "no"/"yes").
template <class Error>
bool env_bool(std::string_view name, std::string_view text) {
    for (auto t : {"1", "true", "on", "yes"})
        if (text == t) return true;
    for (auto f : {"0", "false", "off", "no"})
        if (text == f) return false;
    throw Error("clpool: " + std::string(name) + "='" + std::string(text) + "' is not a boolean; use 0 or 1");
}

// A whole number of `unit` from 0 to `max`, decimal digits only (leading
// zeros allowed, no sign or space). `hint` ends the message: "e.g. 5000".
template <class Error>
std::uint64_t env_count(std::string_view name, std::string_view text, std::uint64_t max, std::string_view unit,
                        std::string_view hint) {
    std::uint64_t n = 0;
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos && [&] {
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        return ec == std::errc{} && end == text.data() + text.size();
    }();
    if (!digits || n > max)
        throw Error("clpool: " + std::string(name) + "='" + std::string(text) + "' is not a whole number of " +
                    std::string(unit) + " between 0 and " + std::to_string(max) + " (" + std::string(hint) + ")");
    return n;
}

// A decimal number of GiB (fractions allowed) from 0 to 1 PiB, as bytes.
template <class Error>
std::uint64_t env_gib(std::string_view name, std::string_view text) {
    // Plain decimal only, with a point whatever the program's locale (from_chars, not strtod,
    // which reads LC_NUMERIC and would also take spaces, signs, hex and exponents).
    const bool decimal = !text.empty() && text[0] != '.' &&
                         text.find_first_not_of("0123456789.") == std::string_view::npos &&
                         text.find('.') == text.rfind('.');
    double gib = std::nan("");
    const char* const first = text.data();
    const char* const last = first + text.size();
    const bool parsed = decimal && [&] {
        const auto [end, ec] = std::from_chars(first, last, gib, std::chars_format::fixed);
        return ec == std::errc{} && end == last;
    }();
    if (!parsed || !std::isfinite(gib) || gib < 0 || gib > 1024.0 * 1024.0)
        throw Error("clpool: " + std::string(name) + "='" + std::string(text) +
                    "' is not a number of GiB between 0 and 1048576 (e.g. 4 or 0.5)");
    return static_cast<std::uint64_t>(gib * 1024.0 * 1024.0 * 1024.0);
}

// The text trimmed of spaces and tabs; throws Error when nothing is left
// ("is empty; " + `allowed`).
template <class Error>
std::string env_trimmed(std::string_view name, std::string_view text, std::string_view allowed) {
    const auto first = text.find_first_not_of(" \t");
    const auto last = text.find_last_not_of(" \t");
    if (first == std::string_view::npos)
        throw Error("clpool: " + std::string(name) + "='" + std::string(text) + "' is empty; " + std::string(allowed));
    return std::string(text.substr(first, last - first + 1));
}

// The outcome of parsing one variable, kept for the life of the process so
// the variable is read once and an invalid value is reported on every use.
template <class T>
struct env_setting {
    std::optional<T> value;
    std::string error;
    template <class Error>
    T get() const {
        if (!value) throw Error(error);
        return *value;
    }
};

// Reads `name` now: `fallback` when unset, else parse(name, text); an Error
// thrown by parse is kept as the setting's error.
template <class T, class Error, class Parse>
env_setting<T> env_read(const char* name, T fallback, Parse parse) {
    auto text = env_text(name);
    if (!text) return {std::move(fallback), {}};
    try {
        return {parse(name, *text), {}};
    } catch (const Error& e) {
        return {std::nullopt, e.what()};
    }
}

}  // namespace clpool::detail
