// Scratch (not committed): which part of the biased lock makes the history's event dearer.
#include <clpool/backends/host.hpp>
#include <clpool/pools/aliases.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
using namespace clpool;
struct Nop { void lock() noexcept {} void unlock() noexcept {} bool try_lock() noexcept { return true; } };
struct StoreOnly {  // the owner's two stores, nothing read
    std::atomic<bool> in{false};
    void lock() noexcept { in.store(true, std::memory_order_relaxed); }
    void unlock() noexcept { in.store(false, std::memory_order_release); }
    bool try_lock() noexcept { lock(); return true; }
};
struct Presence {  // store, compiler barrier, load of a gate in the same line (owner_presence)
    std::atomic<bool> in{false};
    std::atomic<std::uint8_t> gate{1};
    void lock() noexcept {
        in.store(true, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (gate.load(std::memory_order_acquire) != 1) __builtin_trap();
    }
    void unlock() noexcept { in.store(false, std::memory_order_release); }
    bool try_lock() noexcept { lock(); return true; }
};
struct PresenceApart {  // the same with the gate on a line of its own
    alignas(64) std::atomic<bool> in{false};
    alignas(64) std::atomic<std::uint8_t> gate{1};
    void lock() noexcept {
        in.store(true, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (gate.load(std::memory_order_acquire) != 1) __builtin_trap();
    }
    void unlock() noexcept { in.store(false, std::memory_order_release); }
    bool try_lock() noexcept { lock(); return true; }
};
struct LoadsOnly {  // the biased checks' loads, no store
    std::atomic<std::uint8_t> mode{1};
    std::atomic<const void*> owner{nullptr};
    void lock() noexcept {
        if (mode.load(std::memory_order_acquire) != 1 || owner.load(std::memory_order_relaxed) != nullptr) __builtin_trap();
    }
    void unlock() noexcept {}
    bool try_lock() noexcept { lock(); return true; }
};
template <class Lock> using P = Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, Lock, HostBackend>;
template <class Pl> [[gnu::noinline]] void loop(Pl& p, long n) {
    for (long i = 0; i < n; ++i) { auto h = p.allocate(4096); asm volatile("" ::"r"(&h) : "memory"); h.release(); }
}
template <class Pl> double best_ns(std::size_t hist) {
    auto p = std::make_unique<Pl>(HostBackend{});
    if (hist) p->record_history(hist);
    p->allocate(4096).release();
    double best = 1e9; const long n = 2000000;
    for (int k = 0; k < 15; ++k) {
        auto t0 = std::chrono::steady_clock::now(); loop(*p, n);
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
        if (ns < best) best = ns;
    }
    return best;
}
int main(int argc, char** argv) {
    std::size_t h = argc > 1 ? std::stoul(argv[1]) : 0;
    std::printf("h=%-6zu nolock %6.2f nop %6.2f store %6.2f presence %6.2f apart %6.2f loads %6.2f biased %6.2f\n", h,
                best_ns<P<NoLock>>(h), best_ns<P<LockedBy<Nop>>>(h), best_ns<P<LockedBy<StoreOnly>>>(h),
                best_ns<P<LockedBy<Presence>>>(h), best_ns<P<LockedBy<PresenceApart>>>(h),
                best_ns<P<LockedBy<LoadsOnly>>>(h), best_ns<P<SingleMutex>>(h));
}
