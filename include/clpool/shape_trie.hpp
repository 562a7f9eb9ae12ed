// ShapeTrie: interns tensor shapes into one canonical, reference-counted buffer per distinct shape.
#pragma once

#include <clpool/errors.hpp>
#include <clpool/shape.hpp>
#include <clpool/shape_error.hpp>
#include <clpool/detail/shape_entry.hpp>
#include <clpool/detail/rw_lock.hpp>
#include <clpool/detail/shape_node.hpp>

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <shared_mutex>  // std::shared_lock
#include <span>
#include <stdexcept>
#include <string>

namespace clpool {

// The Deeplearning4j shape-buffer trie (ADR 0033), docs/SHAPES.md has the
// design. intern() returns a Shape handle to the one canonical buffer for its
// content: equal shapes get the same pointer. The last handle's release frees
// the entry and prunes the trie, down to an empty trie.
//
// Structure: `stripes()` independent tries, each under its own
// reader-writer lock (detail::rw_lock); a shape's stripe is a hash of its rank and first
// extents. Inside a stripe the root is chosen by rank, then the walk follows
// the shape's own values (extents, strides, type, order) through branch
// nodes that each test one value, to a leaf that is the entry itself; one
// comparison of the whole key there confirms the hit (a path-compressed
// trie, as the record's diagram draws it).
//
// Thread safety: every member function may be called from any threads at
// once. Lookups of one stripe run in parallel (shared lock); inserting and
// unlinking take that stripe's lock exclusively. Destroy a trie only when no
// other thread uses it; handles still out then free their entry on release.
class ShapeTrie {
public:
    static constexpr std::size_t max_rank = 32;
    static constexpr std::size_t default_stripes = 256;  // the record moved from 32 to 256

    // Throws config_error for 0 or more than 65536 stripes; other counts are
    // rounded up to a power of two (stripes() says what was used).
    explicit ShapeTrie(std::size_t stripes = default_stripes) : mask_(stripe_count(stripes) - 1) {
        stripes_ = std::make_unique<stripe[]>(mask_ + 1);
    }
    ShapeTrie(const ShapeTrie&) = delete;
    ShapeTrie& operator=(const ShapeTrie&) = delete;

    // Frees the trie's nodes. Entries still held by handles become orphans
    // and free themselves (and their device mirrors) on their last release.
    ~ShapeTrie() {
        for (std::size_t i = 0; i <= mask_; ++i)
            for (auto& root : stripes_[i].roots) orphan(root);
    }

    // The process-wide trie (default stripes). Never destroyed, so handles
    // held by static objects may be released at exit.
    static ShapeTrie& global() {
        static auto* t = new ShapeTrie();  // intentionally never deleted
        return *t;
    }

    // Returns the handle of the shape with these extents, dense strides for
    // `o` (row-major for order::c) and element type t.
    // Throws shape_error (rank above max_rank, a negative extent, an element
    // count or byte size that overflows int64, an unknown type or order; the
    // message names the values and the limit), std::bad_alloc on a miss.
    // Cost: a hit is one shared lock, a walk of a few nodes, one key
    // comparison and one atomic increment; it allocates nothing and builds no
    // descriptor (the key is read in place, dense strides on the stack).
    // A miss allocates the entry and at most one branch node.
    Shape intern(std::span<const std::int64_t> extents, element_type t, order o = order::c) {
        check_rank(extents.size(), extents);
        std::array<std::int64_t, max_rank> strides;
        dense_strides(extents, o, strides.data());
        return intern_key(key_of(extents, strides.data(), t, o));
    }
    Shape intern(std::initializer_list<std::int64_t> extents, element_type t, order o = order::c) {
        return intern(std::span<const std::int64_t>(extents.begin(), extents.size()), t, o);
    }

    // As above with explicit strides (in elements, one per extent), for views.
    // Also throws shape_error when strides.size() != extents.size().
    Shape intern(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides, element_type t,
                 order o) {
        check_rank(extents.size(), extents);
        if (strides.size() != extents.size())
            throw shape_error(shape_error::reason::strides_mismatch,
                              std::to_string(strides.size()) + " strides " + shape_error::list(strides) +
                                  " for rank " + std::to_string(extents.size()) + " extents " +
                                  shape_error::list(extents));
        return intern_key(key_of(extents, strides.data(), t, o));
    }

