// ShapeTrie::reader and epoch reclamation: borrowed lookups, memory kept alive by readers, nesting, threads, freeing down to zero.
#include <clpool/shapes/shape_trie.hpp>
#include <clpool/shapes/detail/epoch.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

using namespace clpool;
using i64 = std::int64_t;

namespace {

// The canonical words intern() makes for dense c-order extents.
std::vector<i64> canonical(const std::vector<i64>& ext, ElementType t) {
    std::vector<i64> w{static_cast<i64>(ext.size())};
    w.insert(w.end(), ext.begin(), ext.end());
    std::vector<i64> str(ext.size());
    i64 s = 1, count = 1;
    for (std::size_t i = ext.size(); i-- > 0;) {
        str[i] = s;
        s *= ext[i];
    }
    for (i64 e : ext) count *= e;
    w.insert(w.end(), str.begin(), str.end());
    w.push_back(static_cast<i64>(t));
    w.push_back('c');
    w.push_back(count);
    return w;
}

bool words_equal(const i64* p, const std::vector<i64>& want) { return std::equal(want.begin(), want.end(), p); }

// Shapes sharing ranks and prefixes, so they share stripes and branch nodes.
std::vector<std::vector<i64>> family() {
    std::vector<std::vector<i64>> out;
    for (i64 a : {1, 2, 3})
        for (i64 b : {1, 4, 5, 6})
            for (i64 c : {2, 7, 8}) {
                out.push_back({a, b, c});
                out.push_back({a, b, c, 2});
                out.push_back({a, b});
            }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

// Frees everything retired so far (no reader is open when this is called).
void settle() {
    ShapeTrie::collect();
    ShapeTrie::collect();
}

}  // namespace

TEST_CASE("a reader finds the interned buffer itself, with no count taken") {
    ShapeTrie trie(4);
    Shape a = trie.intern({2, 3, 4}, ElementType::f32);
    const i64 str[] = {1, 2, 6};
    const i64 ext[] = {2, 3, 4};
    Shape f = trie.intern(ext, str, ElementType::f32, Order::f);
    {
        ShapeTrie::reader r(trie);
        CHECK(r.find({2, 3, 4}, ElementType::f32) == a.data());
        CHECK(r.find(ext, str, ElementType::f32, Order::f) == f.data());
        CHECK(r.find(std::span<const i64>(ext), ElementType::f32, Order::f) ==
              f.data());  // dense f strides are {1,2,6}
        CHECK(a.use_count() == 1);  // nothing counted
        CHECK(r.find({2, 3, 5}, ElementType::f32) == nullptr);
        CHECK(r.find({2, 3, 4}, ElementType::f64) == nullptr);
        CHECK(r.find({2, 3}, ElementType::f32) == nullptr);
        CHECK(r.find(ext, std::span<const i64>(str, 2), ElementType::f32, Order::f) == nullptr);  // count mismatch
        CHECK(r.find(std::vector<i64>(ShapeTrie::max_rank + 1, 1), ElementType::f32) == nullptr);
        CHECK(r.find({-1}, ElementType::f32) == nullptr);
        CHECK(r.find({2}, static_cast<ElementType>(99)) == nullptr);

        Shape counted = r.retain(r.find({2, 3, 4}, ElementType::f32));
        CHECK(counted == a);
        CHECK(a.use_count() == 2);
        CHECK_FALSE(r.retain(nullptr));
    }
    CHECK(a.use_count() == 1);
}

TEST_CASE("a reader keeps a dead entry's memory until it ends; collect then frees it") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    const i64 nodes0 = ShapeTrie::live_nodes();
    ShapeTrie trie(1);
    const std::vector<i64> ext{7, 9};
    const auto want = canonical(ext, ElementType::i32);
    Shape other = trie.intern({7, 8}, ElementType::i32);  // a sibling: the dead one's unlink retires a branch node
    Shape s = trie.intern(ext, ElementType::i32);
    CHECK(trie.node_count() == 1);
    const i64* p = nullptr;
    Shape reborn;
    {
        ShapeTrie::reader r(trie);
        p = r.find(ext, ElementType::i32);
        REQUIRE(p == s.data());
        s.reset();  // the last handle: unlinked now, retired, not freed
        CHECK(trie.size() == 1);
        CHECK(trie.node_count() == 0);
        CHECK(r.find(ext, ElementType::i32) == nullptr);  // gone from the trie
        CHECK_FALSE(r.retain(p));  // dying: never revived
        reborn = trie.intern(ext, ElementType::i32);
        CHECK(reborn.data() != p);  // a new entry
        CHECK(r.find(ext, ElementType::i32) == reborn.data());
        // Reclaim cannot free what this reader may still read.
        ShapeTrie::collect();
        ShapeTrie::collect();
        CHECK(ShapeTrie::live_entries() == entries0 + 3);  // other, reborn and the dead one
        CHECK(words_equal(p, want));  // still readable (ASan would flag a use after free)
    }
    settle();
    CHECK(ShapeTrie::live_entries() == entries0 + 2);  // the dead one is freed now
    other.reset();
    reborn.reset();
    CHECK(trie.size() == 0);
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
    CHECK(ShapeTrie::live_nodes() == nodes0);
}

