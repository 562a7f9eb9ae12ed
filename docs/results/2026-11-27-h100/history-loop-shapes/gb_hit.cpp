#include <clpool/backends/opencl.hpp>
#include <clpool/policies/thread_cached.hpp>
#include <clpool/pools/aliases.hpp>
#include <clpool/benchmark/register.hpp>
using namespace clpool;
template <class Lock>
using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, HostBackend>;
template <class Pl> void add(const std::string& name) {
    for (std::size_t h : {std::size_t{0}, std::size_t{65536}})
        clpool::benchmarks::register_hit<Pl>(name + (h ? "+on" : "+off"), [h] {
            auto p = std::make_unique<Pl>(HostBackend{});
            if (h) p->record_history(h);
            return p;
        }, {4096});
}
int main(int argc, char** argv) {
    add<P<NoLock>>("nolock");
    add<P<SingleMutex>>("single");
    add<P<ThreadCached<8>>>("tc");
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
}