    // Interns a buffer already in the canonical layout (shape_words(rank)
    // words; see shape.hpp), e.g. one read from a file or another engine.
    // Throws shape_error as intern does, and for a length that does not match
    // the rank word or (on a miss) a count word that is not the product of
    // the extents.
    Shape intern_buffer(std::span<const std::int64_t> buffer) {
        if (buffer.empty()) throw shape_error(shape_error::reason::bad_buffer, "empty canonical buffer");
        const std::int64_t r = buffer[0];
        if (r < 0 || static_cast<std::uint64_t>(r) > max_rank)
            throw shape_error(shape_error::reason::rank_too_high,
                              "rank " + std::to_string(r) + " is outside the supported range 0.." +
                                  std::to_string(max_rank));
        const auto rank = static_cast<std::size_t>(r);
        if (buffer.size() != shape_words(rank))
            throw shape_error(shape_error::reason::bad_buffer,
                              "canonical buffer of rank " + std::to_string(rank) + " has " +
                                  std::to_string(buffer.size()) + " words, needs " +
                                  std::to_string(shape_words(rank)));
        const std::int64_t* w = buffer.data();
        key k = key_of(std::span(w + 1, rank), w + 1 + rank, static_cast<element_type>(w[2 * rank + 1]),
                       static_cast<order>(w[2 * rank + 2]));
        k.count_word = &w[2 * rank + 3];
        return intern_key(k);
    }

    // The handle of an already interned shape, or an empty one; never inserts.
    // Throws shape_error only for a rank above max_rank or mismatched strides.
    Shape find(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides, element_type t,
               order o) const {
        check_rank(extents.size(), extents);
        if (strides.size() != extents.size()) return {};
        const key k = key_of(extents, strides.data(), t, o);
        const auto& st = stripes_[k.stripe];
        std::shared_lock lock(st.mutex);
        auto* e = lookup(st, k);
        return e && try_ref(e) ? Shape::adopt(e) : Shape();
    }

    // Distinct shapes held now. Locks each stripe (shared) in turn.
    std::size_t size() const {
        std::size_t n = 0;
        for (std::size_t i = 0; i <= mask_; ++i) {
            std::shared_lock lock(stripes_[i].mutex);
            n += stripes_[i].entries;
        }
        return n;
    }
    bool empty() const { return size() == 0; }

    // Branch nodes held now (entries are the leaves and are not counted).
    std::size_t node_count() const {
        std::size_t n = 0;
        for (std::size_t i = 0; i <= mask_; ++i) {
            std::shared_lock lock(stripes_[i].mutex);
            n += stripes_[i].inner_nodes;
        }
        return n;
    }

    std::size_t stripes() const noexcept { return mask_ + 1; }

    // Walks every stripe and checks the structure: branch nodes have two or
    // more children sorted by word at strictly growing depths, every key
    // below a branch agrees with its siblings' words where it should, every
    // entry sits in its own stripe under its rank, and the counters match
    // the walk. Returns the number of entries found; throws std::logic_error
    // naming the first violation. For tests and fuzzing; cost: the whole trie.
    std::size_t check_invariants() const {
        std::size_t total = 0;
        for (std::size_t i = 0; i <= mask_; ++i) {
            const auto& st = stripes_[i];
            std::shared_lock lock(st.mutex);
            std::size_t entries = 0, inner = 0;
            for (std::size_t r = 0; r <= max_rank; ++r)
                check_subtree(st.roots[r], i, r, 0, nullptr, entries, inner);
            if (entries != st.entries || inner != st.inner_nodes)
                throw std::logic_error("shape trie: stripe " + std::to_string(i) + " counts " +
                                       std::to_string(st.entries) + " entries / " + std::to_string(st.inner_nodes) +
                                       " nodes, walk found " + std::to_string(entries) + " / " +
                                       std::to_string(inner));
            total += entries;
        }
        return total;
    }

private:
    using slot = detail::shape_slot;
    using entry = detail::shape_entry;
    using inner = detail::shape_inner;

    // One stripe: a lock and one root per rank, on cache lines of its own.
    struct alignas(64) stripe {
        mutable detail::rw_lock mutex;
        std::array<slot, max_rank + 1> roots{};
        std::size_t entries = 0;
        std::size_t inner_nodes = 0;
    };

    // The lookup key, read in place from the caller's arrays: key word i is
    // extent i, then stride i - rank, then the type and order codes. Entry
    // key word i is entry word i + 1.
    struct key {
        const std::int64_t* extents;
        const std::int64_t* strides;
        std::int64_t tail[2];
        const std::int64_t* count_word = nullptr;  // intern_buffer: checked on a miss
        std::uint32_t rank;
        std::uint32_t stripe;

