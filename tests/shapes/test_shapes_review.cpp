// Review of the shape trie: defects found by the adversarial review, one case each.
#include <clpool/shapes/shape_trie.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace clpool;
using i64 = std::int64_t;

// Defect: validate() stopped computing the element count at the first
// overflowing partial product, so an empty tensor (an extent of 0 after two
// huge ones: element count 0) was refused with count_overflow, while the same
// extents with the 0 first were accepted.
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
