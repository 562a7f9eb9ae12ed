// clpool::benchmarks (benchmarks/include/clpool/benchmark/register.hpp): what register_pool and
// the register_<run> functions register, read back through Google Benchmark's test listing.
#include <clpool/benchmark/register.hpp>
#include <clpool/clpool.hpp>

#include <benchmark/benchmark.h>
#include <doctest/doctest.h>

#include <climits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using HostPool = clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::SingleMutex,
                              clpool::HostBackend>;

// The benchmark names Google Benchmark lists after `reg` registers (nothing runs).
template <class F>
std::vector<std::string> listed(F reg) {
    ::benchmark::ClearRegisteredBenchmarks();
    reg();
    static char a0[] = "test_register", a1[] = "--benchmark_list_tests=true";  // Initialize keeps argv[0]
    char* argv[] = {a0, a1, nullptr};
    int argc = 2;
    ::benchmark::Initialize(&argc, argv);
    // A reporter of our own: 1.7's default one is a static that each run deletes.
    std::ostringstream out, err;
    ::benchmark::ConsoleReporter reporter;
    reporter.SetOutputStream(&out);
    reporter.SetErrorStream(&err);
    ::benchmark::RunSpecifiedBenchmarks(&reporter);
    ::benchmark::ClearRegisteredBenchmarks();
    std::vector<std::string> names;
    std::istringstream lines(out.str());
    for (std::string line; std::getline(lines, line);)
        if (!line.empty()) names.push_back(line);
    return names;
}

// The message of the std::invalid_argument register_pool<HostPool>(o) throws; "" if none.
std::string refusal(const clpool::benchmarks::Options& o) {
    std::string what;
    const auto names = listed([&] {
        try {
            clpool::benchmarks::register_pool<HostPool>("HostPool", o);
        } catch (const std::invalid_argument& e) {
            what = e.what();
        }
    });
    if (!what.empty()) CHECK(names.empty());  // refused as a whole: nothing half registered
    return what;
}

}  // namespace

TEST_CASE("register_pool: Options a chosen run cannot use are invalid_argument naming the field and the limit") {
    using clpool::benchmarks::Options;
    Options o;
    o.sizes.clear();
    CHECK(refusal(o) == "clpool::benchmarks: sizes is empty: at least 1 size is needed");
    o = {};
    o.sizes = {256, std::size_t{1} << 63};
    CHECK(refusal(o) == "clpool::benchmarks: sizes holds 9223372036854775808: the limit is 9223372036854775807");
    o = {};
    o.mix.clear();
    CHECK(refusal(o) == "clpool::benchmarks: mix is empty: at least 1 size is needed");
    o = {};
    o.max_threads = 0;
    CHECK(refusal(o) == "clpool::benchmarks: max_threads is 0: at least 1 is needed");
    o.max_threads = -3;
    CHECK(refusal(o) == "clpool::benchmarks: max_threads is -3: at least 1 is needed");
    o = {};
    o.churn_handles = 0;
    CHECK(refusal(o) == "clpool::benchmarks: churn_handles is 0: at least 1 is needed");

    // The same values are fine where the run that needs them is not chosen.
    o = {};
    o.sizes.clear();
    o.hit = o.miss = o.raw = false;
    o.churn_handles = 0;
    o.churn = false;
    CHECK(refusal(o).empty());

    // The register_<run> functions check their own arguments.
    clpool::benchmarks::Factory<HostPool> make = [] { return std::make_unique<HostPool>(clpool::HostBackend{}); };
    CHECK_THROWS_AS(clpool::benchmarks::register_hit<HostPool>("x", make, {}), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_miss<HostPool>("x", make, {}), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_raw<HostPool>("x", make, {}), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_contention<HostPool>("x", make, {}, 4), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_contention<HostPool>("x", make, {256}, 0), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_churn<HostPool>("x", make, {}, 8, 1), std::invalid_argument);
    CHECK_THROWS_AS(clpool::benchmarks::register_churn<HostPool>("x", make, {256}, 0, 1), std::invalid_argument);
    ::benchmark::ClearRegisteredBenchmarks();
}

TEST_CASE("register_contention: max_threads up to INT_MAX registers the powers of two up to it") {
    const auto names = listed([] {
        clpool::benchmarks::register_contention<HostPool>(
            "HostPool", [] { return std::make_unique<HostPool>(clpool::HostBackend{}); }, {256}, INT_MAX);
    });
    REQUIRE(names.size() == 31);  // 2^0 .. 2^30
    CHECK(names.front() == "contention/HostPool/real_time/threads:1");
    CHECK(names.back() == "contention/HostPool/real_time/threads:1073741824");
}