TEST_CASE("readers nest; the outermost one protects until it ends") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    ShapeTrie trie(2);
    Shape s = trie.intern({3, 3, 3}, ElementType::u8);
    const auto want = canonical({3, 3, 3}, ElementType::u8);
    {
        ShapeTrie::reader outer(trie);
        const i64* p = outer.find({3, 3, 3}, ElementType::u8);
        {
            ShapeTrie::reader inner(trie);
            CHECK(inner.find({3, 3, 3}, ElementType::u8) == p);
            // intern and counted find open sections of their own inside ours
            Shape again = trie.intern({3, 3, 3}, ElementType::u8);
            CHECK(again.data() == p);
            CHECK(trie.find(std::vector<i64>{3, 3, 3}, std::vector<i64>{9, 3, 1}, ElementType::u8, Order::c) == s);
        }
        s.reset();
        settle();  // inner ended, outer still open: nothing freed
        CHECK(ShapeTrie::live_entries() == entries0 + 1);
        CHECK(words_equal(p, want));
    }
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
}

TEST_CASE("a reader open on another thread holds back reclamation until it closes") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    ShapeTrie trie(8);
    std::vector<Shape> held;
    for (const auto& e : family()) held.push_back(trie.intern(e, ElementType::f16));
    std::atomic<int> phase{0};
    std::atomic<bool> words_ok{true};
    std::thread t([&] {
        ShapeTrie::reader r(trie);
        std::vector<const i64*> seen;
        for (const auto& e : family()) seen.push_back(r.find(e, ElementType::f16));
        phase.store(1);
        while (phase.load() != 2) std::this_thread::yield();
        // Every handle is gone and collect ran: the memory must still be there.
        const auto shapes = family();
        for (std::size_t i = 0; i < shapes.size(); ++i)
            if (!seen[i] || !words_equal(seen[i], canonical(shapes[i], ElementType::f16))) words_ok.store(false);
        for (const auto& e : shapes)
            if (r.find(e, ElementType::f16) != nullptr) words_ok.store(false);  // unlinked
    });
    while (phase.load() != 1) std::this_thread::yield();
    held.clear();
    CHECK(trie.size() == 0);
    settle();
    CHECK(ShapeTrie::live_entries() == entries0 + static_cast<i64>(family().size()));
    phase.store(2);
    t.join();
    CHECK(words_ok.load());
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
}