        std::uint32_t length() const noexcept { return 2 * rank + 2; }
        std::int64_t word(std::uint32_t i) const noexcept {
            if (i < rank) return extents[i];
            if (i < 2 * rank) return strides[i - rank];
            return tail[i - 2 * rank];
        }
        bool matches(const entry* e) const noexcept {
            const std::int64_t* w = e->data() + 1;
            if (w[2 * rank] != tail[0] || w[2 * rank + 1] != tail[1]) return false;
            // A word loop, not memcmp: ranks are small, and it is inlined.
            // OR-ing the differences keeps it branch-free.
            std::uint64_t diff = 0;
            for (std::uint32_t i = 0; i < rank; ++i)
                diff |= static_cast<std::uint64_t>(w[i] ^ extents[i]) | static_cast<std::uint64_t>(w[rank + i] ^ strides[i]);
            return diff == 0;
        }
    };

    static std::size_t stripe_count(std::size_t n) {
        if (n == 0 || n > 65536)
            throw config_error("clpool: ShapeTrie stripe count " + std::to_string(n) +
                               " is outside 1..65536");
        return std::bit_ceil(n);
    }

    static void check_rank(std::size_t rank, std::span<const std::int64_t> extents) {
        if (rank > max_rank)
            throw shape_error(shape_error::reason::rank_too_high,
                              "rank " + std::to_string(rank) + " is above the supported maximum " +
                                  std::to_string(max_rank) + " (extents " + shape_error::list(extents) + ")");
    }

    // Dense strides, in wrapping arithmetic: an overflow can only give a
    // key no stored (validated) shape has, and a miss validates before insert.
    static void dense_strides(std::span<const std::int64_t> extents, order o, std::int64_t* out) noexcept {
        std::uint64_t s = 1;
        const std::size_t r = extents.size();
        if (o == order::f) {
            for (std::size_t i = 0; i < r; ++i) {
                out[i] = static_cast<std::int64_t>(s);
                s *= static_cast<std::uint64_t>(extents[i]);
            }
        } else {
            for (std::size_t i = r; i-- > 0;) {
                out[i] = static_cast<std::int64_t>(s);
                s *= static_cast<std::uint64_t>(extents[i]);
            }
        }
    }

    // The stripe: a cheap mix of the rank and the first (up to four) extents.
    key key_of(std::span<const std::int64_t> extents, const std::int64_t* strides, element_type t,
               order o) const noexcept {
        key k{extents.data(), strides, {static_cast<std::int64_t>(t), static_cast<std::int64_t>(o)}, nullptr,
              static_cast<std::uint32_t>(extents.size()), 0};
        std::uint64_t h = extents.size();
        const std::size_t n = extents.size() < 4 ? extents.size() : 4;
        for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint64_t>(extents[i])) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        k.stripe = static_cast<std::uint32_t>(h & mask_);
        return k;
    }

