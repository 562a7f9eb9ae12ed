// arena: segments of a parent allocation, carved best-fit and coalesced on release (BFC).
#pragma once

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <utility>

namespace clpool::detail {

// The free space of a sub-allocating backend, over segments of Memory (the
// parent backend's memory_type). Two kinds of segment, as PyTorch's caching
// allocator has: small ones that hold requests up to small_limit, large ones
// (or one of its own, for a request above large_segment) for the rest, so
// small blocks do not crumble the large segments. Every range of a segment is
// on its address-ordered chain; free ranges are also in their kind's tree,
// ordered by (size, segment, offset): lower_bound(n) is the best fit.
// Nothing here allocates on release (intrusive nodes), so release is noexcept.
// Not locked itself: the owner holds mutex() around every call.
template <class Memory>
class arena {
public:
    struct segment;
    struct range {
        boost::intrusive::set_member_hook<> hook;  // in a free tree while free
        std::size_t offset = 0;
        std::size_t size = 0;
        segment* seg = nullptr;
        range* prev = nullptr;  // address order within the segment
        range* next = nullptr;
        bool free = true;
    };
    struct segment {
        boost::intrusive::list_member_hook<> hook;
        Memory memory;
        std::size_t size = 0;
        int kind = 0;  // index of its free tree: pool_of(size of the request it was made for)
        range* first = nullptr;
    };

    struct options {
        std::size_t granularity = 512;            // every offset and block size is a multiple (a power of two)
        std::size_t small_limit = 1u << 20;       // requests up to this share small segments
        std::size_t small_segment = 2u << 20;     // the size of a small segment
        std::size_t large_segment = 20u << 20;    // the size of a large one; larger requests get their own
    };

    explicit arena(options o) noexcept : opt_(o) {}
    arena(const arena&) = delete;
    arena& operator=(const arena&) = delete;
    ~arena() {
        if (abandoned_) return;  // a fork child: the parent owns the memory
        for (auto& tree : free_) tree.clear();
        segments_.clear_and_dispose([](segment* s) {
            for (range* r = s->first; r;) delete std::exchange(r, r->next);
            delete s;
        });
    }

    std::mutex& mutex() noexcept { return mutex_; }
    const options& opts() const noexcept { return opt_; }

    std::size_t round(std::size_t n) const noexcept {
        const std::size_t g = opt_.granularity;
        return n == 0 ? g : (n + g - 1) & ~(g - 1);
    }
    // Which free tree serves a request: 0 small, 1 large, 2 above a large segment.
    int pool_of(std::size_t rounded) const noexcept {
        return rounded <= opt_.small_limit ? 0 : rounded <= opt_.large_segment ? 1 : 2;
    }
    // The segment a new request of `rounded` bytes gets, at most max_alloc (and at least rounded).
    std::size_t segment_size_for(std::size_t rounded, std::size_t max_alloc) const noexcept {
        const std::size_t s = pool_of(rounded) == 0 ? opt_.small_segment : std::max(rounded, opt_.large_segment);
        return std::max(rounded, std::min(s, max_alloc));
    }

    // The best-fitting free range of at least `rounded` bytes, split to size
    // if the rest is worth keeping; nullptr when none fits.
    range* take(std::size_t rounded) noexcept {
        auto& tree = free_[pool_of(rounded)];
        auto it = tree.lower_bound(rounded, size_below{});
        if (it == tree.end()) return nullptr;
        range* r = &*it;
        tree.erase(it);
        r->free = false;
        free_bytes_ -= r->size;
        if (r->size - rounded >= opt_.granularity) {
            auto* rest = new (std::nothrow) range;
            if (rest) {  // no node: hand out the whole range
                rest->offset = r->offset + rounded;
                rest->size = r->size - rounded;
                rest->seg = r->seg;
                rest->prev = r;
                rest->next = r->next;
                if (r->next) r->next->prev = rest;
                r->next = rest;
                r->size = rounded;
                insert_free(*rest);
            }
        }
        return r;
    }