TEST_CASE("many threads intern, release and read overlapping shapes at once") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    const i64 nodes0 = ShapeTrie::live_nodes();
    for (std::size_t stripes : {1, 256}) {
        CAPTURE(stripes);
        ShapeTrie trie(stripes);
        const auto shapes = family();
        std::vector<std::vector<i64>> words;
        for (const auto& e : shapes) words.push_back(canonical(e, ElementType::f32));
        std::vector<Shape> anchors;  // every fourth shape stays: its pointer never changes
        for (std::size_t i = 0; i < shapes.size(); i += 4) anchors.push_back(trie.intern(shapes[i], ElementType::f32));

        constexpr int writers = 4, readers = 4;
        std::atomic<int> failures{0}, writers_left{writers};
        std::atomic<long> found{0}, retained{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < writers; ++t)
            pool.emplace_back([&, t] {
                std::mt19937 rng(10 + t);
                std::vector<Shape> mine(6);
                for (int step = 0; step < 6000; ++step) {
                    const std::size_t i = rng() % shapes.size();
                    Shape s = trie.intern(shapes[i], ElementType::f32);
                    if (!words_equal(s.data(), words[i])) failures.fetch_add(1);
                    if (i % 4 == 0 && s.data() != anchors[i / 4].data()) failures.fetch_add(1);
                    mine[rng() % mine.size()] = std::move(s);  // keeps some alive, drops others
                }
                writers_left.fetch_sub(1);
            });
        for (int t = 0; t < readers; ++t)
            pool.emplace_back([&, t] {
                std::mt19937 rng(100 + t);
                do {
                    ShapeTrie::reader r(trie);  // short sections, reopened often
                    for (int k = 0; k < 50; ++k) {
                        const std::size_t i = rng() % shapes.size();
                        const i64* p = r.find(shapes[i], ElementType::f32);
                        if (i % 4 == 0 && p != anchors[i / 4].data()) failures.fetch_add(1);
                        if (!p) continue;
                        found.fetch_add(1, std::memory_order_relaxed);
                        if (!words_equal(p, words[i])) failures.fetch_add(1);
                        if (k % 8 == 0) {
                            if (Shape s = r.retain(p)) {
                                retained.fetch_add(1, std::memory_order_relaxed);
                                if (s.data() != p) failures.fetch_add(1);
                            }
                        }
                    }
                } while (writers_left.load(std::memory_order_relaxed) > 0);
            });
        for (auto& th : pool) th.join();
        CHECK(failures.load() == 0);
        CHECK(found.load() > 0);
        CHECK(retained.load() > 0);
        CHECK(trie.check_invariants() == trie.size());
        anchors.clear();
        CHECK(trie.size() == 0);
        CHECK(trie.node_count() == 0);
    }
    // The threads are gone; what they retired sits on their released records.
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
    CHECK(ShapeTrie::live_nodes() == nodes0);
}

TEST_CASE("the lifecycle down to an empty trie frees every entry and node after collect") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    const i64 nodes0 = ShapeTrie::live_nodes();
    {
        ShapeTrie trie(1);  // one stripe: deep branch nodes, many copy-on-write replacements
        std::vector<Shape> held;
        for (const auto& e : family()) held.push_back(trie.intern(e, ElementType::f32));
        const auto n = static_cast<i64>(held.size());
        CHECK(ShapeTrie::live_entries() == entries0 + n);
        CHECK(ShapeTrie::live_nodes() >= nodes0 + static_cast<i64>(trie.node_count()));
        settle();  // the nodes replaced while filling are freed; live ones stay
        CHECK(ShapeTrie::live_nodes() == nodes0 + static_cast<i64>(trie.node_count()));
        std::shuffle(held.begin(), held.end(), std::mt19937(5));
        while (!held.empty()) {
            held.pop_back();
            REQUIRE(trie.check_invariants() == held.size());
        }
        CHECK(trie.size() == 0);
        CHECK(trie.node_count() == 0);
        // Retired; some may be reclaimed already (every reclaim_every retires).
        const i64 unreclaimed = ShapeTrie::live_entries() - entries0;
        CHECK(unreclaimed > 0);
        CHECK(unreclaimed <= n);
        const std::size_t freed = ShapeTrie::collect();
        CHECK(freed >= static_cast<std::size_t>(unreclaimed));
        CHECK(ShapeTrie::live_entries() == entries0);
        CHECK(ShapeTrie::live_nodes() == nodes0);
        CHECK(detail::epoch_domain::instance().pending() == 0);
    }
    // Handles outliving their trie are freed through the same path.
    Shape survivor;
    {
        ShapeTrie trie(2);
        survivor = trie.intern({5, 6}, ElementType::u8);
        Shape gone = trie.intern({5, 7}, ElementType::u8);
    }
    CHECK(survivor.element_count() == 30);
    survivor.reset();
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
    CHECK(ShapeTrie::live_nodes() == nodes0);
}

