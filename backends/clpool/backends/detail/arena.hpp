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
// for the rest (a request above large_limit gets a segment of its own size,
// which later serves any large request), so small blocks do not crumble the
// large segments. Every range of a segment is on its address-ordered chain;
// free ranges are also in their kind's tree, ordered by (size, segment's
// serial number, offset): lower_bound(n) is the best fit, and ties go to the
// oldest segment's lowest address, the same on every run.
// Nothing here allocates on release (intrusive nodes), so release is noexcept.
// Not locked itself: the owner holds mutex() around every call.
// Extra: what the owner keeps with each segment (SubAllocated: its idle
// views); destroyed with the segment, before its memory.
struct no_extra {};
template <class Memory, class Extra = no_extra>
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
        std::uint64_t serial = 0;  // order of creation: the best fit's tie-break (deterministic)
        int kind = 0;              // index of its free tree: pool_of(size of the request it was made for)
        std::uint64_t empty_since = 0;  // the arena's take() calls when it last became wholly free
        range* first = nullptr;
        Extra extra{};  // after memory: goes first
    };

    struct options {
        std::size_t granularity = 512;          // every offset and block size is a multiple (a power of two)
        std::size_t small_limit = 1u << 20;     // requests up to this share small segments
        std::size_t small_segment = 2u << 20;   // the size of a small segment
        std::size_t large_segment = 20u << 20;  // the size of a large one
        std::size_t large_limit = 10u << 20;    // larger requests get a segment of their own size,
        std::size_t large_round = 2u << 20;     // rounded up to a multiple of this
        std::size_t min_segment = 64u << 10;    // a new segment is at most growth x the bytes held,
        double growth = 0.25;                   // but never below this (nor the request)
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
    // Which free tree serves a request: 0 small, 1 large.
    int pool_of(std::size_t rounded) const noexcept { return rounded <= opt_.small_limit ? 0 : 1; }
    // The segment a new request of `rounded` bytes gets: a small or a large
    // segment, or above large_limit the request rounded up to large_round;
    // while the arena holds little, no more than growth x what it holds (at
    // least min_segment), so a small pool's slack stays a small part of it.
    // At least rounded, at most max_alloc. Without `gradual`, full size at once.
    std::size_t segment_size_for(std::size_t rounded, std::size_t max_alloc, bool gradual) const noexcept {
        std::size_t s = rounded <= opt_.small_limit   ? opt_.small_segment
                        : rounded <= opt_.large_limit ? opt_.large_segment
                                                      : round_up(rounded, opt_.large_round);
        if (gradual) {
            const auto held_share = static_cast<std::size_t>(opt_.growth * static_cast<double>(segment_bytes_));
            s = std::min(s, round_up(std::max(held_share, opt_.min_segment), opt_.granularity));
        }
        return std::max(rounded, std::min(s, max_alloc));
    }

    // The best-fitting free range of at least `rounded` bytes, split to size
    // if the rest is worth keeping; nullptr when none fits.
    range* take(std::size_t rounded) noexcept {
        auto& tree = free_[pool_of(rounded)];
        auto it = tree.lower_bound(rounded, size_below{});
        if (it == tree.end()) {
            ++takes_;
            return nullptr;
        }
        return take_from(&*it, rounded);
    }

    // Under pressure (the driver refused a new segment): take()'s best fit,
    // or failing that the best fit among the other kind's free ranges, so a
    // small request may split a large segment (or a large one a small
    // segment) rather than fail beside enough free bytes. nullptr when none fits.
    range* take_any(std::size_t rounded) noexcept {
        if (range* r = take(rounded)) return r;
        auto& other = free_[1 - pool_of(rounded)];
        auto it = other.lower_bound(rounded, size_below{});
        return it == other.end() ? nullptr : take_from(&*it, rounded);
    }

    // Free range r, of at least `rounded` bytes, taken as take() takes its
    // best fit: a new segment's first range, for the request it was made for.
    range* take_from(range* r, std::size_t rounded) noexcept {
        ++takes_;
        remove_free(*r);
        r->free = false;
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

    // Adds a segment of `size` bytes over `memory`, all of it free, and
    // returns it. nullptr (memory untouched) if the host is out of memory for the nodes.
    segment* add(Memory& memory, std::size_t size, int kind) noexcept {
        auto* s = new (std::nothrow) segment;
        auto* r = new (std::nothrow) range;
        if (!s || !r) {
            delete s;
            delete r;
            return nullptr;
        }
        s->memory = std::move(memory);
        s->size = size;
        s->serial = next_serial_++;
        s->kind = kind;
        s->empty_since = takes_;
        s->first = r;
        r->size = size;
        r->seg = s;
        segments_.push_back(*s);
        ++segment_count_;
        ++segment_allocations_;
        segment_bytes_ += size;
        peak_segment_bytes_ = std::max(peak_segment_bytes_, segment_bytes_);
        insert_free(*r);
        return s;
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
        if (r->size == r->seg->size) r->seg->empty_since = takes_;
        insert_free(*r);
    }

    // Unlinks wholly free segments, oldest first, and hands each to `out`
    // (which frees it, outside the lock) until the segments hold at most
    // `target` bytes (0: every one); returns their bytes. A segment of kind
    // `grace_kind` that became free within the last `grace` takes stays: what
    // emptied it is likely a step still under way, whose next requests of that
    // kind fill it again (a segment of the other kind serves none of them).
    template <class Out>
    std::size_t release_empty(Out&& out, std::size_t target = 0, std::uint64_t grace = 0, int grace_kind = 0) noexcept {
        std::size_t bytes = 0;
        for (auto it = segments_.begin(); it != segments_.end() && segment_bytes_ > target;) {
            segment& s = *it;
            range* r = s.first;
            if (!(r->free && r->size == s.size) || (s.kind == grace_kind && takes_ - s.empty_since < grace)) {
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
    template <class F>
    void for_each_segment(F&& f) {
        for (segment& s : segments_) f(s);
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
            if (a.seg != b.seg) return a.seg->serial < b.seg->serial;
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

    static std::size_t round_up(std::size_t n, std::size_t unit) noexcept {
        return unit <= 1 ? n : (n + unit - 1) / unit * unit;
    }
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
    // Per kind of segment: small (2 MiB) ones, and large ones (20 MiB, or a
    // request's own above large_limit); a small block left in a large
    // segment would pin it, so small requests never split one.
    std::array<tree_type, 2> free_;
    segment_list segments_;
    std::size_t segment_count_ = 0;
    std::uint64_t next_serial_ = 0;
    std::uint64_t segment_allocations_ = 0;
    std::uint64_t takes_ = 0;  // take() calls so far: the clock of empty_since
    std::size_t segment_bytes_ = 0;
    std::size_t peak_segment_bytes_ = 0;
    std::size_t free_bytes_ = 0;
    bool abandoned_ = false;
};

}  // namespace clpool::detail
