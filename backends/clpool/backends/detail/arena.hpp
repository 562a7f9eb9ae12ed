// arena: segments of a parent allocation, carved best-fit and coalesced on release (BFC).
#pragma once

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
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
        std::uint64_t serial = 0;  // seg->serial, kept here: the free tree's order reads no segment
        range* prev = nullptr;  // address order within the segment (spare nodes: next only)
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
        for (auto& index : free_) index.clear();
        segments_.clear_and_dispose([](segment* s) {
            for (range* r = s->first; r;) delete std::exchange(r, r->next);
            delete s;
        });
        while (spare_) delete std::exchange(spare_, spare_->next);
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
        range* r = free_[pool_of(rounded)].best_fit(rounded);
        if (!r) {
            ++takes_;
            return nullptr;
        }
        return take_from(r, rounded);
    }

    // Under pressure (the driver refused a new segment): take()'s best fit,
    // or failing that the best fit among the other kind's free ranges, so a
    // small request may split a large segment (or a large one a small
    // segment) rather than fail beside enough free bytes. nullptr when none fits.
    range* take_any(std::size_t rounded) noexcept {
        if (range* r = take(rounded)) return r;
        range* other = free_[1 - pool_of(rounded)].best_fit(rounded);
        return other ? take_from(other, rounded) : nullptr;
    }

    // Free range r, of at least `rounded` bytes, taken as take() takes its
    // best fit: a new segment's first range, for the request it was made for.
    range* take_from(range* r, std::size_t rounded) noexcept {
        ++takes_;
        remove_free(*r);
        r->free = false;
        if (r->size - rounded >= opt_.granularity) {
            if (range* rest = make_range()) {  // no node: hand out the whole range
                rest->offset = r->offset + rounded;
                rest->size = r->size - rounded;
                rest->seg = r->seg;
                rest->serial = r->serial;
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
        range* r = s ? make_range() : nullptr;
        if (!r) {
            delete s;
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
        r->serial = s->serial;
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
            drop_range(r);
            r = p;
        }
        if (range* n = r->next; n && n->free) {
            remove_free(*n);
            r->size += n->size;
            r->next = n->next;
            if (n->next) n->next->prev = r;
            drop_range(n);
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
            drop_range(r);
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
        for (const auto& index : free_) m = std::max(m, index.largest());
        return m;
    }

private:
    struct by_size {
        bool operator()(const range& a, const range& b) const noexcept {
            if (a.size != b.size) return a.size < b.size;
            if (a.serial != b.serial) return a.serial < b.serial;
            return a.offset < b.offset;
        }
    };
    struct size_below {  // a size key against a range
        bool operator()(std::size_t n, const range& r) const noexcept { return n < r.size; }
        bool operator()(const range& r, std::size_t n) const noexcept { return r.size < n; }
    };
    using tree_type =
        boost::intrusive::set<range, boost::intrusive::member_hook<range, decltype(range::hook), &range::hook>,
                              boost::intrusive::compare<by_size>, boost::intrusive::constant_time_size<false>>;

    // One kind's free ranges, in bins of four size classes per doubling, each
    // bin a tree in the free order: the best fit is the lower bound in the
    // request's bin, else the first range of the next bin that has any (a bit
    // per bin finds it). The same choice as one tree over every free range,
    // but an insert walks a bin of a few ranges, not a tree of hundreds.
    class free_index {
    public:
        static std::size_t bin_of(std::size_t n) noexcept {
            if (n < 4) return n;
            const auto e = static_cast<std::size_t>(std::bit_width(n)) - 1;  // 2^e <= n < 2^(e+1)
            return 4 * (e - 1) + ((n >> (e - 2)) & 3);
        }
        void insert(range& r) noexcept {
            const std::size_t b = bin_of(r.size);
            bins_[b].insert(r);
            nonempty_[b / 64] |= std::uint64_t{1} << (b % 64);
        }
        void erase(range& r) noexcept {
            const std::size_t b = bin_of(r.size);
            bins_[b].erase(bins_[b].iterator_to(r));
            if (bins_[b].empty()) nonempty_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
        }
        range* best_fit(std::size_t n) noexcept {
            std::size_t b = bin_of(n);
            if (auto& bin = bins_[b]; !bin.empty()) {
                auto it = bin.lower_bound(n, size_below{});
                if (it != bin.end()) return &*it;
            }
            b = next_nonempty(b + 1);
            return b == bin_count ? nullptr : &*bins_[b].begin();
        }
        std::size_t largest() const noexcept {
            for (std::size_t w = words; w-- > 0;)
                if (nonempty_[w])
                    return bins_[w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(nonempty_[w]))].rbegin()->size;
            return 0;
        }
        void clear() noexcept {
            for (auto& bin : bins_) bin.clear();
            nonempty_ = {};
        }

    private:
        static constexpr std::size_t bin_count = std::size_t{4} * 64;
        static constexpr std::size_t words = bin_count / 64;
        std::size_t next_nonempty(std::size_t b) const noexcept {
            for (std::size_t w = b / 64; w < words; ++w) {
                std::uint64_t bits = nonempty_[w];
                if (w == b / 64) bits &= ~std::uint64_t{0} << (b % 64);
                if (bits) return w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
            }
            return bin_count;
        }
        std::array<tree_type, bin_count> bins_;
        std::array<std::uint64_t, words> nonempty_{};
    };
    using segment_list =
        boost::intrusive::list<segment, boost::intrusive::member_hook<segment, decltype(segment::hook), &segment::hook>,
                               boost::intrusive::constant_time_size<false>>;

    static std::size_t round_up(std::size_t n, std::size_t unit) noexcept {
        return unit <= 1 ? n : (n + unit - 1) / unit * unit;
    }
    // Range nodes are recycled: a carve and its release then make no host
    // allocation either, once the arena has had as many ranges as it needs.
    range* make_range() noexcept {
        if (!spare_) return new (std::nothrow) range;
        range* r = std::exchange(spare_, spare_->next);
        r->next = nullptr;
        return r;
    }
    void drop_range(range* r) noexcept {
        *r = range{};
        r->next = std::exchange(spare_, r);
    }
    void insert_free(range& r) noexcept {
        free_[r.seg->kind].insert(r);
        free_bytes_ += r.size;
    }
    void remove_free(range& r) noexcept {
        free_[r.seg->kind].erase(r);
        free_bytes_ -= r.size;
    }

    options opt_;
    std::mutex mutex_;
    // Per kind of segment: small (2 MiB) ones, and large ones (20 MiB, or a
    // request's own above large_limit); a small block left in a large
    // segment would pin it, so small requests never split one.
    std::array<free_index, 2> free_;
    segment_list segments_;
    range* spare_ = nullptr;  // recycled range nodes, chained through next
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
