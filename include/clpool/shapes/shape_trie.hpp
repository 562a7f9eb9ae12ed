// ShapeTrie: interns tensor shapes into one canonical, reference-counted buffer per distinct shape.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/shapes/shape.hpp>
#include <clpool/shapes/shape_error.hpp>
#include <clpool/shapes/detail/epoch.hpp>
#include <clpool/shapes/detail/shape_entry.hpp>
#include <clpool/shapes/detail/rw_lock.hpp>
#include <clpool/shapes/detail/shape_node.hpp>

#include <algorithm>
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
// Structure: `stripes()` independent tries, each with its own writer lock
// (detail::rw_lock); a shape's stripe is a hash of its rank and first
// extents. Inside a stripe the root is chosen by rank, then the walk follows
// the shape's own values (extents, strides, type, order) through branch
// nodes that each test one value, to a leaf that is the entry itself; one
// comparison of the whole key there confirms the hit (a path-compressed
// trie, as the record's diagram draws it).
//
// Thread safety: every member function may be called from any threads at
// once. Lookups take no lock and write nothing shared (RCU-style, see
// docs/SHAPES.md "Read path"): they pin the process-wide epoch
// (detail::epoch_domain), walk atomic slots and compare. Inserting and
// unlinking take the stripe's lock exclusively and never change a node in
// place: they publish a new node and retire the old one, and a dead entry is
// retired too; retired memory is freed by a later reclaim, once no read
// section that could see it is still open (every 128 retires per thread, or
// collect()). Destroy a trie only when no other thread uses it (no reader,
// intern or find in flight on it); handles still out may be dropped on any
// thread, during the destruction too, and free their entry on release.
class ShapeTrie {
public:
    class reader;

    static constexpr std::size_t max_rank = 32;
    static constexpr std::size_t default_stripes = 256;  // the record moved from 32 to 256

    // Throws config_error for 0 or more than 65536 stripes; other counts are
    // rounded up to a power of two (stripes() says what was used).
    explicit ShapeTrie(std::size_t stripes = default_stripes)
        : mask_(stripe_count(stripes) - 1), block_(std::make_unique<stripe_block>(mask_ + 1)),
          stripes_(block_->stripes.get()) {}
    ShapeTrie(const ShapeTrie&) = delete;
    ShapeTrie& operator=(const ShapeTrie&) = delete;

    // Frees the trie's nodes. Entries still held by handles become orphans
    // and free themselves (and their device mirrors) on their last release,
    // which may run on other threads meanwhile: each stripe is orphaned under
    // its lock, and the stripes themselves are retired, not freed, so a
    // release that read the owner just before stays safe (it is pinned).
    ~ShapeTrie() {
        for (std::size_t i = 0; i <= mask_; ++i) {
            std::unique_lock lock(stripes_[i].mutex);
            for (auto& root : stripes_[i].roots) orphan(root.exchange(0, std::memory_order_acq_rel));
        }
        detail::epoch_domain::retire(block_.release(), &stripe_block::destroy_retired);
    }

    // The process-wide trie (default stripes). Never destroyed, so handles
    // held by static objects may be released at exit. Its stripe locks are
    // taken around fork() (platform/fork_locks.hpp), so a fork child never
    // starts with one held by a thread it does not have.
    static ShapeTrie& global() {
        static auto* t = [] {
            auto* g = new ShapeTrie();  // intentionally never deleted
            detail::fork_locks::add(detail::fork_rank::shape_trie, {&lock_all, &unlock_all, &unlock_all, g});
            return g;
        }();
        return *t;
    }

    // Returns the handle of the shape with these extents, dense strides for
    // `o` (row-major for Order::c) and element type t.
    // Throws shape_error (rank above max_rank, a negative extent, an element
    // count or byte size that overflows int64, an unknown type or order; the
    // message names the values and the limit), std::bad_alloc on a miss.
    // Cost: a hit is an epoch pin and unpin (two plain stores), a lock-free
    // walk of a few nodes, one key comparison and one atomic CAS on the
    // entry's count (the handle's drop is one more atomic RMW); it takes no
    // lock, allocates nothing and builds no descriptor (the key is read in
    // place, dense strides on the stack). For a lookup with no atomic RMW at
    // all, use a reader. A miss allocates the entry and at most one branch
    // node (copy-on-write: the replaced node is retired).
    Shape intern(std::span<const std::int64_t> extents, ElementType t, Order o = Order::c) {
        check_rank(extents.size(), extents);
        return intern_key(key_of(extents, nullptr, t, o));  // dense: strides computed only if needed
    }
    Shape intern(std::initializer_list<std::int64_t> extents, ElementType t, Order o = Order::c) {
        return intern(std::span<const std::int64_t>(extents.begin(), extents.size()), t, o);
    }