    // A reference from a lookup, under the stripe's lock (either mode): only
    // while the count is above zero. At zero the entry is dying (its last
    // releaser waits for the exclusive lock, so it cannot free the entry
    // while we look) and must not be revived. A CAS, not an add and undo: a
    // second lookup could take the undone add for a live count.
    static bool try_ref(entry* e) noexcept {
        auto n = e->refs.load(std::memory_order_relaxed);
        while (n != 0)
            if (e->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
        return false;
    }

    static entry* lookup(const stripe& st, const key& k) noexcept {
        slot s = st.roots[k.rank];
        while (s && !detail::is_leaf(s)) {
            inner* n = detail::inner_of(s);
            const slot* c = n->child(k.word(n->depth));
            if (!c) return nullptr;
            s = *c;
        }
        if (!s) return nullptr;
        entry* e = detail::leaf_of(s);
        return k.matches(e) ? e : nullptr;
    }

    Shape intern_key(const key& k) {
        auto& st = stripes_[k.stripe];
        {
            std::shared_lock lock(st.mutex);
            if (entry* e = lookup(st, k); e && try_ref(e)) return Shape::adopt(e);
        }
        const std::int64_t count = validate(k);
        entry* fresh = make_entry(k, count);
        entry* got = nullptr;
        try {
            std::unique_lock lock(st.mutex);
            got = insert(st, k, fresh);
        } catch (...) {
            entry::destroy(fresh);
            throw;
        }
        if (got != fresh) entry::destroy(fresh);  // another thread interned it first
        return Shape::adopt(got);
    }

    // Checks what a hit never needs to: returns the element count.
    static std::int64_t validate(const key& k) {
        const std::span<const std::int64_t> ext(k.extents, k.rank);
        std::int64_t count = 1;
        bool overflow = false;
        for (std::uint32_t i = 0; i < k.rank; ++i) {
            if (ext[i] < 0)
                throw shape_error(shape_error::reason::negative_extent,
                                  "extent " + std::to_string(i) + " of " + shape_error::list(ext) + " is " +
                                      std::to_string(ext[i]) + ", below 0");
            overflow = overflow || __builtin_mul_overflow(count, ext[i], &count);
        }
        const auto t = static_cast<element_type>(k.tail[0]);
        const std::size_t esize = element_size(t);
        if (esize == 0)
            throw shape_error(shape_error::reason::bad_element_type,
                              "element type code " + std::to_string(k.tail[0]) + " is not a clpool::element_type (1.." +
                                  std::to_string(static_cast<std::int64_t>(element_type::boolean)) + ")");
        if (k.tail[1] != static_cast<std::int64_t>(order::c) && k.tail[1] != static_cast<std::int64_t>(order::f))
            throw shape_error(shape_error::reason::bad_order,
                              "order code " + std::to_string(k.tail[1]) + " is neither 'c' (99) nor 'f' (102)");
        std::int64_t bytes = 0;
        if (overflow || __builtin_mul_overflow(count, static_cast<std::int64_t>(esize), &bytes))
            throw shape_error(shape_error::reason::count_overflow,
                              "the element count of extents " + shape_error::list(ext) + " (" +
                                  std::to_string(esize) + "-byte elements) overflows int64 (limit " +
                                  std::to_string(INT64_MAX) + " bytes)");
        if (k.count_word && *k.count_word != count)
            throw shape_error(shape_error::reason::bad_buffer,
                              "canonical buffer count word " + std::to_string(*k.count_word) +
                                  " is not the product " + std::to_string(count) + " of extents " +
                                  shape_error::list(ext));
        return count;
    }

    entry* make_entry(const key& k, std::int64_t count) {
        const std::uint32_t r = k.rank;
        entry* e = entry::create(static_cast<std::uint32_t>(shape_words(r)), this, k.stripe, &last_release);
        std::int64_t* w = e->data();
        w[0] = r;
        for (std::uint32_t i = 0; i < k.length(); ++i) w[1 + i] = k.word(i);
        w[2 * r + 3] = count;
        return e;
    }

    // Under the stripe's exclusive lock. Returns the live entry for k with a
    // reference taken: an existing one (a racing intern won), or `fresh`,
    // linked in. Throws std::bad_alloc (a new branch node) and then changes nothing.
    entry* insert(stripe& st, const key& k, entry* fresh) {
        slot* root = &st.roots[k.rank];
        if (!*root) {
            *root = detail::leaf_slot(fresh);
            ++st.entries;
            return fresh;
        }
        // Any leaf reached by following k where it can be followed shares
        // k's words up to the first word where k differs from every key here.
        slot s = *root;
        while (!detail::is_leaf(s)) {
            inner* n = detail::inner_of(s);
            const slot* c = n->child(k.word(n->depth));
            s = c ? *c : n->kids[0];
        }
        entry* near = detail::leaf_of(s);
        const std::int64_t* nw = near->data() + 1;
        const std::uint32_t len = k.length();
        std::uint32_t d = 0;
        while (d < len && k.word(d) == nw[d]) ++d;
        // Walk again down to the first node branching at d or later.
        slot* at = root;
        while (!detail::is_leaf(*at) && detail::inner_of(*at)->depth < d) {
            inner* n = detail::inner_of(*at);
            at = n->child(k.word(n->depth));  // present: k agrees with `near` before d
        }
        if (d == len) {  // `near` is this very shape (so *at is its leaf)
            if (try_ref(near)) return near;
            // Dying: put the new entry in its place; its last releaser will
            // find itself unlinked and only free it.
            *at = detail::leaf_slot(fresh);
            return fresh;
        }
        if (!detail::is_leaf(*at) && detail::inner_of(*at)->depth == d) {
            inner* n = detail::inner_of(*at);
            n->reserve_one();
            n->insert(k.word(d), detail::leaf_slot(fresh));
        } else {
            auto n = std::make_unique<inner>(d);
            n->insert(nw[d], *at);
            n->insert(k.word(d), detail::leaf_slot(fresh));
            *at = reinterpret_cast<slot>(n.release());
            ++st.inner_nodes;
        }
        ++st.entries;
        return fresh;
    }

    // The last handle is gone: unlink (if the trie still lives), then free
    // the entry and its attachments outside the lock.
    static void last_release(entry* e) noexcept {
        if (auto* t = static_cast<ShapeTrie*>(e->owner.load(std::memory_order_acquire))) t->unlink(e);
        entry::destroy(e);
    }

    // Removes e if it is still the leaf for its key (a racing intern may have
    // replaced it). A branch left with one child is replaced by that child.
    void unlink(entry* e) noexcept {
        auto& st = stripes_[e->stripe];
        std::unique_lock lock(st.mutex);
        const std::int64_t* w = e->data() + 1;
        slot* at = &st.roots[static_cast<std::size_t>(e->data()[0])];
        slot* parent_at = nullptr;
        std::uint32_t index = 0;
        while (*at && !detail::is_leaf(*at)) {
            inner* n = detail::inner_of(*at);
            index = n->find(w[n->depth]);
            if (index == n->count) return;
            parent_at = at;
            at = &n->kids[index];
        }
        if (*at != detail::leaf_slot(e)) return;
        --st.entries;
        if (!parent_at) {
            *at = 0;
            return;
        }
        inner* parent = detail::inner_of(*parent_at);
        parent->erase(index);
        if (parent->count == 1) {
            *parent_at = parent->kids[0];
            delete parent;
            --st.inner_nodes;
        }
    }

    static void orphan(slot s) noexcept {
        if (!s) return;
        if (detail::is_leaf(s)) {
            detail::leaf_of(s)->owner.store(nullptr, std::memory_order_release);
            return;
        }
        inner* n = detail::inner_of(s);
        for (std::uint32_t i = 0; i < n->count; ++i) orphan(n->kids[i]);
        delete n;
    }

    // `prefix` is a key (entry words + 1) every key below must agree with
    // on words [0, depth_floor); nullptr at a root.
    void check_subtree(slot s, std::size_t stripe_index, std::size_t rank, std::uint32_t depth_floor,
                       const std::int64_t* prefix, std::size_t& entries, std::size_t& inner_nodes) const {
        auto fail = [&](const std::string& why) {
            throw std::logic_error("shape trie: stripe " + std::to_string(stripe_index) + " rank " +
                                   std::to_string(rank) + ": " + why);
        };
        if (!s) return;
        if (detail::is_leaf(s)) {
            const entry* e = detail::leaf_of(s);
            const std::int64_t* w = e->data();
            if (static_cast<std::size_t>(w[0]) != rank || e->words != shape_words(rank)) fail("entry of wrong rank");
            if (e->stripe != stripe_index) fail("entry in a foreign stripe");
            if (key_of(std::span(w + 1, rank), w + 1 + rank, element_type::f32, order::c).stripe != stripe_index)
                fail("entry whose hash names another stripe");
            if (e->owner.load(std::memory_order_relaxed) != this) fail("entry owned by another trie");
            if (prefix && std::memcmp(prefix, w + 1, depth_floor * sizeof(std::int64_t)) != 0)
                fail("entry disagrees with its branch's prefix");
            ++entries;
            return;
        }
        const inner* n = detail::inner_of(s);
        ++inner_nodes;
        if (n->count < 2) fail("branch with fewer than two children");
        if (n->depth < depth_floor || n->depth >= 2 * rank + 2) fail("branch depth out of order");
        for (std::uint32_t i = 0; i < n->count; ++i) {
            if (i && n->keys[i - 1] >= n->keys[i]) fail("branch keys not sorted");
            // Every key below child i has word n->depth == keys[i]: check on one leaf.
            slot c = n->kids[i];
            while (!detail::is_leaf(c)) c = detail::inner_of(c)->kids[0];
            const std::int64_t* w = detail::leaf_of(c)->data() + 1;
            if (w[n->depth] != n->keys[i]) fail("child under the wrong branch word");
            if (prefix && std::memcmp(prefix, w, depth_floor * sizeof(std::int64_t)) != 0)
                fail("subtree disagrees with its prefix");
            check_subtree(n->kids[i], stripe_index, rank, n->depth + 1, w, entries, inner_nodes);
        }
    }

    std::size_t mask_;
    std::unique_ptr<stripe[]> stripes_;
};

}  // namespace clpool
