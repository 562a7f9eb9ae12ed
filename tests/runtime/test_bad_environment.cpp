// Environment values: every CLPOOL_* number and switch is read as documented, with leading zeros and whatever the
// program's locale, and a bad one is refused with a config_error naming the variable and the value as set.
//
// Settings are read once per process, so the cases that need a variable set
// before clpool first reads it run this binary again as a child with the
// variable set (the "env child:" cases, skipped unless a parent asks for them).
#include "pool_factory.hpp"
#include "rerun_self.hpp"

#include <clpool/devices/device_handle.hpp>
#include <clpool/runtime/config.hpp>

#include <doctest/doctest.h>

#include <clocale>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using namespace clpool;
using namespace clpool::test;

namespace {

std::string message_of(auto&& f) {
    try {
        f();
    } catch (const config_error& e) {
        return e.what();
    }
    return "(no config_error)";
}

}  // namespace

// test_limit_policies.cpp has the common malformed values; these are the edges it leaves.
TEST_CASE("CLPOOL_MAX_CACHED_GB: out of range, trailing space, bare fraction, two points, exponent are refused") {
    for (const char* bad : {"1048577", "1048576.5", "99999999999999999999", "4 ", ".5", "1.2.3", "1e3"}) {
        CAPTURE(bad);
        const std::string msg = message_of([&] { (void)config::parse_gib("CLPOOL_MAX_CACHED_GB", bad); });
        CHECK(msg.find("CLPOOL_MAX_CACHED_GB='" + std::string(bad) + "'") != std::string::npos);
        CHECK(msg.find("1048576") != std::string::npos);  // the limit
    }
    CHECK(config::parse_gib("X", "0") == 0);
    CHECK(config::parse_gib("X", "4") == (std::uint64_t{4} << 30));
    CHECK(config::parse_gib("X", "0.5") == (std::uint64_t{1} << 29));
    CHECK(config::parse_gib("X", "1048576") == (std::uint64_t{1} << 50));
}

TEST_CASE("CLPOOL_PINNED_H2D and CLPOOL_ASYNC_H2D: only 0/1, false/true, off/on, no/yes") {
    for (const char* bad : {"", "2", "-1", "TRUE", "On", " 1", "1 ", "yes!", "enable"}) {
        CAPTURE(bad);
        const std::string msg = message_of([&] { (void)config::parse_bool("CLPOOL_ASYNC_H2D", bad); });
        CHECK(msg.find("CLPOOL_ASYNC_H2D='" + std::string(bad) + "'") != std::string::npos);
        CHECK(msg.find("0 or 1") != std::string::npos);
    }
    for (const char* yes : {"1", "true", "on", "yes"}) CHECK(config::parse_bool("X", yes));
    for (const char* no : {"0", "false", "off", "no"}) CHECK_FALSE(config::parse_bool("X", no));
}

// A value in range written with leading zeros is that number: the length of the text is no
// measure of its range.
TEST_CASE("CLPOOL_EXIT_WAIT_MS with leading zeros is a number in range, not an error") {
    CHECK_NOTHROW(CHECK(config::parse_milliseconds("CLPOOL_EXIT_WAIT_MS", "0000005000") == 5000));
    CHECK_NOTHROW(CHECK(detail::parse_history_events("CLPOOL_HISTORY", "0000000100") == 100));
}

// The value as set, blanks and all, so that the user sees what the program saw.
TEST_CASE("a blank CLPOOL_DEVICE's error names the value as set") {
    const std::string msg = message_of([] { (void)config::parse_device_spec("CLPOOL_DEVICE", "   "); });
    CHECK(msg.find("CLPOOL_DEVICE='   '") != std::string::npos);
}

// The documented format has a decimal point whatever LC_NUMERIC says: a program that calls
// setlocale(LC_ALL, "") under a decimal-comma locale (de_DE, fr_FR, ...) must still read
// CLPOOL_MAX_CACHED_GB=0.5 (strtod would not). The locale is made here with localedef (Debian's
// locales package, .ci/deps.d/locales.txt).
TEST_CASE("CLPOOL_MAX_CACHED_GB=0.5 is accepted whatever the program's locale") {
    const char* dir = "/tmp/clpool_test_locale";
    setenv("LOCPATH", dir, 1);
    if (access((std::string(dir) + "/de_DE.UTF-8").c_str(), F_OK) !=
        0) {  // before any lookup: glibc keeps a failed one
        const std::string cmd =
            std::string("mkdir -p ") + dir + " && localedef -i de_DE -f UTF-8 " + dir + "/de_DE.UTF-8 >/dev/null 2>&1";
        (void)std::system(cmd.c_str());
    }
    const char* got = std::setlocale(LC_NUMERIC, "de_DE.UTF-8");
    unsetenv("LOCPATH");
    REQUIRE_MESSAGE(got != nullptr, "no de_DE locale could be made (needs localedef and Debian's locales package)");
    std::uint64_t bytes = 0;
    const std::string msg = message_of([&] { bytes = config::parse_gib("CLPOOL_MAX_CACHED_GB", "0.5"); });
    std::setlocale(LC_NUMERIC, "C");
    CHECK(msg == "(no config_error)");
    CHECK(bytes == (std::uint64_t{1} << 29));
}

TEST_CASE("a setting read once keeps its error: every use reports it, none falls back silently") {
    REQUIRE(setenv("CLPOOL_TEST_ONLY_GB", "lots", 1) == 0);
    const auto s = config::read_setting<std::uint64_t>("CLPOOL_TEST_ONLY_GB", 7, config::parse_gib);
    unsetenv("CLPOOL_TEST_ONLY_GB");
    for (int i = 0; i < 2; ++i)
        CHECK_THROWS_WITH_AS(s.get(), doctest::Contains("CLPOOL_TEST_ONLY_GB='lots'"), config_error);
    const auto unset = config::read_setting<std::uint64_t>("CLPOOL_TEST_ONLY_GB", 7, config::parse_gib);
    CHECK(unset.get() == 7);
}

// The child halves: they assert what a process started with the variable sees.
TEST_CASE("env child: an invalid CLPOOL_MAX_CACHED_GB stops capped pools, not the others" * doctest::skip()) {
    CHECK_THROWS_WITH_AS(EnvironmentCapped(), doctest::Contains("CLPOOL_MAX_CACHED_GB='12x'"), config_error);
    CHECK_THROWS_AS(host::PersistentBufferPool(HostBackend{}), config_error);
    host::BufferPool unlimited{HostBackend{}};  // no cap to read: unaffected
    CHECK(unlimited.allocate(100));
}
TEST_CASE("env child: CLPOOL_MAX_CACHED_GB=0.25 caps capped pools at 256 MiB" * doctest::skip()) {
    CHECK(EnvironmentCapped().max_bytes == (std::size_t{1} << 28));
    CHECK(host::PersistentBufferPool(HostBackend{}).limits().max_cached_bytes() == (std::size_t{1} << 28));
}

TEST_CASE("a process started with a bad CLPOOL_MAX_CACHED_GB gets config_error from capped pools") {
    CHECK(rerun_self("CLPOOL_MAX_CACHED_GB=12x", "env child: an invalid*") == 0);
    CHECK(rerun_self("CLPOOL_MAX_CACHED_GB=0.25", "env child: CLPOOL_MAX_CACHED_GB=0.25*") == 0);
    // The child really checks: with the other value it fails.
    CHECK(rerun_self("CLPOOL_MAX_CACHED_GB=4", "env child: CLPOOL_MAX_CACHED_GB=0.25*", true) != 0);
}