    // As above with explicit strides (in elements, one per extent), for views.
    // Also throws shape_error when strides.size() != extents.size().
    Shape intern(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides, ElementType t, Order o) {
        check_rank(extents.size(), extents);
        if (strides.size() != extents.size())
            throw shape_error(shape_error::reason::strides_mismatch,
                              std::to_string(strides.size()) + " strides " + shape_error::list(strides) + " for rank " +
                                  std::to_string(extents.size()) + " extents " + shape_error::list(extents));
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
        if (r < 0)
            throw shape_error(shape_error::reason::bad_buffer, "canonical buffer of rank " + std::to_string(r) +
                                                                   " (a negative rank word; supported ranks are 0.." +
                                                                   std::to_string(max_rank) + ")");
        if (static_cast<std::uint64_t>(r) > max_rank)
            throw shape_error(
                shape_error::reason::rank_too_high,
                "rank " + std::to_string(r) + " is outside the supported range 0.." + std::to_string(max_rank));
        const auto rank = static_cast<std::size_t>(r);
        if (buffer.size() != shape_words(rank))
            throw shape_error(shape_error::reason::bad_buffer,
                              "canonical buffer of rank " + std::to_string(rank) + " has " +
                                  std::to_string(buffer.size()) + " words, needs " + std::to_string(shape_words(rank)));
        const std::int64_t* w = buffer.data();
        key k = key_of(std::span(w + 1, rank), w + 1 + rank, static_cast<ElementType>(w[2 * rank + 1]),
                       static_cast<Order>(w[2 * rank + 2]));
        k.count_word = &w[2 * rank + 3];
        return intern_key(k);
    }

    // The handle of an already interned shape, or an empty one; never inserts.
    // Throws shape_error only for a rank above max_rank; strides of another
    // length than the extents find nothing (an empty handle, no throw).
    Shape find(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides, ElementType t,
               Order o) const {
        check_rank(extents.size(), extents);
        if (strides.size() != extents.size()) return {};
        const key k = key_of(extents, strides.data(), t, o);
        detail::epoch_guard pin;
        auto* e = lookup(stripes_[k.stripe], k);
        return e && try_ref(e) ? Shape::adopt(e) : Shape();
    }

    // Frees what can be freed now of the memory retired by every trie in the
    // process (dead entries with their device mirrors' buffers, replaced
    // branch nodes): everything retired before the call, unless some thread
    // is inside a read section (a reader, or an intern in flight) that began
    // before it. Returns the number of objects freed. Blocks only on another
    // collect (and for a concurrent round to finish freeing what it took off
    // the lists; called from an attachment's destructor, inside a round, it
    // waits for no other thread's round). Never throws. Cost: three
    // membarrier system calls (or fences) and a walk of the per-thread
    // records, plus the frees. Reclaim also runs on its own every 128
    // retires per thread; call this to bound memory now (tests, after
    // dropping many shapes, before checking a pool is empty).
    static std::size_t collect() noexcept { return detail::epoch_domain::instance().collect(); }

    // Shape entries allocated and not yet freed, in every trie of the
    // process: held, dying, orphaned and retired-but-not-reclaimed ones.
    // A relaxed snapshot, for tests and diagnostics.
    static std::int64_t live_entries() noexcept { return entry::live_count().load(std::memory_order_relaxed); }
    // Branch nodes allocated and not yet freed, in every trie (as above).
    static std::int64_t live_nodes() noexcept { return inner::live_count().load(std::memory_order_relaxed); }

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
    // the walk. Returns the number of entries found; throws internal_error
    // naming the first violation. For tests and fuzzing; cost: the whole trie.
    std::size_t check_invariants() const {
        std::size_t total = 0;
        for (std::size_t i = 0; i <= mask_; ++i) {
            const auto& st = stripes_[i];
            std::shared_lock lock(st.mutex);
            std::size_t entries = 0, inner = 0;
            for (std::size_t r = 0; r <= max_rank; ++r)
                check_subtree(st.roots[r].load(std::memory_order_acquire), i, r, 0, nullptr, entries, inner);
            if (entries != st.entries || inner != st.inner_nodes)
                throw internal_error("clpool: shape trie: stripe " + std::to_string(i) + " counts " +
                                     std::to_string(st.entries) + " entries / " + std::to_string(st.inner_nodes) +
                                     " nodes, walk found " + std::to_string(entries) + " / " + std::to_string(inner));
            total += entries;
        }
        return total;
    }

private:
    using slot = detail::shape_slot;
    using entry = detail::shape_entry;
    using inner = detail::shape_inner;

