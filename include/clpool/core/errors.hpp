// The error vocabulary: out of memory, bad size, bad configuration, driver error, misuse, broken invariant.
#pragma once

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

namespace clpool {

// The driver could not provide memory even after the pool gave its cache back.
class out_of_memory : public std::bad_alloc {
public:
    // `details`: further lines for what() (the pool's forensics: oom_report.hpp).
    out_of_memory(std::size_t requested, std::size_t pool_held, int native_code, const std::string& pool_name,
                  const std::string& details = {})
        : requested_(requested), pool_held_(pool_held), native_code_(native_code),
          message_("clpool: " + pool_name + " out of memory: asked for " + std::to_string(requested) + " bytes with " +
                   std::to_string(pool_held) + " bytes held by the pool after giving its cache back; driver code " +
                   std::to_string(native_code) + details) {}

    const char* what() const noexcept override { return message_.c_str(); }
    std::size_t requested() const noexcept { return requested_; }
    std::size_t pool_held() const noexcept { return pool_held_; }
    int native_code() const noexcept { return native_code_; }

private:
    std::size_t requested_, pool_held_;
    int native_code_;
    std::string message_;
};

// A size clpool cannot serve: an allocation above the device's maximum, or
// one whose bucket rounding overflows; a transfer range past its buffer.
class size_error : public std::length_error {
public:
    // An allocation: "cannot allocate N bytes: why (limit L bytes)".
    size_error(std::size_t requested, std::size_t limit, const char* why)
        : std::length_error("clpool: cannot allocate " + std::to_string(requested) + " bytes: " + why + " (limit " +
                            std::to_string(limit) + " bytes)"),
          requested_(requested), limit_(limit) {}
    // Anything else: the caller's whole message, which names the size and the limit.
    size_error(const std::string& message, std::size_t requested, std::size_t limit)
        : std::length_error(message), requested_(requested), limit_(limit) {}
    std::size_t requested() const noexcept { return requested_; }
    std::size_t limit() const noexcept { return limit_; }

private:
    std::size_t requested_, limit_;
};

// An environment variable or option with a value clpool cannot use.
class config_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// A driver call failed for a reason other than memory; carries the native code.
class driver_error : public std::runtime_error {
public:
    driver_error(const std::string& what, int native_code)
        : std::runtime_error("clpool: " + what + " failed with driver code " + std::to_string(native_code)),
          native_code_(native_code) {}
    int native_code() const noexcept { return native_code_; }

private:
    int native_code_;
};

// Misuse of the API detected at run time (e.g. work after shutdown(), a null
// host pointer). A std::invalid_argument (so a std::logic_error too): a handler
// for the standard type catches clpool's bad arguments, such as a transfer's
// null host pointer or empty handle.
class usage_error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// clpool found its own state inconsistent (a self-check such as
// ShapeTrie::check_invariants): a bug in clpool, or memory the program
// corrupted. The message names what disagreed.
class internal_error : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

}  // namespace clpool