    // Adds a segment of `size` bytes over `memory`, all of it free. False
    // (memory untouched) if the host is out of memory for the nodes.
    bool add(Memory& memory, std::size_t size, int kind) noexcept {
        auto* s = new (std::nothrow) segment;
        auto* r = new (std::nothrow) range;
        if (!s || !r) {
            delete s;
            delete r;
            return false;
        }
        s->memory = std::move(memory);
        s->size = size;
        s->kind = kind;
        s->first = r;
        r->size = size;
        r->seg = s;
        segments_.push_back(*s);
        ++segment_count_;
        ++segment_allocations_;
        segment_bytes_ += size;
        peak_segment_bytes_ = std::max(peak_segment_bytes_, segment_bytes_);
        insert_free(*r);
        return true;
    }

    // A range back: merged with its free neighbours.
    void give(range* r) noexcept {
        r->free = true;
        if (range* p = r->prev; p && p->free) {
            remove_free(*p);
            p->size += r->size;
            p->next = r->next;
            if (r->next) r->next->prev = p;
            delete r;
            r = p;
        }
        if (range* n = r->next; n && n->free) {
            remove_free(*n);
            r->size += n->size;
            r->next = n->next;
            if (n->next) n->next->prev = r;
            delete n;
        }
        insert_free(*r);
    }

    // Unlinks every wholly free segment and hands each to `out` (which frees
    // it, outside the lock); returns their bytes.
    template <class Out>
    std::size_t release_empty(Out&& out) noexcept {
        std::size_t bytes = 0;
        for (auto it = segments_.begin(); it != segments_.end();) {
            segment& s = *it;
            range* r = s.first;
            if (!(r->free && r->size == s.size)) {
                ++it;
                continue;
            }
            remove_free(*r);
            delete r;
            it = segments_.erase(it);
            --segment_count_;
            segment_bytes_ -= s.size;
            bytes += s.size;
            out(&s);
        }
        return bytes;
    }

    // f(segment) for every segment, oldest first (snapshots walk its ranges from first).
    template <class F>
    void for_each_segment(F&& f) const {
        for (const segment& s : segments_) f(s);
    }

    // In a fork child: never free the parent's memory.
    void abandon() noexcept { abandoned_ = true; }

    std::size_t segments() const noexcept { return segment_count_; }
    std::uint64_t segment_allocations() const noexcept { return segment_allocations_; }
    std::size_t segment_bytes() const noexcept { return segment_bytes_; }
    std::size_t peak_segment_bytes() const noexcept { return peak_segment_bytes_; }
    std::size_t free_bytes() const noexcept { return free_bytes_; }
    std::size_t largest_free() const noexcept {
        std::size_t m = 0;
        for (const auto& tree : free_)
            if (!tree.empty()) m = std::max(m, tree.rbegin()->size);
        return m;
    }

private:
    struct by_size {
        bool operator()(const range& a, const range& b) const noexcept {
            if (a.size != b.size) return a.size < b.size;
            if (a.seg != b.seg) return std::less<>{}(a.seg, b.seg);
            return a.offset < b.offset;
        }
    };
    struct size_below {  // a size key against a range
        bool operator()(std::size_t n, const range& r) const noexcept { return n < r.size; }
        bool operator()(const range& r, std::size_t n) const noexcept { return r.size < n; }
    };
    using tree_type =
        boost::intrusive::set<range, boost::intrusive::member_hook<range, decltype(range::hook), &range::hook>,
                              boost::intrusive::compare<by_size>>;
    using segment_list =
        boost::intrusive::list<segment, boost::intrusive::member_hook<segment, decltype(segment::hook), &segment::hook>,
                               boost::intrusive::constant_time_size<false>>;

    void insert_free(range& r) noexcept {
        free_[r.seg->kind].insert(r);
        free_bytes_ += r.size;
    }
    void remove_free(range& r) noexcept {
        auto& tree = free_[r.seg->kind];
        tree.erase(tree.iterator_to(r));
        free_bytes_ -= r.size;
    }

    options opt_;
    std::mutex mutex_;
    // Per kind of segment: small (2 MiB) ones, large (20 MiB) ones, and those
    // made for one request above a large segment, which serve only such
    // requests (a small block left in one would pin the whole segment).
    std::array<tree_type, 3> free_;
    segment_list segments_;
    std::size_t segment_count_ = 0;
    std::uint64_t segment_allocations_ = 0;
    std::size_t segment_bytes_ = 0;
    std::size_t peak_segment_bytes_ = 0;
    std::size_t free_bytes_ = 0;
    bool abandoned_ = false;
};

}  // namespace clpool::detail
