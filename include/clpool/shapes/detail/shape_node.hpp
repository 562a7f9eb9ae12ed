// shape_inner: a copy-on-write branch node of the shape trie (children keyed by one key word), and tagged slots.
#pragma once

#include <clpool/shapes/detail/epoch.hpp>
#include <clpool/shapes/detail/shape_entry.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

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
// key word: small nodes are scanned, large ones binary-searched.
//
// Read without locks (docs/SHAPES.md, "Read path"): once published a node's
// depth, count and keys never change; only a child slot may be swapped in
// place (an atomic store, for a dying leaf replaced by a fresh one). Adding or
// removing a child builds a new node (with_child / without_child) that the
// writer publishes and the old one is retired, freed when no reader can see it.
// One allocation: this header, then `count` keys, then `count` slots.
struct shape_inner : epoch_retired {
    std::uint32_t depth;
    std::uint32_t count;

    shape_inner(const shape_inner&) = delete;
    shape_inner& operator=(const shape_inner&) = delete;

    const std::int64_t* keys() const noexcept { return reinterpret_cast<const std::int64_t*>(this + 1); }
    std::int64_t* keys() noexcept { return reinterpret_cast<std::int64_t*>(this + 1); }
    std::atomic<shape_slot>* kids() noexcept { return reinterpret_cast<std::atomic<shape_slot>*>(keys() + count); }
    const std::atomic<shape_slot>* kids() const noexcept {
        return reinterpret_cast<const std::atomic<shape_slot>*>(keys() + count);
    }

    // Index of the child for word w, or count when there is none.
    std::uint32_t find(std::int64_t w) const noexcept {
        const std::int64_t* k = keys();
        if (count <= 8) {
            for (std::uint32_t i = 0; i < count; ++i)
                if (k[i] == w) return i;
            return count;
        }
        const auto* it = std::lower_bound(k, k + count, w);
        return (it != k + count && *it == w) ? static_cast<std::uint32_t>(it - k) : count;
    }

    // The child for w, or nullptr.
    std::atomic<shape_slot>* child(std::int64_t w) noexcept {
        const auto i = find(w);
        return i < count ? &kids()[i] : nullptr;
    }
    const std::atomic<shape_slot>* child(std::int64_t w) const noexcept {
        const auto i = find(w);
        return i < count ? &kids()[i] : nullptr;
    }

    // A node at `depth` with the two children a (word wa) and b (word wb != wa).
    // Throws std::bad_alloc.
    static shape_inner* pair(std::uint32_t depth, std::int64_t wa, shape_slot a, std::int64_t wb, shape_slot b) {
        shape_inner* n = make(depth, 2);
        if (wb < wa) {
            std::swap(wa, wb);
            std::swap(a, b);
        }
        n->keys()[0] = wa;
        n->keys()[1] = wb;
        n->kids()[0].store(a, std::memory_order_relaxed);
        n->kids()[1].store(b, std::memory_order_relaxed);
        return n;
    }

    // A copy of `old` with one more child (word w, not present). Throws std::bad_alloc.
    static shape_inner* with_child(const shape_inner& old, std::int64_t w, shape_slot s) {
        shape_inner* n = make(old.depth, old.count + 1);
        std::uint32_t j = 0;
        bool placed = false;
        for (std::uint32_t i = 0; i < old.count; ++i) {
            if (!placed && w < old.keys()[i]) {
                n->set(j++, w, s);
                placed = true;
            }
            n->set(j++, old.keys()[i], old.kids()[i].load(std::memory_order_relaxed));
        }
        if (!placed) n->set(j, w, s);
        return n;
    }

    // A copy of `old` (three or more children) without child i. Throws std::bad_alloc.
    static shape_inner* without_child(const shape_inner& old, std::uint32_t i) {
        shape_inner* n = make(old.depth, old.count - 1);
        for (std::uint32_t k = 0, j = 0; k < old.count; ++k)
            if (k != i) n->set(j++, old.keys()[k], old.kids()[k].load(std::memory_order_relaxed));
        return n;
    }

    // Frees the node only (never its children).
    static void destroy(shape_inner* n) noexcept {
        live_count().fetch_sub(1, std::memory_order_relaxed);
        n->~shape_inner();
        ::operator delete(static_cast<void*>(n));
    }
    static void destroy_retired(epoch_retired* p) noexcept { destroy(static_cast<shape_inner*>(p)); }

    // Nodes allocated and not yet freed, in every trie of the process (tests check it returns to zero).
    static std::atomic<std::int64_t>& live_count() noexcept {
        static constinit std::atomic<std::int64_t> n{0};
        return n;
    }

private:
    shape_inner(std::uint32_t d, std::uint32_t c) noexcept : depth(d), count(c) {}

    static shape_inner* make(std::uint32_t depth, std::uint32_t count) {
        void* p =
            ::operator new(sizeof(shape_inner) + std::size_t{count} * (sizeof(std::int64_t) + sizeof(shape_slot)));
        auto* n = new (p) shape_inner(depth, count);
        for (std::uint32_t i = 0; i < count; ++i) new (&n->kids()[i]) std::atomic<shape_slot>(0);
        live_count().fetch_add(1, std::memory_order_relaxed);
        return n;
    }

    void set(std::uint32_t i, std::int64_t w, shape_slot s) noexcept {
        keys()[i] = w;
        kids()[i].store(s, std::memory_order_relaxed);
    }
};

static_assert(sizeof(shape_inner) % alignof(std::int64_t) == 0, "the keys must follow the header aligned");
static_assert(sizeof(std::atomic<shape_slot>) == sizeof(shape_slot), "slots are plain words");

}  // namespace clpool::detail
