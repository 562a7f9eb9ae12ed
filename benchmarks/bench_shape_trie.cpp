// Shape interning: a ShapeTrie hit against unordered_map<int64>::find and against the descriptor cache it replaces; throughput vs one global mutex.
//
// map_find/int64: std::unordered_map<std::int64_t, const std::int64_t*>::find
//   of a present key (512 keys, cycling through 64): the floor the target is set against.
// safe_floor: what a reader-locked, reference-counted lookup pays whatever
//   its structure: a stripe's shared lock and unlock, a reference taken (CAS)
//   and dropped, with no search at all.
// map_find_safe/int64: map_find with that same lock and reference count: the
//   floor structure made as safe as the trie.
// trie_hit/<rank>: ShapeTrie::intern of a shape already held (64 shapes of
//   that rank, cycled), then the handle's drop. Includes the epoch pin and
//   unpin (plain stores), the lock-free walk, the key comparison, the
//   reference taken (CAS) and dropped (fetch_sub).
// reader_hit/<rank>: ShapeTrie::reader::find of the same shapes inside one
//   long read section: the walk and the key comparison, no atomic RMW, no
//   count: the borrowed lookup the "<= 2x map_find" target is measured on.
// reader_scoped_hit/<rank>: the same with a reader opened and closed around
//   each find (pin and unpin per lookup: two plain stores and a
//   thread_local load).
// descriptor_map/<rank>: the approach the Deeplearning4j record replaced: build
//   a descriptor (extents and strides in std::vectors), hash it, lock one
//   mutex, unordered_map::find. No reference count (a cheaper baseline than
//   the real one, which kept entries forever).
// trie_miss_release/<rank>: intern a shape nobody holds and drop it: entry
//   and (sometimes) a branch node made, then unlinked and freed.
// mt/<scheme>/<mix>/threads:N: throughput (items/s, real time) of N threads
//   interning from one shared set of 512 shapes of ranks 1-8.
//   scheme: striped256 (the default trie), striped1 (one writer lock),
//   reader256 (a reader per lookup, borrowed pointer; on a miss a counted
//   intern and drop),
//   global_mutex (a std::mutex held around a one-stripe trie's intern),
//   descriptor_map (the replaced cache under its one mutex).
//   mix: hits (every shape held by the main thread) or churn (one call in
//   16 interns a shape no one holds, which is made and freed).
//
// main() parks one extra thread for the whole run, as an engine process has
// threads: glibc skips the atomics of std::mutex while a process has a single
// thread, which would flatter the mutex baselines (2.8 vs 14.7 ns per
// lock/unlock pair measured on the development machine).
#include <clpool/shapes/shape_trie.hpp>
#include <clpool/shapes/detail/rw_lock.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

using namespace clpool;
using i64 = std::int64_t;