    // One stripe: a writer lock and one root per rank, on cache lines of its
    // own. Roots are read without the lock (acquire loads); writers hold it.
    struct alignas(64) stripe {
        mutable detail::rw_lock mutex;
        std::array<std::atomic<slot>, max_rank + 1> roots{};
        std::size_t entries = 0;
        std::size_t inner_nodes = 0;
    };

    // fork_locks hooks for global(): every stripe's writer lock, in index order.
    static void lock_all(void* p) noexcept {
        auto* t = static_cast<ShapeTrie*>(p);
        for (std::size_t i = 0; i <= t->mask_; ++i) t->stripes_[i].mutex.lock();
    }
    static void unlock_all(void* p) noexcept {
        auto* t = static_cast<ShapeTrie*>(p);
        for (std::size_t i = t->mask_ + 1; i-- > 0;) t->stripes_[i].mutex.unlock();
    }

    // The stripes, in one block that entries name as their owner: a dying
    // trie retires it, so a release racing the destructor can still lock its stripe.
    struct stripe_block : detail::epoch_retired {
        explicit stripe_block(std::size_t n) : stripes(std::make_unique<stripe[]>(n)) {}
        std::unique_ptr<stripe[]> stripes;
        static void destroy_retired(detail::epoch_retired* p) noexcept { delete static_cast<stripe_block*>(p); }
    };

    // The lookup key, read in place from the caller's arrays: key word i is
    // extent i, then stride i - rank, then the type and order codes. Entry
    // key word i is entry word i + 1. A dense key (strides == nullptr: the
    // dense strides for its order) never computes its strides on a hit: it
    // matches an entry whose `dense` flag is set and whose extents, type and
    // order are equal; a stride word is computed only when a branch tests it.
    struct key {
        const std::int64_t* extents;
        const std::int64_t* strides;  // nullptr: dense for tail[1]'s order
        std::int64_t tail[2];
        const std::int64_t* count_word = nullptr;  // intern_buffer: checked on a miss
        std::uint32_t rank;
        std::uint32_t stripe;

        std::uint32_t length() const noexcept { return 2 * rank + 2; }
        std::int64_t word(std::uint32_t i) const noexcept {
            if (i < rank) return extents[i];
            if (i < 2 * rank) return strides ? strides[i - rank] : dense_stride(i - rank);
            return tail[i - 2 * rank];
        }
        // Dense stride j, in the wrapping arithmetic of dense_strides().
        std::int64_t dense_stride(std::uint32_t j) const noexcept {
            std::uint64_t s = 1;
            if (tail[1] == static_cast<std::int64_t>(Order::f))
                for (std::uint32_t i = 0; i < j; ++i) s *= static_cast<std::uint64_t>(extents[i]);
            else
                for (std::uint32_t i = j + 1; i < rank; ++i) s *= static_cast<std::uint64_t>(extents[i]);
            return static_cast<std::int64_t>(s);
        }
        bool matches(const entry* e) const noexcept {
            const std::int64_t* w = e->data() + 1;
            const std::size_t at = 2 * std::size_t{rank};
            if (w[at] != tail[0] || w[at + 1] != tail[1]) return false;
            // A word loop, not memcmp: ranks are small, and it is inlined.
            // OR-ing the differences keeps it branch-free.
            std::uint64_t diff = 0;
            if (!strides) {
                if (!e->dense) return false;
                for (std::uint32_t i = 0; i < rank; ++i) diff |= static_cast<std::uint64_t>(w[i] ^ extents[i]);
                return diff == 0;
            }
            for (std::uint32_t i = 0; i < rank; ++i)
                diff |= static_cast<std::uint64_t>(w[i] ^ extents[i]) |
                        static_cast<std::uint64_t>(w[rank + i] ^ strides[i]);
            return diff == 0;
        }
    };

