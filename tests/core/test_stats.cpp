// PoolStats: the printed line carries every counter, so that it adds up.
#include <clpool/core/stats.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>

using namespace clpool;

TEST_CASE("operator<< prints every counter of PoolStats, each once, with its value") {
    PoolStats s;
    // Distinct values, so a field printed under another's name is caught too.
    s.hits = 101;
    s.misses = 102;
    s.evictions = 103;
    s.driver_frees = 104;
    s.oom_retries = 105;
    s.failed_allocations = 106;
    s.bytes_allocated = 107;
    s.bytes_cached = 108;
    s.bytes_in_use = 109;
    s.bytes_requested = 110;
    s.bytes_pending = 111;
    s.peak_bytes_allocated = 112;
    s.peak_bytes_in_use = 113;
    const std::map<std::string, std::uint64_t> expected{{"hits", 101},
                                                        {"misses", 102},
                                                        {"evictions", 103},
                                                        {"driver_frees", 104},
                                                        {"oom_retries", 105},
                                                        {"failed_allocations", 106},
                                                        {"bytes_allocated", 107},
                                                        {"bytes_cached", 108},
                                                        {"bytes_in_use", 109},
                                                        {"bytes_requested", 110},
                                                        {"bytes_pending", 111},
                                                        {"peak_bytes_allocated", 112},
                                                        {"peak_bytes_in_use", 113}};

    std::ostringstream os;
    os << s;
    const std::string line = os.str();
    CAPTURE(line);
    CHECK(line.find('\n') == std::string::npos);  // one line

    std::map<std::string, std::string> printed;
    std::istringstream in(line);
    std::string field;
    while (in >> field) {
        const auto eq = field.find('=');
        REQUIRE(eq != std::string::npos);
        const auto key = field.substr(0, eq);
        CHECK_MESSAGE(printed.count(key) == 0, "printed twice: " << key);
        printed[key] = field.substr(eq + 1);
    }
    for (const auto& entry : expected) {
        const std::string& key = entry.first;  // not a structured binding: clang 14 cannot capture one in CAPTURE
        const std::uint64_t value = entry.second;
        CAPTURE(key);
        REQUIRE(printed.count(key) == 1);
        CHECK(printed[key] == std::to_string(value));
    }
    // A pool that does not sub-allocate prints no segment counters.
    CHECK(printed.count("segments") == 0);
    // hit_rate is derived, printed for reading: 101 / 203.
    REQUIRE(printed.count("hit_rate") == 1);
    CHECK(std::stod(printed["hit_rate"]) == doctest::Approx(101.0 / 203.0).epsilon(1e-3));
    // The printed byte counters add up: allocated = in use + cached + pending when they do.
    PoolStats balanced;
    balanced.bytes_in_use = 4096;
    balanced.bytes_cached = 8192;
    balanced.bytes_pending = 1024;
    balanced.bytes_allocated = 4096 + 8192 + 1024;
    std::ostringstream bs;
    bs << balanced;
    CHECK(bs.str().find("bytes_pending=1024") != std::string::npos);
}

TEST_CASE("operator<< prints the segment counters of a sub-allocating pool, each once") {
    PoolStats s;
    s.segments = 201;
    s.segment_bytes = 202;
    s.peak_segment_bytes = 203;
    s.segment_free_bytes = 400;
    s.largest_free_block = 100;
    s.segment_allocations = 206;
    s.sub_buffer_fallbacks = 207;
    s.sub_buffers_made = 208;
    s.sub_buffers_reused = 209;
    s.sub_buffers_cached = 210;
    std::ostringstream os;
    os << s;
    const std::string line = os.str();
    CAPTURE(line);
    std::map<std::string, std::string> printed;
    std::istringstream in(line);
    std::string field;
    while (in >> field) {
        const auto eq = field.find('=');
        REQUIRE(eq != std::string::npos);
        CHECK(printed.count(field.substr(0, eq)) == 0);
        printed[field.substr(0, eq)] = field.substr(eq + 1);
    }
    const std::map<std::string, std::uint64_t> expected{{"segments", 201},
                                                        {"segment_bytes", 202},
                                                        {"peak_segment_bytes", 203},
                                                        {"segment_free_bytes", 400},
                                                        {"largest_free_block", 100},
                                                        {"segment_allocations", 206},
                                                        {"sub_buffer_fallbacks", 207},
                                                        {"sub_buffers_made", 208},
                                                        {"sub_buffers_reused", 209},
                                                        {"sub_buffers_cached", 210}};
    for (const auto& entry : expected) {
        const std::string& key = entry.first;  // not a structured binding: clang 14 cannot capture one in CAPTURE
        const std::uint64_t value = entry.second;
        CAPTURE(key);
        REQUIRE(printed.count(key) == 1);
        CHECK(printed[key] == std::to_string(value));
    }
    REQUIRE(printed.count("fragmentation") == 1);
    CHECK(std::stod(printed["fragmentation"]) == doctest::Approx(0.75));
}
