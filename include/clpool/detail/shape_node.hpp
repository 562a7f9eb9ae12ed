// shape_inner: a branch node of the shape trie (children keyed by one key word), and tagged slots.
#pragma once

#include <clpool/detail/shape_entry.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>

namespace clpool::detail {

// A slot holds nothing (0), a leaf (a shape_entry*, low bit set) or a branch
// (a shape_inner*). Leaves are the entries themselves: no leaf node exists.
using shape_slot = std::uintptr_t;

struct shape_inner;
inline bool is_leaf(shape_slot s) noexcept { return (s & 1u) != 0; }
inline shape_entry* leaf_of(shape_slot s) noexcept { return reinterpret_cast<shape_entry*>(s & ~shape_slot{1}); }
inline shape_slot leaf_slot(shape_entry* e) noexcept { return reinterpret_cast<shape_slot>(e) | 1u; }
inline shape_inner* inner_of(shape_slot s) noexcept { return reinterpret_cast<shape_inner*>(s); }

// A branch at key word `depth`: every key below it agrees on words
// [0, depth) and its children differ at word `depth` (a multiway crit-bit /
// Patricia node on whole words). Always at least two children; the one that
// would be left alone replaces its parent instead. Children are sorted by
// key word: small nodes are scanned, large ones binary-searched. Four
// children live inside the node; more move to the heap (on insert only).
struct shape_inner {
    static constexpr std::uint32_t inline_capacity = 4;

    explicit shape_inner(std::uint32_t d) noexcept : depth(d) {}
    shape_inner(const shape_inner&) = delete;
    shape_inner& operator=(const shape_inner&) = delete;
    ~shape_inner() {
        if (keys != small_keys) {
            delete[] keys;
            delete[] kids;
        }
    }

    // Index of the child for word w, or count when there is none.
    std::uint32_t find(std::int64_t w) const noexcept {
        if (count <= 8) {
            for (std::uint32_t i = 0; i < count; ++i)
                if (keys[i] == w) return i;
            return count;
        }
        const auto* it = std::lower_bound(keys, keys + count, w);
        return (it != keys + count && *it == w) ? static_cast<std::uint32_t>(it - keys) : count;
    }

    shape_slot* child(std::int64_t w) noexcept {
        const auto i = find(w);
        return i < count ? &kids[i] : nullptr;
    }

    // Room for one more child. Throws std::bad_alloc and then changes nothing.
    void reserve_one() {
        if (count < capacity) return;
        const std::uint32_t cap = capacity * 2;
        auto k = std::make_unique<std::int64_t[]>(cap);
        auto s = std::make_unique<shape_slot[]>(cap);
        std::copy(keys, keys + count, k.get());
        std::copy(kids, kids + count, s.get());
        if (keys != small_keys) {
            delete[] keys;
            delete[] kids;
        }
        keys = k.release();
        kids = s.release();
        capacity = cap;
    }

    // Adds a child for a word not present; reserve_one() first.
    void insert(std::int64_t w, shape_slot s) noexcept {
        std::uint32_t i = count;
        while (i > 0 && keys[i - 1] > w) {
            keys[i] = keys[i - 1];
            kids[i] = kids[i - 1];
            --i;
        }
        keys[i] = w;
        kids[i] = s;
        ++count;
    }

    void erase(std::uint32_t i) noexcept {
        for (; i + 1 < count; ++i) {
            keys[i] = keys[i + 1];
            kids[i] = kids[i + 1];
        }
        --count;
    }

    std::uint32_t depth;
    std::uint32_t count = 0;
    std::uint32_t capacity = inline_capacity;
    std::int64_t* keys = small_keys;
    shape_slot* kids = small_kids;
    std::int64_t small_keys[inline_capacity]{};
    shape_slot small_kids[inline_capacity]{};
};

}  // namespace clpool::detail
