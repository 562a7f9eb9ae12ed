// ShapeTrie and Shape: identity, layout, lifecycle down to an empty trie, errors, no heap on a hit, threads.
#include "alloc_counter.hpp"
#include "sanitizers.hpp"

#include <clpool/shapes/shape_trie.hpp>
#include <clpool/shapes/detail/rw_lock.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

using namespace clpool;
using i64 = std::int64_t;

namespace {

// Shapes that share ranks, prefixes and first extents, so they share stripes
// and force branch nodes at many depths.
std::vector<std::vector<i64>> overlapping_extents() {
    std::vector<std::vector<i64>> out;
    for (i64 a : {1, 2, 3})
        for (i64 b : {1, 4, 5})
            for (i64 c : {0, 7, 8, 9}) {
                out.push_back({a, b, c});
                out.push_back({a, b, c, 2});
                out.push_back({a, b});
            }
    out.push_back({});
    out.push_back({1, 1, 1, 1, 1, 1, 1, 1});
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string what_of(auto&& f) {
    try {
        f();
    } catch (const shape_error& e) {
        return e.what();
    }
    return "no shape_error";
}

}  // namespace

TEST_CASE("equal shapes share one canonical buffer; different shapes do not") {
    ShapeTrie trie;
    const i64 ext[] = {2, 3, 4};
    Shape a = trie.intern(ext, ElementType::f32);
    Shape b = trie.intern({2, 3, 4}, ElementType::f32);
    REQUIRE(a);
    CHECK(a == b);
    CHECK(a.data() == b.data());
    CHECK(a.use_count() == 2);

    // The layout: rank, extents, strides, type, order, count.
    const std::vector<i64> expect{3, 2, 3, 4, 12, 4, 1, static_cast<i64>(ElementType::f32), 'c', 24};
    CHECK(std::vector<i64>(a.words().begin(), a.words().end()) == expect);
    CHECK(a.rank() == 3);
    CHECK(a.element_count() == 24);
    CHECK(a.type() == ElementType::f32);
    CHECK(a.layout() == Order::c);
    CHECK(a.size_bytes() == shape_words(3) * 8);

    // Every part of the key tells shapes apart.
    Shape other_type = trie.intern({2, 3, 4}, ElementType::f64);
    Shape other_order = trie.intern({2, 3, 4}, ElementType::f32, Order::f);
    Shape other_extent = trie.intern({2, 3, 5}, ElementType::f32);
    const i64 view_strides[] = {1, 2, 6};
    Shape other_strides = trie.intern(ext, view_strides, ElementType::f32, Order::c);
    Shape other_rank = trie.intern({2, 3, 4, 1}, ElementType::f32);
    const std::vector<Shape> all{a, other_type, other_order, other_extent, other_strides, other_rank};
    for (std::size_t i = 0; i < all.size(); ++i)
        for (std::size_t j = i + 1; j < all.size(); ++j) CHECK(all[i].data() != all[j].data());
    CHECK(other_order.strides()[0] == 1);
    CHECK(other_order.strides()[2] == 6);
    CHECK(other_strides.strides()[1] == 2);
    CHECK(trie.size() == 6);

    // Explicit dense strides are the same shape as the implicit ones.
    const i64 dense[] = {12, 4, 1};
    CHECK(trie.intern(ext, dense, ElementType::f32, Order::c) == a);
    // A canonical buffer interns to the same entry.
    CHECK(trie.intern_buffer(a.words()) == a);
    CHECK(trie.find(ext, dense, ElementType::f32, Order::c) == a);
    CHECK_FALSE(trie.find(ext, dense, ElementType::i8, Order::c));

    // Scalars (rank 0) and empty tensors (an extent of 0) are shapes too.
    Shape scalar = trie.intern(std::span<const i64>{}, ElementType::f64);
    CHECK(scalar.rank() == 0);
    CHECK(scalar.element_count() == 1);
    CHECK(trie.intern(std::span<const i64>{}, ElementType::f64) == scalar);
    CHECK(trie.intern({4, 0, 3}, ElementType::i8).element_count() == 0);

    // Another trie interns its own copy.
    ShapeTrie second(8);
    Shape elsewhere = second.intern({2, 3, 4}, ElementType::f32);
    CHECK(elsewhere.data() != a.data());
    CHECK(std::equal(elsewhere.words().begin(), elsewhere.words().end(), a.words().begin()));
}

TEST_CASE("handles count references; the last release empties the trie, nodes and all") {
    for (std::size_t stripes : {1, 4, 256}) {
        CAPTURE(stripes);
        ShapeTrie trie(stripes);
        const auto shapes = overlapping_extents();
        std::vector<Shape> held;
        for (const auto& e : shapes) held.push_back(trie.intern(e, ElementType::f32));
        for (const auto& e : shapes) held.push_back(trie.intern(e, ElementType::f32));  // second handle each
        CHECK(trie.size() == shapes.size());
        CHECK(trie.check_invariants() == shapes.size());
        if (stripes == 1) CHECK(trie.node_count() > 0);  // one stripe: shared prefixes branch

        // Copies and moves share the count.
        Shape copy = held[0];
        CHECK(copy.use_count() == 3);
        Shape moved = std::move(copy);
        CHECK_FALSE(copy);
        CHECK(moved.use_count() == 3);
        moved.reset();
        CHECK(held[0].use_count() == 2);

        // Drop one handle of each: everything stays.
        const i64* first_data = held[0].data();
        for (std::size_t i = 0; i < shapes.size(); ++i) held[i].reset();
        CHECK(trie.size() == shapes.size());
        CHECK(trie.intern(shapes[0], ElementType::f32).data() == first_data);

        // Drop the rest in a shuffled order, checking the structure each time.
        std::vector<std::size_t> order_(shapes.size());
        for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = shapes.size() + i;
        std::shuffle(order_.begin(), order_.end(), std::mt19937(42 + static_cast<unsigned>(stripes)));
        std::size_t left = shapes.size();
        for (auto i : order_) {
            held[i].reset();
            --left;
            REQUIRE(trie.size() == left);
            REQUIRE(trie.check_invariants() == left);
        }
        CHECK(trie.size() == 0);
        CHECK(trie.node_count() == 0);
        CHECK(trie.empty());
        // And it fills again from empty.
        CHECK(trie.intern(shapes[3], ElementType::f32).element_count() >= 0);
        CHECK(trie.size() == 0);
    }
}

TEST_CASE("a handle outlives its trie") {
    Shape survivor;
    {
        ShapeTrie trie(2);
        survivor = trie.intern({5, 6}, ElementType::u8);
        Shape gone = trie.intern({5, 7}, ElementType::u8);
    }
    CHECK(survivor.element_count() == 30);
    Shape copy = survivor;
    CHECK(copy.use_count() == 2);
    copy.reset();
    survivor.reset();  // frees the orphaned entry (ASan checks the leak and the free)
}

TEST_CASE("the process-wide trie interns like any other") {
    auto& g = ShapeTrie::global();
    CHECK(&g == &ShapeTrie::global());
    CHECK(g.stripes() == ShapeTrie::default_stripes);
    CHECK(g.intern({9, 9, 9}, ElementType::i32) == g.intern({9, 9, 9}, ElementType::i32));
}

TEST_CASE("stripe counts are configurable and checked") {
    CHECK(ShapeTrie(1).stripes() == 1);
    CHECK(ShapeTrie(3).stripes() == 4);
    CHECK(ShapeTrie(256).stripes() == 256);
    CHECK_THROWS_AS(ShapeTrie(0), config_error);
    CHECK_THROWS_AS(ShapeTrie(65537), config_error);
}

TEST_CASE("bad shapes get a clear, typed error and change nothing") {
    ShapeTrie trie;
    Shape keep = trie.intern({3}, ElementType::f32);

    std::vector<i64> deep(33, 1);
    const auto rank_msg = what_of([&] { (void)trie.intern(deep, ElementType::f32); });
    CHECK(rank_msg.find("rank 33") != std::string::npos);
    CHECK(rank_msg.find("maximum 32") != std::string::npos);
    try {
        (void)trie.intern(deep, ElementType::f32);
    } catch (const usage_error& e) {  // part of clpool's vocabulary
        CHECK(dynamic_cast<const shape_error&>(e).why() == shape_error::reason::rank_too_high);
    }
    CHECK_NOTHROW((void)trie.intern(std::vector<i64>(32, 1), ElementType::f32));  // the maximum itself is fine

    const i64 big = i64{1} << 32;
    const auto count_msg = what_of([&] { (void)trie.intern({big, big}, ElementType::f32); });
    CHECK(count_msg.find("[4294967296, 4294967296]") != std::string::npos);
    CHECK(count_msg.find("overflows") != std::string::npos);
    // The count fits but its bytes do not.
    const auto bytes_msg = what_of([&] { (void)trie.intern({i64{1} << 61}, ElementType::f64); });
    CHECK(bytes_msg.find("overflows") != std::string::npos);
    // Reported as what overflowed, the byte size, naming the count, the element size and the limit.
    CHECK(bytes_msg.find("byte size") != std::string::npos);
    CHECK(bytes_msg.find("element count") == std::string::npos);
    CHECK(bytes_msg.find("2305843009213693952 elements of 8 bytes") != std::string::npos);
    CHECK(bytes_msg.find("9223372036854775807") != std::string::npos);
    CHECK(count_msg.find("element count") != std::string::npos);
    CHECK_NOTHROW((void)trie.intern({i64{1} << 61}, ElementType::u8));

    CHECK(what_of([&] { (void)trie.intern({2, -1}, ElementType::f32); }).find("-1") != std::string::npos);
    const i64 e2[] = {2, 3}, s1[] = {1};
    CHECK(what_of([&] { (void)trie.intern(e2, s1, ElementType::f32, Order::c); }).find("1 strides") !=
          std::string::npos);
    CHECK(what_of([&] { (void)trie.intern({2}, static_cast<ElementType>(99)); }).find("99") != std::string::npos);
    CHECK(what_of([&] { (void)trie.intern({2}, ElementType::f32, static_cast<Order>('x')); }).find("120") !=
          std::string::npos);
    const i64 short_buf[] = {2, 3, 4};
    CHECK(what_of([&] { (void)trie.intern_buffer(short_buf); }).find("needs 8") != std::string::npos);
    const i64 wrong_count[] = {1, 5, 1, static_cast<i64>(ElementType::f32), 'c', 6};
    CHECK(what_of([&] { (void)trie.intern_buffer(wrong_count); }).find("product 5") != std::string::npos);
    const i64 neg_rank[] = {-1};
    CHECK(what_of([&] { (void)trie.intern_buffer(neg_rank); }).find("rank -1") != std::string::npos);

    // Only the valid ones stayed (the 32-rank and the two 1<<61 shapes were dropped at once).
    CHECK(trie.size() == 1);
    CHECK(trie.check_invariants() == 1);
    CHECK(keep.element_count() == 3);
}

// An extent of 0 makes the element count 0 whatever the extents before it: validate() must not
// stop at the first overflowing partial product and refuse the empty tensor with count_overflow,
// as it accepts the same extents with the 0 first.
TEST_CASE("an empty tensor with huge extents before its zero extent is not a count overflow") {
    ShapeTrie trie;
    const i64 big = i64{1} << 32;
    Shape zero_first;
    CHECK_NOTHROW(zero_first = trie.intern({0, big, big}, ElementType::f32));
    CHECK(zero_first.element_count() == 0);
    Shape zero_last;
    CHECK_NOTHROW(zero_last = trie.intern({big, big, 0}, ElementType::f32));
    REQUIRE(zero_last);
    CHECK(zero_last.element_count() == 0);
    const i64 buf[] = {3, big, big, 0, 0, 0, 1, static_cast<i64>(ElementType::u8), 'c', 0};
    CHECK_NOTHROW((void)trie.intern_buffer(buf));
    CHECK(trie.check_invariants() == trie.size());
}

// rank_too_high is documented as "rank above ShapeTrie::max_rank", and code that handles it (say,
// by reshaping) must not take a corrupt buffer for one: a negative rank word is a malformed
// canonical buffer, bad_buffer.
TEST_CASE("a canonical buffer with a negative rank word is a bad buffer, not a rank too high") {
    ShapeTrie trie;
    const i64 neg_rank[] = {-1, 0, 0, 0};
    shape_error::reason why = shape_error::reason::rank_too_high;
    std::string msg;
    try {
        (void)trie.intern_buffer(neg_rank);
    } catch (const shape_error& e) {
        why = e.why();
        msg = e.what();
    }
    CHECK(why == shape_error::reason::bad_buffer);
    CHECK(msg.find("rank -1") != std::string::npos);
    const i64 high[] = {33};
    try {
        (void)trie.intern_buffer(high);
    } catch (const shape_error& e) {
        CHECK(e.why() == shape_error::reason::rank_too_high);
    }
}

// shape_error's message lists the extents (and strides) it was given: cut after the first
// values, with a count of the rest, so that a rank-100000 request does not build a message of
// about a megabyte; it still names the rank and the limit.
TEST_CASE("a shape error for a huge rank has a bounded message that still names the rank and the limit") {
    ShapeTrie trie;
    const std::vector<i64> huge(100000, 123456789);
    std::string msg;
    try {
        (void)trie.intern(huge, ElementType::f32);
    } catch (const shape_error& e) {
        CHECK(e.why() == shape_error::reason::rank_too_high);
        msg = e.what();
    }
    CHECK(msg.find("rank 100000") != std::string::npos);
    CHECK(msg.find("maximum 32") != std::string::npos);
    CHECK(msg.find("more") != std::string::npos);
    CHECK(msg.size() < 1000);
    msg.clear();
    const std::vector<i64> ext = {2, 3};
    try {
        (void)trie.intern(ext, huge, ElementType::f32, Order::c);
    } catch (const shape_error& e) {
        CHECK(e.why() == shape_error::reason::strides_mismatch);
        msg = e.what();
    }
    CHECK(msg.find("100000 strides") != std::string::npos);
    CHECK(msg.find("rank 2 extents [2, 3]") != std::string::npos);
    CHECK(msg.size() < 1000);
    CHECK(shape_error::list(std::vector<i64>{1, 2, 3}) == "[1, 2, 3]");
}

// Sanitizer runtimes bring their own operator new; test_no_heap_on_hit.cpp
// then does not replace it, and there is nothing to count (sanitizers.hpp).

#if CLPOOL_TEST_COUNTS_NEW
TEST_CASE("a hit allocates nothing on the heap, for every rank") {
    ShapeTrie trie(1);  // one stripe: hits walk real branch nodes
    std::vector<Shape> held;
    for (std::size_t r = 0; r <= ShapeTrie::max_rank; ++r)
        for (i64 v : {1, 2, 3}) held.push_back(trie.intern(std::vector<i64>(r, v), ElementType::f32));
    std::vector<std::vector<i64>> keys;
    for (std::size_t r = 0; r <= ShapeTrie::max_rank; ++r) keys.emplace_back(r, 2);
    const i64 strides[] = {1};
    const i64 one[] = {3};
    {
        test::CountAllocations counting;
        for (int round = 0; round < 10; ++round)
            for (const auto& k : keys) {
                Shape hit = trie.intern(k, ElementType::f32);
                Shape again = hit;  // copies do not allocate either
                REQUIRE(hit.rank() == k.size());
            }
        Shape viewed = trie.intern(one, strides, ElementType::f32, Order::c);
        Shape buffered = trie.intern_buffer(viewed.words());
        CHECK(counting.count() == 0);
    }
    // The counter sees the trie's allocations: a miss allocates its entry.
    test::CountAllocations counting;
    Shape miss = trie.intern({7, 7, 7}, ElementType::f32);
    CHECK(counting.count() > 0);
}
#endif

TEST_CASE("many threads intern and release overlapping shapes at once") {
    for (std::size_t stripes : {2, 256}) {
        CAPTURE(stripes);
        ShapeTrie trie(stripes);
        const auto shapes = overlapping_extents();
        // Half the shapes stay anchored: every thread must get the anchor's
        // pointer for them. The other half are born and die over and over.
        std::vector<Shape> anchors;
        for (std::size_t i = 0; i < shapes.size(); i += 2) anchors.push_back(trie.intern(shapes[i], ElementType::f32));

        constexpr int threads = 8;
        std::atomic<int> failures{0};
        std::vector<std::thread> pool;
        std::vector<Shape> exchange(16);  // handles passed between threads (copies on other threads)
        std::mutex exchange_mutex;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                std::mt19937 rng(1000 + t);
                std::vector<Shape> mine(8);
                for (int step = 0; step < 4000; ++step) {
                    const std::size_t i = rng() % shapes.size();
                    Shape s = trie.intern(shapes[i], ElementType::f32);
                    const auto& e = shapes[i];
                    bool ok = s.rank() == e.size() && std::equal(e.begin(), e.end(), s.extents().begin());
                    i64 count = 1;
                    for (i64 x : e) count *= x;
                    ok = ok && s.element_count() == count && s.use_count() >= 1;
                    if (i % 2 == 0) ok = ok && s.data() == anchors[i / 2].data();
                    if (!ok) failures.fetch_add(1);
                    mine[rng() % mine.size()] = s;  // keeps some alive, drops others
                    if (step % 64 == 0) {
                        std::lock_guard lock(exchange_mutex);
                        std::swap(exchange[rng() % exchange.size()], mine[rng() % mine.size()]);
                    }
                }
            });
        }
        for (auto& th : pool) th.join();
        CHECK(failures.load() == 0);
        CHECK(trie.check_invariants() == trie.size());
        anchors.clear();
        exchange.clear();
        CHECK(trie.size() == 0);
        CHECK(trie.node_count() == 0);
    }
}

TEST_CASE("the stripe lock excludes writers from readers and from each other") {
    // Plain (non-atomic) data: a broken lock shows as a torn pair here, and
    // as a data race under ThreadSanitizer.
    detail::rw_lock lock;
    long a = 0, b = 0;
    std::atomic<int> torn{0}, readers_inside{0}, max_readers{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 3000; ++i) {
                if ((i + t) % 4 == 0) {
                    std::unique_lock w(lock);
                    ++a;
                    ++b;
                } else {
                    std::shared_lock r(lock);
                    const int in = readers_inside.fetch_add(1) + 1;
                    int m = max_readers.load();
                    while (in > m && !max_readers.compare_exchange_weak(m, in)) {}
                    if (a != b) torn.fetch_add(1);
                    readers_inside.fetch_sub(1);
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(torn.load() == 0);
    CHECK(a == 8 * 3000 / 4);
    CHECK(b == a);
    CHECK(readers_inside.load() == 0);
}