namespace {

constexpr int kCycle = 64;

std::vector<std::vector<i64>> shapes_of_rank(std::size_t rank, int n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<i64>> out;
    while (static_cast<int>(out.size()) < n) {
        std::vector<i64> e(rank);
        for (auto& x : e) x = 1 + static_cast<i64>(rng() % 64);
        bool dup = false;
        for (const auto& o : out) dup = dup || o == e;
        if (!dup) out.push_back(e);
    }
    return out;
}

// The replaced approach: a descriptor object per lookup.
struct ShapeDescriptor {
    std::vector<i64> extents, strides;
    ElementType type;
    Order layout;
    bool operator==(const ShapeDescriptor&) const = default;
    ShapeDescriptor(std::span<const i64> ext, ElementType t, Order o)
        : extents(ext.begin(), ext.end()), strides(ext.size()), type(t), layout(o) {
        i64 s = 1;
        for (std::size_t i = ext.size(); i-- > 0;) {
            strides[i] = s;
            s *= ext[i];
        }
    }
};
struct DescriptorHash {
    std::size_t operator()(const ShapeDescriptor& d) const noexcept {
        std::size_t h = std::hash<i64>()(static_cast<i64>(d.type)) ^ (static_cast<std::size_t>(d.layout) << 7);
        for (i64 v : d.extents) h = h * 31 + std::hash<i64>()(v);
        for (i64 v : d.strides) h = h * 31 + std::hash<i64>()(v);
        return h;
    }
};
struct DescriptorCache {
    std::mutex mutex;
    std::unordered_map<ShapeDescriptor, std::unique_ptr<i64[]>, DescriptorHash> map;
    const i64* lookup_or_insert(std::span<const i64> ext, ElementType t, Order o) {
        ShapeDescriptor d(ext, t, o);
        std::lock_guard lock(mutex);
        auto it = map.find(d);
        if (it != map.end()) return it->second.get();
        auto buf = std::make_unique<i64[]>(shape_words(ext.size()));
        buf[0] = static_cast<i64>(ext.size());
        const i64* p = buf.get();
        map.emplace(std::move(d), std::move(buf));
        return p;
    }
};

void map_find(benchmark::State& state) {
    std::unordered_map<i64, const i64*> map;
    std::vector<i64> keys;
    std::mt19937_64 rng(7);
    static const i64 dummy = 0;
    for (int i = 0; i < 512; ++i) {
        const i64 k = static_cast<i64>(rng() >> 1);
        map.emplace(k, &dummy);
        if (i < kCycle) keys.push_back(k);
    }
    std::size_t i = 0;
    for (auto _ : state) {
        auto it = map.find(keys[i]);
        benchmark::DoNotOptimize(it->second);
        i = (i + 1) % kCycle;
    }
}

void safe_floor(benchmark::State& state) {
    detail::rw_lock lock;
    std::atomic<std::size_t> refs{1};
    for (auto _ : state) {
        {
            std::shared_lock l(lock);
            auto n = refs.load(std::memory_order_relaxed);
            while (!refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {}
        }
        benchmark::ClobberMemory();
        refs.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void map_find_safe(benchmark::State& state) {
    struct counted {
        std::atomic<std::size_t> refs{1};
    };
    std::unordered_map<i64, std::unique_ptr<counted>> map;
    std::vector<i64> keys;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 512; ++i) {
        const i64 k = static_cast<i64>(rng() >> 1);
        map.emplace(k, std::make_unique<counted>());
        if (i < kCycle) keys.push_back(k);
    }
    detail::rw_lock lock;
    std::size_t i = 0;
    for (auto _ : state) {
        counted* c;
        {
            std::shared_lock l(lock);
            c = map.find(keys[i])->second.get();
            auto n = c->refs.load(std::memory_order_relaxed);
            while (!c->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {}
        }
        benchmark::DoNotOptimize(c);
        c->refs.fetch_sub(1, std::memory_order_acq_rel);
        i = (i + 1) % kCycle;
    }
}

void trie_hit(benchmark::State& state) {
    const auto rank = static_cast<std::size_t>(state.range(0));
    ShapeTrie trie;
    std::vector<Shape> held;
    for (std::size_t r = 1; r <= 8; ++r)  // the same population for every rank
        for (const auto& e : shapes_of_rank(r, kCycle, static_cast<unsigned>(r)))
            held.push_back(trie.intern(e, ElementType::f32));
    const auto keys = shapes_of_rank(rank, kCycle, static_cast<unsigned>(rank));
    std::size_t i = 0;
    for (auto _ : state) {
        Shape s = trie.intern(keys[i], ElementType::f32);
        benchmark::DoNotOptimize(s.data());
        i = (i + 1) % kCycle;
    }
}

template <bool Scoped>
void reader_hit(benchmark::State& state) {
    const auto rank = static_cast<std::size_t>(state.range(0));
    ShapeTrie trie;
    std::vector<Shape> held;
    for (std::size_t r = 1; r <= 8; ++r)
        for (const auto& e : shapes_of_rank(r, kCycle, static_cast<unsigned>(r)))
            held.push_back(trie.intern(e, ElementType::f32));
    const auto keys = shapes_of_rank(rank, kCycle, static_cast<unsigned>(rank));
    std::size_t i = 0;
    if constexpr (Scoped) {
        for (auto _ : state) {
            ShapeTrie::reader r(trie);
            const i64* p = r.find(keys[i], ElementType::f32);
            benchmark::DoNotOptimize(p);
            i = (i + 1) % kCycle;
        }
    } else {
        ShapeTrie::reader r(trie);
        for (auto _ : state) {
            const i64* p = r.find(keys[i], ElementType::f32);
            benchmark::DoNotOptimize(p);
            i = (i + 1) % kCycle;
        }
    }
    state.counters["membarrier"] = detail::epoch_domain::instance().uses_membarrier() ? 1 : 0;
}

void descriptor_map(benchmark::State& state) {
    const auto rank = static_cast<std::size_t>(state.range(0));
    DescriptorCache cache;
    for (std::size_t r = 1; r <= 8; ++r)
        for (const auto& e : shapes_of_rank(r, kCycle, static_cast<unsigned>(r)))
            cache.lookup_or_insert(e, ElementType::f32, Order::c);
    const auto keys = shapes_of_rank(rank, kCycle, static_cast<unsigned>(rank));
    std::size_t i = 0;
    for (auto _ : state) {
        const i64* p = cache.lookup_or_insert(keys[i], ElementType::f32, Order::c);
        benchmark::DoNotOptimize(p);
        i = (i + 1) % kCycle;
    }
}

void trie_miss_release(benchmark::State& state) {
    const auto rank = static_cast<std::size_t>(state.range(0));
    ShapeTrie trie;
    std::vector<Shape> held;
    for (const auto& e : shapes_of_rank(rank, kCycle, 1)) held.push_back(trie.intern(e, ElementType::f32));
    const auto keys = shapes_of_rank(rank, kCycle, 2);  // may overlap a held one: then a hit
    std::size_t i = 0;
    for (auto _ : state) {
        Shape s = trie.intern(keys[i], ElementType::f64);  // f64: never held
        benchmark::DoNotOptimize(s.data());
        i = (i + 1) % kCycle;
    }
}

// --- throughput across threads
enum class scheme { striped256, striped1, global_mutex, descriptor_map, reader256 };

struct Shared {
    std::unique_ptr<ShapeTrie> trie;
    std::mutex global;
    DescriptorCache cache;
    std::vector<std::vector<i64>> set;
    std::vector<Shape> held;
};

template <scheme S, bool Churn>
void mt(benchmark::State& state) {
    static Shared* shared = nullptr;
    if (state.thread_index() == 0) {
        shared = new Shared;
        shared->trie = std::make_unique<ShapeTrie>(S == scheme::striped256 || S == scheme::reader256 ? 256 : 1);
        for (std::size_t r = 1; r <= 8; ++r)
            for (auto& e : shapes_of_rank(r, kCycle, static_cast<unsigned>(r))) shared->set.push_back(e);
        for (const auto& e : shared->set) {
            shared->held.push_back(shared->trie->intern(e, ElementType::f32));
            shared->cache.lookup_or_insert(e, ElementType::f32, Order::c);
        }
    }
    // Google Benchmark starts the timing loop on all threads together, after
    // thread 0's setup above (it barriers before the first iteration).
    std::mt19937 rng(100 + static_cast<unsigned>(state.thread_index()));
    std::size_t i = rng() % 512;
    unsigned n = 0;
    for (auto _ : state) {
        Shared& sh = *shared;
        const auto& e = sh.set[i];
        // churn: f64 shapes are never held, so each such call makes and frees an entry
        const ElementType t = (Churn && (++n & 15) == 0) ? ElementType::f64 : ElementType::f32;
        if constexpr (S == scheme::reader256) {
            const i64* p;
            {
                ShapeTrie::reader r(*sh.trie);
                p = r.find(e, t);
            }
            if (!p) {
                Shape s = sh.trie->intern(e, t);
                p = s.data();
            }
            benchmark::DoNotOptimize(p);
        } else if constexpr (S == scheme::descriptor_map) {
            benchmark::DoNotOptimize(sh.cache.lookup_or_insert(e, t, Order::c));
        } else if constexpr (S == scheme::global_mutex) {
            std::unique_lock lock(sh.global);
            Shape s = sh.trie->intern(e, t);
            lock.unlock();
            benchmark::DoNotOptimize(s.data());
        } else {
            Shape s = sh.trie->intern(e, t);
            benchmark::DoNotOptimize(s.data());
        }
        i = (i + 97) % sh.set.size();
    }
    state.SetItemsProcessed(state.iterations());
    if (state.thread_index() == 0) {
        // The descriptor cache keeps churned shapes forever (as the replaced cache did).
        delete shared;
        shared = nullptr;
    }
}

}  // namespace

BENCHMARK(map_find)->Name("map_find/int64");
BENCHMARK(safe_floor)->Name("safe_floor");
BENCHMARK(map_find_safe)->Name("map_find_safe/int64");
BENCHMARK(trie_hit)->Name("trie_hit")->DenseRange(1, 8);
BENCHMARK(reader_hit<false>)->Name("reader_hit")->DenseRange(1, 8);
BENCHMARK(reader_hit<true>)->Name("reader_scoped_hit")->DenseRange(1, 8);
BENCHMARK(descriptor_map)->Name("descriptor_map")->DenseRange(1, 8);
BENCHMARK(trie_miss_release)->Name("trie_miss_release")->Arg(1)->Arg(4)->Arg(8);

#define CLPOOL_MT(S, C, name) \
    BENCHMARK(mt<S, C>)->Name(name)->Threads(1)->Threads(2)->Threads(4)->Threads(8)->Threads(16)->UseRealTime()
CLPOOL_MT(scheme::striped256, false, "mt/striped256/hits");
CLPOOL_MT(scheme::reader256, false, "mt/reader256/hits");
CLPOOL_MT(scheme::striped1, false, "mt/striped1/hits");
CLPOOL_MT(scheme::global_mutex, false, "mt/global_mutex/hits");
CLPOOL_MT(scheme::descriptor_map, false, "mt/descriptor_map/hits");
CLPOOL_MT(scheme::striped256, true, "mt/striped256/churn");
CLPOOL_MT(scheme::reader256, true, "mt/reader256/churn");
CLPOOL_MT(scheme::striped1, true, "mt/striped1/churn");
CLPOOL_MT(scheme::global_mutex, true, "mt/global_mutex/churn");
CLPOOL_MT(scheme::descriptor_map, true, "mt/descriptor_map/churn");

int main(int argc, char** argv) {
    std::atomic<bool> stop{false};
    std::thread parked([&] {
        while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    benchmark::Initialize(&argc, argv);
    int rc = 0;
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) rc = 1;
    else benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    stop = true;
    parked.join();
    return rc;
}