    static std::size_t stripe_count(std::size_t n) {
        if (n == 0 || n > 65536)
            throw config_error("clpool: ShapeTrie stripe count " + std::to_string(n) + " is outside 1..65536");
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
    static void dense_strides(std::span<const std::int64_t> extents, Order o, std::int64_t* out) noexcept {
        std::uint64_t s = 1;
        const std::size_t r = extents.size();
        if (o == Order::f) {
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

    // The stripe: a cheap mix of the rank and the first (up to four)
    // extents. Independent multiplies (they run in parallel), then one mix.
    key key_of(std::span<const std::int64_t> extents, const std::int64_t* strides, ElementType t,
               Order o) const noexcept {
        key k{extents.data(),
              strides,
              {static_cast<std::int64_t>(t), static_cast<std::int64_t>(o)},
              nullptr,
              static_cast<std::uint32_t>(extents.size()),
              0};
        static constexpr std::uint64_t mul[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                                                 0xD6E8FEB86659FD93ull};
        std::uint64_t h = extents.size();
        const std::size_t n = extents.size() < 4 ? extents.size() : 4;
        for (std::size_t i = 0; i < n; ++i) h += static_cast<std::uint64_t>(extents[i]) * mul[i];
        h ^= h >> 32;
        h *= 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        k.stripe = static_cast<std::uint32_t>(h & mask_);
        return k;
    }

    // A reference from a lookup, inside a read section: only while the count
    // is above zero. At zero the entry is dying (its memory is retired, not
    // freed, so it stays readable while we are pinned) and must not be
    // revived. A CAS, not an add and undo: a second lookup could take the
    // undone add for a live count.
    static bool try_ref(entry* e) noexcept {
        auto n = e->refs.load(std::memory_order_relaxed);
        while (n != 0)
            if (e->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
        return false;
    }

    // Inside a read section (or under the stripe's lock). Acquire loads: a
    // node or entry reached is seen as its writer built it before publishing.
    static entry* lookup(const stripe& st, const key& k) noexcept {
        slot s = st.roots[k.rank].load(std::memory_order_acquire);
        while (s && !detail::is_leaf(s)) {
            const inner* n = detail::inner_of(s);
            const auto* c = n->child(k.word(n->depth));
            if (!c) return nullptr;
            s = c->load(std::memory_order_acquire);
        }
        if (!s) return nullptr;
        entry* e = detail::leaf_of(s);
        return k.matches(e) ? e : nullptr;
    }

    Shape intern_key(const key& k) {
        auto& st = stripes_[k.stripe];
        {
            detail::epoch_guard pin;
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
        bool overflow = false, zero = false;
        for (std::uint32_t i = 0; i < k.rank; ++i) {
            if (ext[i] < 0)
                throw shape_error(shape_error::reason::negative_extent, "extent " + std::to_string(i) + " of " +
                                                                            shape_error::list(ext) + " is " +
                                                                            std::to_string(ext[i]) + ", below 0");
            overflow = overflow || __builtin_mul_overflow(count, ext[i], &count);
            zero = zero || ext[i] == 0;
        }
        // An extent of 0 makes the product 0, whatever overflowed before it.
        if (zero) {
            overflow = false;
            count = 0;
        }
        const auto t = static_cast<ElementType>(k.tail[0]);
        const std::size_t esize = element_size(t);
        if (esize == 0)
            throw shape_error(shape_error::reason::bad_element_type,
                              "element type code " + std::to_string(k.tail[0]) + " is not a clpool::ElementType (1.." +
                                  std::to_string(static_cast<std::int64_t>(ElementType::boolean)) + ")");
        if (k.tail[1] != static_cast<std::int64_t>(Order::c) && k.tail[1] != static_cast<std::int64_t>(Order::f))
            throw shape_error(shape_error::reason::bad_order,
                              "order code " + std::to_string(k.tail[1]) + " is neither 'c' (99) nor 'f' (102)");
        if (overflow)
            throw shape_error(shape_error::reason::count_overflow,
                              "the element count of extents " + shape_error::list(ext) + " overflows int64 (limit " +
                                  std::to_string(INT64_MAX) + " elements)");
        std::int64_t bytes = 0;
        if (__builtin_mul_overflow(count, static_cast<std::int64_t>(esize), &bytes))
            throw shape_error(shape_error::reason::count_overflow,
                              "the byte size of extents " + shape_error::list(ext) + " (" + std::to_string(count) +
                                  " elements of " + std::to_string(esize) + " bytes) overflows int64 (limit " +
                                  std::to_string(INT64_MAX) + " bytes)");
        if (k.count_word && *k.count_word != count)
            throw shape_error(shape_error::reason::bad_buffer,
                              "canonical buffer count word " + std::to_string(*k.count_word) + " is not the product " +
                                  std::to_string(count) + " of extents " + shape_error::list(ext));
        return count;
    }

    entry* make_entry(const key& k, std::int64_t count) {
        const std::uint32_t r = k.rank;
        entry* e = entry::create(static_cast<std::uint32_t>(shape_words(r)), block_.get(), k.stripe, &last_release);
        std::int64_t* w = e->data();
        w[0] = r;
        for (std::uint32_t i = 0; i < k.length(); ++i) w[1 + i] = k.word(i);
        w[2 * r + 3] = count;
        std::array<std::int64_t, max_rank> dense;
        dense_strides(std::span<const std::int64_t>(w + 1, r), static_cast<Order>(k.tail[1]), dense.data());
        e->dense = std::equal(dense.begin(), dense.begin() + r, w + 1 + r);
        return e;
    }

    // Under the stripe's exclusive lock. Returns the live entry for k with a
    // reference taken: an existing one (a racing intern won), or `fresh`,
    // linked in. Throws std::bad_alloc (a new branch node) and then changes
    // nothing. Readers may be walking: every change is one release store of
    // one slot (a fresh leaf, or a new node replacing an old one, retired).
    entry* insert(stripe& st, const key& k, entry* fresh) {
        std::atomic<slot>* root = &st.roots[k.rank];
        if (!root->load(std::memory_order_relaxed)) {
            root->store(detail::leaf_slot(fresh), std::memory_order_release);
            ++st.entries;
            return fresh;
        }
        // Any leaf reached by following k where it can be followed shares
        // k's words up to the first word where k differs from every key here.
        slot s = root->load(std::memory_order_relaxed);
        while (!detail::is_leaf(s)) {
            inner* n = detail::inner_of(s);
            const auto* c = n->child(k.word(n->depth));
            s = (c ? *c : n->kids()[0]).load(std::memory_order_relaxed);
        }
        entry* near = detail::leaf_of(s);
        const std::int64_t* nw = near->data() + 1;
        const std::uint32_t len = k.length();
        std::uint32_t d = 0;
        while (d < len && k.word(d) == nw[d]) ++d;
        // Walk again down to the first node branching at d or later.
        std::atomic<slot>* at = root;
        for (;;) {
            const slot cur = at->load(std::memory_order_relaxed);
            if (detail::is_leaf(cur) || detail::inner_of(cur)->depth >= d) break;
            at = detail::inner_of(cur)->child(
                k.word(detail::inner_of(cur)->depth));  // present: k agrees with `near` before d
        }
        const slot cur = at->load(std::memory_order_relaxed);
        if (d == len) {  // `near` is this very shape (so cur is its leaf)
            if (try_ref(near)) return near;
            // Dying: put the new entry in its place; its last releaser will
            // find itself ownerless and only retire it (so it never touches
            // this trie, which may be gone by then). A tombstone has no
            // releaser left: retire it here.
            at->store(detail::leaf_slot(fresh), std::memory_order_release);
            near->owner.store(nullptr, std::memory_order_release);
            if (near->tombstone) detail::epoch_domain::retire(near, &entry::destroy_retired);
            return fresh;
        }
        if (!detail::is_leaf(cur) && detail::inner_of(cur)->depth == d) {
            inner* old = detail::inner_of(cur);
            inner* n = inner::with_child(*old, k.word(d), detail::leaf_slot(fresh));
            at->store(reinterpret_cast<slot>(n), std::memory_order_release);
            detail::epoch_domain::retire(old, &inner::destroy_retired);
        } else {
            inner* n = inner::pair(d, nw[d], cur, k.word(d), detail::leaf_slot(fresh));
            at->store(reinterpret_cast<slot>(n), std::memory_order_release);
            ++st.inner_nodes;
        }
        ++st.entries;
        return fresh;
    }

    // The last handle is gone: unlink (if the trie still lives), then retire
    // the entry; it and its attachments (a device mirror's buffer) are freed
    // by a later reclaim, once no reader can hold it.
    // The pin keeps the owner's stripes readable if the trie is destroyed
    // meanwhile (it retires them); unlink checks the owner again under the lock.
    static void last_release(entry* e) noexcept {
        bool tombstone = false;
        {
            detail::epoch_guard pin;
            if (auto* b = static_cast<stripe_block*>(e->owner.load(std::memory_order_acquire)))
                tombstone = unlink(b->stripes.get(), e);
        }
        if (!tombstone) detail::epoch_domain::retire(e, &entry::destroy_retired);
    }

    // Removes e if it is still the leaf for its key (a racing intern may have
    // replaced it). A branch left with one child is replaced by that child;
    // otherwise by a copy without e's slot. The replaced branch is retired.
    // Returns false, or true when the copy could not be allocated: e then
    // stays linked as a tombstone (dead, never revived) and is not retired.
    static bool unlink(stripe* stripes, entry* e) noexcept {
        auto& st = stripes[e->stripe];
        std::unique_lock lock(st.mutex);
        if (!e->owner.load(std::memory_order_relaxed)) return false;  // orphaned or replaced meanwhile
        const std::int64_t* w = e->data() + 1;
        std::atomic<slot>* at = &st.roots[static_cast<std::size_t>(e->data()[0])];
        std::atomic<slot>* parent_at = nullptr;
        std::uint32_t index = 0;
        for (;;) {
            const slot cur = at->load(std::memory_order_relaxed);
            if (!cur || detail::is_leaf(cur)) break;
            inner* n = detail::inner_of(cur);
            index = n->find(w[n->depth]);
            if (index == n->count) return false;
            parent_at = at;
            at = &n->kids()[index];
        }
        if (at->load(std::memory_order_relaxed) != detail::leaf_slot(e)) return false;
        if (!parent_at) {
            at->store(0, std::memory_order_release);
            --st.entries;
            return false;
        }
        inner* parent = detail::inner_of(parent_at->load(std::memory_order_relaxed));
        if (parent->count == 2) {
            parent_at->store(parent->kids()[1 - index].load(std::memory_order_relaxed), std::memory_order_release);
            --st.inner_nodes;
        } else {
            inner* n = nullptr;
            try {
                n = inner::without_child(*parent, index);
            } catch (...) {
                e->tombstone = true;
                return true;
            }
            parent_at->store(reinterpret_cast<slot>(n), std::memory_order_release);
        }
        --st.entries;
        detail::epoch_domain::retire(parent, &inner::destroy_retired);
        return false;
    }

    // The trie is dying and no one reads it: branch nodes are freed now;
    // entries are left to their handles (a tombstone, which has none, is retired).
    static void orphan(slot s) noexcept {
        if (!s) return;
        if (detail::is_leaf(s)) {
            entry* e = detail::leaf_of(s);
            e->owner.store(nullptr, std::memory_order_release);
            if (e->tombstone) detail::epoch_domain::retire(e, &entry::destroy_retired);
            return;
        }
        inner* n = detail::inner_of(s);
        for (std::uint32_t i = 0; i < n->count; ++i) orphan(n->kids()[i].load(std::memory_order_relaxed));
        inner::destroy(n);
    }

    // `prefix` is a key (entry words + 1) every key below must agree with
    // on words [0, depth_floor); nullptr at a root.
    void check_subtree(slot s, std::size_t stripe_index, std::size_t rank, std::uint32_t depth_floor,
                       const std::int64_t* prefix, std::size_t& entries, std::size_t& inner_nodes) const {
        auto fail = [&](const std::string& why) {
            throw internal_error("clpool: shape trie: stripe " + std::to_string(stripe_index) + " rank " +
                                 std::to_string(rank) + ": " + why);
        };
        if (!s) return;
        if (detail::is_leaf(s)) {
            const entry* e = detail::leaf_of(s);
            const std::int64_t* w = e->data();
            if (static_cast<std::size_t>(w[0]) != rank || e->words != shape_words(rank)) fail("entry of wrong rank");
            if (e->stripe != stripe_index) fail("entry in a foreign stripe");
            if (key_of(std::span(w + 1, rank), w + 1 + rank, ElementType::f32, Order::c).stripe != stripe_index)
                fail("entry whose hash names another stripe");
            if (e->owner.load(std::memory_order_relaxed) != block_.get()) fail("entry owned by another trie");
            std::array<std::int64_t, max_rank> dense;
            dense_strides(std::span(w + 1, rank), static_cast<Order>(w[2 * rank + 2]), dense.data());
            if (e->dense != std::equal(dense.begin(), dense.begin() + rank, w + 1 + rank))
                fail("entry's dense flag does not match its strides");
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
            if (i && n->keys()[i - 1] >= n->keys()[i]) fail("branch keys not sorted");
            // Every key below child i has word n->depth == keys[i]: check on one leaf.
            const slot kid = n->kids()[i].load(std::memory_order_acquire);
            if (!kid) fail("empty child slot");
            slot c = kid;
            while (!detail::is_leaf(c)) c = detail::inner_of(c)->kids()[0].load(std::memory_order_acquire);
            const std::int64_t* w = detail::leaf_of(c)->data() + 1;
            if (w[n->depth] != n->keys()[i]) fail("child under the wrong branch word");
            if (prefix && std::memcmp(prefix, w, depth_floor * sizeof(std::int64_t)) != 0)
                fail("subtree disagrees with its prefix");
            check_subtree(kid, stripe_index, rank, n->depth + 1, w, entries, inner_nodes);
        }
    }

    std::size_t mask_;
    std::unique_ptr<stripe_block> block_;  // retired (not freed) by the destructor
    stripe* stripes_;                      // block_'s stripes
};

// A borrowed, uncounted read section (RCU-style). Construction pins the
// process-wide epoch on the calling thread, destruction unpins it (a
// plain store each; sections nest). Inside it, find() returns the
// canonical buffer of an interned shape, or nullptr, with no lock, no
// atomic read-modify-write and no heap: a walk and one key comparison.
//
// Lifetime: a pointer from find() stays readable until this reader is
// destroyed, even if every handle to the shape is dropped meanwhile (the
// dead entry is unlinked at once, so a new intern makes a new entry with
// a new pointer, but its memory is freed only after the reader ends).
// Hold a pointer longer only through retain(). While any reader is open,
// nothing retired since it opened is freed, in any trie of the process:
// keep readers short (a reader held forever stops all reclamation).
// Thread affinity: use and destroy it on the thread that made it; it is
// neither copyable nor movable. The trie must outlive it.
class ShapeTrie::reader {
public:
    explicit reader(const ShapeTrie& trie) noexcept : trie_(trie), rec_(detail::epoch_domain::pin()) {}
    ~reader() { detail::epoch_domain::unpin(rec_); }
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;

    // The canonical buffer for these extents with dense strides for `o`
    // and element type t (as intern would make it), or nullptr if it is
    // not interned now. Never throws, never inserts: a rank above
    // max_rank or an invalid shape is simply not found.
    const std::int64_t* find(std::span<const std::int64_t> extents, ElementType t, Order o = Order::c) const noexcept {
        if (extents.size() > max_rank) return nullptr;
        return hit(trie_.key_of(extents, nullptr, t, o));
    }
    const std::int64_t* find(std::initializer_list<std::int64_t> extents, ElementType t,
                             Order o = Order::c) const noexcept {
        return find(std::span<const std::int64_t>(extents.begin(), extents.size()), t, o);
    }
    // As above with explicit strides; nullptr also when the counts differ.
    const std::int64_t* find(std::span<const std::int64_t> extents, std::span<const std::int64_t> strides,
                             ElementType t, Order o) const noexcept {
        if (extents.size() > max_rank || strides.size() != extents.size()) return nullptr;
        return hit(trie_.key_of(extents, strides.data(), t, o));
    }

    // A counted handle to the shape whose buffer `p` is (a pointer this
    // reader's find returned), or an empty one if that shape has died
    // since (its last handle was released). Cost: one atomic CAS.
    Shape retain(const std::int64_t* p) const noexcept {
        if (!p) return {};
        auto* e = const_cast<entry*>(reinterpret_cast<const entry*>(p) - 1);
        return try_ref(e) ? Shape::adopt(e) : Shape();
    }

private:
    const std::int64_t* hit(const key& k) const noexcept {
        const entry* e = lookup(trie_.stripes_[k.stripe], k);
        return e ? e->data() : nullptr;
    }

    const ShapeTrie& trie_;
    detail::epoch_record* rec_;
};

}  // namespace clpool
