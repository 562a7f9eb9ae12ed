// A downstream engine benchmarking a pool of its own composition with clpool::benchmark, in one line.
#include <clpool/benchmark/register.hpp>
#include <clpool/clpool.hpp>

#include <benchmark/benchmark.h>

using EnginePool = clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::SingleMutex,
                                clpool::HostBackend>;

int main(int argc, char** argv) {
    clpool::benchmarks::Options o;
    o.sizes = {256, 4096};
    o.max_threads = 2;
    clpool::benchmarks::register_pool<EnginePool>("EnginePool", o);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
