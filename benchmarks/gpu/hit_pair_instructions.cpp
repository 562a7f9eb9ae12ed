// Instructions per hit pair (allocate + release of a cached 4 KiB buffer, host backend), counted
// by callgrind (hit_pair_instructions.sh): a figure that does not move with the machine's noise.
// `hit_pair_instructions POOL EVENTS PAIRS`: POOL 0 NoLock, 1 SingleMutex, 2 ThreadCached<8>;
// EVENTS > 0 records a history of that many events per ring.
#include <clpool/backends/host.hpp>
#include <clpool/policies/thread_cached.hpp>
#include <clpool/pools/aliases.hpp>

#include "hit_pair_body.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using namespace clpool;
template <class Lock>
using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, HostBackend>;
// With EVENTS > 0: the pool with diagnostics, where the tree has them apart from the core.
#if __has_include(<clpool/diagnostics/diagnostics.hpp>)
template <class Lock>
using PH = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, HostBackend, Diagnostics>;
#else
template <class Lock>
using PH = P<Lock>;
#endif

template <class Pl>
void run(std::size_t events, long pairs) {
    auto p = std::make_unique<Pl>(HostBackend{});
    if constexpr (requires { p->record_history(events); })
        if (events != 0) p->record_history(events);
    for (int i = 0; i < 200; ++i) p->allocate(4096).release();  // past the first events and the stage's first flush
    hit_pair_body(*p, pairs);
}

int main(int argc, char** argv) {
    const int pool = argc == 4 ? std::atoi(argv[1]) : -1;
    if (pool < 0 || pool > 2) {
        std::fprintf(stderr,
                     "usage: hit_pair_instructions POOL EVENTS PAIRS (POOL 0 NoLock, 1 SingleMutex, "
                     "2 ThreadCached<8>; EVENTS 0: no history)\n");
        return 2;
    }
    const std::size_t events = std::stoul(argv[2]);
    const long pairs = std::stol(argv[3]);
    if (pool == 0) events ? run<PH<NoLock>>(events, pairs) : run<P<NoLock>>(events, pairs);
    if (pool == 1) events ? run<PH<SingleMutex>>(events, pairs) : run<P<SingleMutex>>(events, pairs);
    if (pool == 2) events ? run<PH<ThreadCached<8>>>(events, pairs) : run<P<ThreadCached<8>>>(events, pairs);
}