TEST_CASE("reclaim runs by itself as entries die, without collect") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    ShapeTrie trie(16);
    // Many more deaths than the per-thread reclaim interval: most are freed on the way.
    const int deaths = 20 * static_cast<int>(detail::epoch_domain::reclaim_every);
    for (int i = 0; i < deaths; ++i) {
        Shape s = trie.intern({i, 3}, ElementType::f64);
        REQUIRE(s);
    }
    CHECK(trie.size() == 0);
    const i64 pending = ShapeTrie::live_entries() - entries0;
    CHECK(pending >= 0);
    CHECK(pending <= 3 * static_cast<i64>(detail::epoch_domain::reclaim_every));
    MESSAGE("membarrier-backed pins: " << detail::epoch_domain::instance().uses_membarrier()
                                       << "; dead entries not yet freed after " << deaths << " deaths: " << pending);
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
}

TEST_CASE("threads that exit leave their records for reuse and their retired memory to collect") {
    settle();
    const i64 entries0 = ShapeTrie::live_entries();
    ShapeTrie trie(4);
    for (int round = 0; round < 4; ++round) {
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&, t] {
                ShapeTrie::reader r(trie);
                for (int i = 0; i < 10; ++i) {
                    Shape s = trie.intern({round, t, i}, ElementType::i64);
                    if (r.find({round, t, i}, ElementType::i64) != s.data()) std::abort();
                }
            });
        for (auto& th : ts) th.join();
    }
    CHECK(trie.size() == 0);
    settle();
    CHECK(ShapeTrie::live_entries() == entries0);
}

TEST_CASE("dense lookups tell a dense shape from a view with the same extents") {
    ShapeTrie trie(1);  // one stripe: the views branch from the dense shape on a stride word
    const i64 ext[] = {2, 3, 4};
    const i64 dense_c[] = {12, 4, 1}, view[] = {1, 2, 6}, view2[] = {24, 4, 1};
    Shape v = trie.intern(ext, view, ElementType::f32, Order::c);  // f-like strides, c order: a view
    Shape v2 = trie.intern(ext, view2, ElementType::f32, Order::c);
    Shape d = trie.intern(ext, ElementType::f32);
    Shape explicit_dense = trie.intern(ext, dense_c, ElementType::f32, Order::c);
    Shape f = trie.intern(ext, ElementType::f32, Order::f);
    CHECK(explicit_dense == d);
    CHECK(v != d);
    CHECK(v2 != d);
    CHECK(v2 != v);
    CHECK(f != v);  // same strides as v, other order
    CHECK(trie.size() == 4);
    CHECK(trie.check_invariants() == 4);
    CHECK(trie.node_count() >= 1);
    ShapeTrie::reader r(trie);
    CHECK(r.find(ext, ElementType::f32) == d.data());
    CHECK(r.find(ext, dense_c, ElementType::f32, Order::c) == d.data());
    CHECK(r.find(ext, view, ElementType::f32, Order::c) == v.data());
    CHECK(r.find(ext, view2, ElementType::f32, Order::c) == v2.data());
    CHECK(r.find(ext, ElementType::f32, Order::f) == f.data());
    CHECK(r.find(ext, view, ElementType::f32, Order::f) == f.data());
    // With the dense one gone, a dense lookup must not take a view for it.
    d.reset();
    explicit_dense.reset();
    CHECK(r.find(ext, ElementType::f32) == nullptr);
    CHECK(trie.intern(ext, ElementType::f32).strides()[0] == 12);
}
