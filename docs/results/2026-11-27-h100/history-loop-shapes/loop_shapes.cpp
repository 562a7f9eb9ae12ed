#include <clpool/backends/opencl.hpp>
#include <clpool/policies/thread_cached.hpp>
#include <clpool/pools/aliases.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
using namespace clpool;
template <class Lock>
using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, HostBackend>;

template <class T> inline void dno(T& v) { asm volatile("" : "+m"(v) : : "memory"); }

template <class Pl> [[gnu::noinline]] void body_const(Pl& p, long n, std::size_t) {
    for (long i = 0; i < n; ++i) { auto h = p.allocate(4096); asm volatile("" ::"r"(&h) : "memory"); h.release(); }
}
template <class Pl> [[gnu::noinline]] void body_var(Pl& p, long n, std::size_t bytes) {
    for (long i = 0; i < n; ++i) { auto h = p.allocate(bytes); asm volatile("" ::"r"(&h) : "memory"); h.release(); }
}
template <class Pl> [[gnu::noinline]] void body_dno(Pl& p, long n, std::size_t bytes) {
    for (long i = 0; i < n; ++i) { auto h = p.allocate(bytes); dno(h); h.release(); }
}
template <class Pl> [[gnu::noinline]] void body_dno_const(Pl& p, long n, std::size_t) {
    for (long i = 0; i < n; ++i) { auto h = p.allocate(4096); dno(h); h.release(); }
}

template <class Pl, void (*Body)(Pl&, long, std::size_t)>
double best(std::size_t hist, std::size_t bytes) {
    auto p = std::make_unique<Pl>(HostBackend{});
    if (hist) p->record_history(hist);
    p->allocate(bytes).release();
    double b = 1e9;
    for (int k = 0; k < 11; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        Body(*p, 2000000, bytes);
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 2000000;
        if (ns < b) b = ns;
    }
    return b;
}
template <class Pl> void row(const char* name, std::size_t bytes) {
    std::printf("%-8s %6zu const %5.2f/%5.2f var %5.2f/%5.2f dno %5.2f/%5.2f dnoconst %5.2f/%5.2f\n", name, bytes,
        best<Pl, body_const<Pl>>(0, bytes), best<Pl, body_const<Pl>>(65536, bytes),
        best<Pl, body_var<Pl>>(0, bytes), best<Pl, body_var<Pl>>(65536, bytes),
        best<Pl, body_dno<Pl>>(0, bytes), best<Pl, body_dno<Pl>>(65536, bytes),
        best<Pl, body_dno_const<Pl>>(0, bytes), best<Pl, body_dno_const<Pl>>(65536, bytes));
}
int main() {
    for (int r = 0; r < 3; ++r) {
        row<P<NoLock>>("nolock", 4096);
        row<P<SingleMutex>>("single", 4096);
        row<P<ThreadCached<8>>>("tc", 4096);
    }
}
