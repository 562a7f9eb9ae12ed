// detail::arena's choice: take() is the best fit over every free range of the request's kind (least
// size, then oldest segment, then lowest offset), whatever size bins it keeps them in.
#include <clpool/backends/detail/arena.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

namespace {

using BestFitArena = clpool::detail::arena<int>;

// The best fit found by walking every segment: (size, serial, offset) least among free ranges of `kind`
// of at least n bytes; nullptr if none.
const BestFitArena::range* best_fit_by_walking(BestFitArena& a, std::size_t n, int kind) {
    const BestFitArena::range* best = nullptr;
    a.for_each_segment([&](BestFitArena::segment& s) {
        if (s.kind != kind) return;
        for (const BestFitArena::range* r = s.first; r; r = r->next) {
            if (!r->free || r->size < n) continue;
            if (!best ||
                std::tuple(r->size, s.serial, r->offset) < std::tuple(best->size, best->seg->serial, best->offset))
                best = r;
        }
    });
    return best;
}

}  // namespace

TEST_CASE("arena take() is the best fit over every free range, across its size bins") {
    BestFitArena::options o;
    o.granularity = 64;
    o.small_limit = 4096;
    BestFitArena a(o);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 12; ++i) {  // segments of many sizes, both kinds
        int memory = i;
        const std::size_t size = a.round(1 + rng() % (1u << (10 + i % 12)));
        REQUIRE(a.add(memory, size, i % 2) != nullptr);
    }
    std::vector<BestFitArena::range*> live;
    int checked = 0;
    for (int step = 0; step < 20000; ++step) {
        if (!live.empty() && rng() % 2 == 0) {
            const std::size_t k = rng() % live.size();
            a.give(live[k]);
            live[k] = live.back();
            live.pop_back();
            continue;
        }
        // Sizes on both sides of bin edges: powers of two and their neighbours, and random ones.
        const std::size_t shift = rng() % 18;
        const std::size_t n = a.round(rng() % 3 == 0 ? (std::size_t{1} << shift) + (rng() % 3) * 64 - 64
                                                     : 1 + rng() % (std::size_t{1} << shift));
        const BestFitArena::range* expected = best_fit_by_walking(a, n, a.pool_of(n));
        const std::size_t expected_offset = expected ? expected->offset : 0;
        const BestFitArena::segment* expected_seg = expected ? expected->seg : nullptr;
        BestFitArena::range* got = a.take(n);
        if (!expected) {
            CHECK(got == nullptr);
            continue;
        }
        REQUIRE(got != nullptr);
        CHECK(got->seg == expected_seg);
        CHECK(got->offset == expected_offset);
        CHECK(got->size == n);
        live.push_back(got);
        ++checked;
    }
    CHECK(checked > 5000);
    std::size_t largest = 0;
    for (auto* r : live) a.give(r);
    a.for_each_segment([&](BestFitArena::segment& s) {
        CHECK(s.first->free);
        CHECK(s.first->size == s.size);  // all merged back
        largest = std::max(largest, s.size);
    });
    CHECK(a.largest_free() == largest);
}
