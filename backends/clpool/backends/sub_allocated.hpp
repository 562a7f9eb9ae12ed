// SubAllocated<B>: a backend adaptor that carves blocks out of a few large allocations of B (docs/ARENA.md).
#pragma once

#include <clpool/backends/detail/arena.hpp>
#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/memory_kind.hpp>
#include <clpool/core/segments.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/platform/release_in_place.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace clpool {

// What SubAllocated needs of its parent beyond Backend (docs/ARENA.md has the table):
//   B::sub_memory_type                  a view of part of a segment (a sub-buffer)
//   b.sub_alignment()                   bytes every view's origin must be a multiple of
//   b.sub_range(seg, offset, n)         a view of n bytes at offset: Allocation<sub_memory_type>, noexcept
//   b.whole_range(mem, n)               a view of all of mem (the fallback): sub_memory_type, noexcept
// and optionally
//   B::views_are_free                   static constexpr bool: true when sub_range makes no driver call
//                                       (an SVM pointer plus an offset): no view is kept idle or counted as made
template <class B>
concept SegmentBackend =
    Backend<B> && requires { typename B::sub_memory_type; } && std::movable<typename B::sub_memory_type> &&
    std::default_initializable<typename B::sub_memory_type> &&
    requires(B& b, const B& cb, const typename B::memory_type& m, std::size_t n) {
        { cb.sub_alignment() } -> std::same_as<std::size_t>;
        { b.sub_range(m, n, n) } noexcept -> std::same_as<Allocation<typename B::sub_memory_type>>;
        { b.whole_range(m, n) } noexcept -> std::same_as<typename B::sub_memory_type>;
    };

// How SubAllocated carves (docs/ARENA.md says why these defaults).
struct ArenaOptions {
    std::size_t granularity = 512;          // blocks and offsets round to this (a power of two), or to the
                                            // parent's sub_alignment() where that is larger
    std::size_t small_limit = 1u << 20;     // requests up to 1 MiB share small segments
    std::size_t small_segment = 2u << 20;   // of 2 MiB
    std::size_t large_segment = 20u << 20;  // larger requests split 20 MiB segments,
    std::size_t large_limit = 10u << 20;    // above 10 MiB a segment of their own size
    std::size_t large_round = 2u << 20;     // rounded up to 2 MiB (any large request may split it later)
    // While a device pool holds little, a new segment is at most `growth` of
    // the bytes its segments hold (never below min_segment, nor the request):
    // a small pool's last segment stays a small part of what it holds.
    // Pinned pools take full-size segments at once (a pinned allocation is slow).
    std::size_t min_segment = 64u << 10;
    double growth = 0.25;
    // Before a new segment would take the segments' bytes past their
    // high-water mark (peak_segment_bytes), whole empty segments go back to
    // the driver first, oldest first and only as many as keep the new one
    // within the peak: the peak grows only when what is held cannot serve,
    // and below it empty segments stay for reuse (no driver call).
    bool release_before_new_peak = true;
    // ... but not one of the request's kind (small, large) that became empty
    // within the last `empty_grace` blocks asked of the arena: a step still
    // under way fills it again.
    std::uint64_t empty_grace = 16;
    // Before any new segment, whole empty segments also go back if more than
    // this fraction of the segments' bytes is free: lower held between peaks,
    // more driver calls. 0 always, 1 never (the default: the rule above bounds the peak).
    double max_free_fraction = 1.0;
    // Idle views (sub-buffers) kept per segment after their blocks went back,
    // at most this many (0 to 16, detail::view_cache's capacity; 0: none):
    // a later carve of exactly the same offset and size takes one back and
    // makes no driver call. The oldest goes when a segment's are full.
    std::size_t cached_views = 16;

    // The defaults of a parent whose views cost no driver call
    // (B::views_are_free: SVM, offsets), which SubAllocated<B> takes when
    // given no options: every request carves the same kind of segment (no
    // small segments of their own: small_limit 0), large segments of 64 MiB,
    // and no grace for a segment just emptied. There a driver call is a
    // segment's allocation only, so a carve replaces every cache, and held
    // bytes, not carves, are what to save (docs/ARENA.md, "Free views").
    static ArenaOptions for_free_views() noexcept {
        ArenaOptions o;
        o.small_limit = 0;
        o.large_segment = 64u << 20;
        o.empty_grace = 0;
        o.cached_views = 0;
        return o;
    }
};

template <SegmentBackend B>
class SubAllocated;

namespace detail {
template <class B>
constexpr bool views_are_free() noexcept {
    if constexpr (requires { B::views_are_free; }) return B::views_are_free;
    else return false;
}

// A segment's idle views: each kept, with the (offset, bytes) it covers,
// after its block went back (a cl::Buffer sub-buffer keeps its driver object,
// not device memory). Pairwise disjoint, and disjoint from every live block:
// a carve releases those it overlaps. Destroyed with their segment.
template <class View>
struct view_cache {
    static constexpr std::size_t capacity = 16;
    struct slot {
        View view{};
        std::size_t offset = 0;
        std::size_t bytes = 0;    // 0: an empty slot
        std::uint64_t stamp = 0;  // when kept: the oldest goes first
    };
    std::array<slot, capacity> slots{};
};

// The options SubAllocated<B> takes when given none.
template <class B>
ArenaOptions default_arena_options() noexcept {
    return views_are_free<B>() ? ArenaOptions::for_free_views() : ArenaOptions{};
}

template <class B>
class arena_shared {
public:
    using parent_memory = typename B::memory_type;
    using view_type = typename B::sub_memory_type;
    using arena_type = arena<parent_memory, view_cache<view_type>>;
    using range_type = typename arena_type::range;

    arena_shared(typename arena_type::options o, const ArenaOptions& given, std::uint32_t generation) noexcept
        : space(o), max_free_fraction(given.max_free_fraction), release_before_new_peak(given.release_before_new_peak),
          empty_grace(given.empty_grace), cached_limit(views_are_free<B>() ? 0 : given.cached_views),
          generation(generation) {}

    // Under space.mutex(), before r goes back (cached_limit > 0): keeps
    // `view` (of `bytes` at r's offset) with r's segment. The oldest view it
    // replaces is released here, under the lock: its range is free, and
    // another thread could otherwise carve it and make a view over those
    // bytes while this one is still alive.
    void keep_view(range_type* r, view_type&& view, std::size_t bytes) noexcept {
        auto& slots = r->seg->extra.slots;
        auto* victim = &slots[0];
        for (std::size_t i = 0; i < cached_limit; ++i) {
            if (slots[i].bytes == 0) {
                victim = &slots[i];
                break;
            }
            if (slots[i].stamp < victim->stamp) victim = &slots[i];
        }
        if (victim->bytes != 0) --cached;
        detail::replace(victim->view, std::move(view));  // releases the view it replaces
        victim->offset = r->offset;
        victim->bytes = bytes;
        victim->stamp = ++clock;
        ++cached;
    }

    // Under space.mutex(), for a carved range r: moves the kept view of
    // exactly (r's offset, bytes) into `found` (true), and releases every
    // other kept view that overlaps r, under the lock (as keep_view): no two
    // views over the same bytes are ever live at once.
    bool take_view(const range_type* r, std::size_t bytes, view_type& found) noexcept {
        bool hit = false;
        for (auto& slot : r->seg->extra.slots) {
            if (slot.bytes == 0 || slot.offset >= r->offset + r->size || r->offset >= slot.offset + slot.bytes)
                continue;
            if (!hit && slot.offset == r->offset && slot.bytes == bytes) {
                found = std::move(slot.view);
                hit = true;
            } else {
                detail::discard(slot.view);
            }
            slot.bytes = 0;
            --cached;
        }
        if (hit) ++reused;
        return hit;
    }

    // Under space.mutex(): every kept view of segment s moved into `out`.
    template <class Out>
    void drop_views(typename arena_type::segment& s, Out&& out) noexcept {
        for (auto& slot : s.extra.slots) {
            if (slot.bytes == 0) continue;
            out(std::move(slot.view));
            slot.bytes = 0;
            --cached;
        }
    }

    arena_type space;
    const double max_free_fraction;
    const bool release_before_new_peak;
    const std::uint64_t empty_grace;
    const std::size_t cached_limit;
    // Under space.mutex():
    std::uint64_t fallbacks = 0;
    std::uint64_t reused = 0;  // carves served by a kept view
    std::atomic<std::uint64_t> made{0};  // views the parent made (clCreateSubBuffer); counted without the lock
    std::size_t cached = 0;    // views kept now
    std::uint64_t clock = 0;
    const std::uint32_t generation;
};
}  // namespace detail

// One block carved from a segment: the parent's view of it (a cl::Buffer
// sub-buffer for OpenCL, a pointer and size for host memory), so a handle's
// buffer() is used as any other pool's. Destroying it gives its range back
// to the arena (merged with free neighbours) and its view to the segment's
// idle views (ArenaOptions::cached_views), or releases the view.
// A fallback block (the view could not be made) owns a whole buffer instead.
template <class B>
class Carved : public B::sub_memory_type {
    using view_type = typename B::sub_memory_type;
    using shared_type = detail::arena_shared<B>;
    using range_type = typename shared_type::range_type;

public:
    Carved() noexcept = default;
    Carved(Carved&& o) noexcept
        : view_type(std::move(static_cast<view_type&>(o))), arena_(std::move(o.arena_)),
          range_(std::exchange(o.range_, nullptr)), view_bytes_(o.view_bytes_), own_(std::move(o.own_)) {}
    Carved& operator=(Carved&& o) noexcept {
        if (this != &o) {
            reset();
            static_cast<view_type&>(*this) = std::move(static_cast<view_type&>(o));
            arena_ = std::move(o.arena_);
            range_ = std::exchange(o.range_, nullptr);
            view_bytes_ = o.view_bytes_;
            own_ = std::move(o.own_);
        }
        return *this;
    }
    Carved(const Carved&) = delete;
    Carved& operator=(const Carved&) = delete;
    ~Carved() { reset(); }

    // The segment this block lies in and its offset there: to make a view of
    // part of the block (OpenCL has no sub-buffer of a sub-buffer; make one of
    // segment() at offset() + x instead). A fallback block is its own segment.
    const typename B::memory_type& segment() const noexcept { return range_ ? range_->seg->memory : own_; }
    std::size_t offset() const noexcept { return range_ ? range_->offset : 0; }
    // True for a block served as a whole buffer because its view failed.
    bool is_fallback() const noexcept { return range_ == nullptr && arena_ != nullptr; }

private:
    friend class SubAllocated<B>;
    Carved(view_type view, std::shared_ptr<shared_type> arena, range_type* r, std::size_t view_bytes) noexcept
        : view_type(std::move(view)), arena_(std::move(arena)), range_(r), view_bytes_(view_bytes) {}
    Carved(view_type view, std::shared_ptr<shared_type> arena, typename B::memory_type own) noexcept
        : view_type(std::move(view)), arena_(std::move(arena)), own_(std::move(own)) {}

    void reset() noexcept {
        if (range_) {
            if (detail::may_free(arena_->generation)) {  // a fork parent's arena, or exit under way: leave it alone
                // None kept: the view goes before its range, outside the lock.
                if (arena_->cached_limit == 0) detail::discard(static_cast<view_type&>(*this));
                std::lock_guard lock(arena_->space.mutex());
                if (arena_->cached_limit != 0)
                    arena_->keep_view(range_, std::move(static_cast<view_type&>(*this)), view_bytes_);
                arena_->space.give(range_);
            }
            range_ = nullptr;
        }
        detail::discard(static_cast<view_type&>(*this));
        detail::discard(own_);
        arena_.reset();  // the last block of a gone pool frees the segments
    }

    std::shared_ptr<shared_type> arena_;
    range_type* range_ = nullptr;
    std::size_t view_bytes_ = 0;     // the view's size (a kept view is reused for exactly this size)
    typename B::memory_type own_{};  // a fallback's whole buffer
};

namespace detail {
// The parent's events, forwarded when it has them (an undeclared member would be refused).
template <class B, bool = backend_declares<B, BackendAbility::events>>
struct forward_events {
    static constexpr BackendAbilities abilities = BackendAbility::sub_allocates | BackendAbility::abandon;
};
template <class B>
struct forward_events<B, true> {
    // A block's range is reused by other blocks once released, which the
    // driver's reference count on the view does not guard: the pool waits for
    // a released block's events before it gives the range back.
    static constexpr BackendAbilities abilities = BackendAbility::sub_allocates | BackendAbility::abandon |
                                                  BackendAbility::events | BackendAbility::free_waits_for_events;
    using event_type = typename B::event_type;
    static bool event_complete(const event_type& e) noexcept { return B::event_complete(e); }
    static void wait_for(const event_type* events, std::size_t n) noexcept { B::wait_for(events, n); }
};
}  // namespace detail

// A backend adaptor: a Pool over SubAllocated<B> gets its blocks carved from
// segments of B (2 MiB for requests up to 1 MiB, 20 MiB up to 10 MiB, a
// segment of its own size above; smaller while the pool holds little), best fit, split and merged with free neighbours
// (BFC). The pool's buckets cache released blocks as before, so a hit is the
// same list pop and makes no driver call; a miss is carved from a segment
// (the parent's sub_range: clCreateSubBuffer for OpenCL), and only when no
// free range fits, even once the pool's cache went back and merged, is a
// segment allocated. trim() gives whole empty segments back.
//
// Throws config_error at construction if the alignment (the parent's
// sub_alignment(), or options.granularity) is 0 or not a power of two.
// Thread-safe: the arena has a mutex of its own, taken on a miss and when a
// block goes back, never on a hit.
template <SegmentBackend B>
class SubAllocated : public detail::forward_events<B> {
    using shared_type = detail::arena_shared<B>;
    using arena_type = typename shared_type::arena_type;

public:
    using parent_type = B;
    using memory_type = Carved<B>;

    // Implicit, as the parents' own constructors are, so a pool over
    // SubAllocated<B> is made from what makes a B: `clpool::ArenaPool pool(context);`.
    // No options: ArenaOptions{}, or ArenaOptions::for_free_views() where B's views are free.
    SubAllocated(B parent,
                 ArenaOptions options = detail::default_arena_options<B>())  // NOLINT(google-explicit-constructor)
        : parent_(std::move(parent)), max_alloc_(parent_.max_alloc_size()), options_(options),
          shared_(std::make_shared<shared_type>(checked(options, parent_), options, detail::birth_generation())) {
        // Every block rounds up to the granularity: a request the rounding
        // takes past the device's limit gets the pool's size_error, not a
        // segment the driver refuses.
        max_alloc_ &= ~(granularity() - 1);
    }
    // A copy is a new arena with the same parent and options: no segment is
    // shared, so two pools built from one backend value account, trim and
    // snapshot only their own (blocks of the original keep its arena alive).
    SubAllocated(const SubAllocated& o)
        : detail::forward_events<B>(o), parent_(o.parent_), max_alloc_(o.max_alloc_), options_(o.options_),
          shared_(
              std::make_shared<shared_type>(checked(o.options_, o.parent_), o.options_, detail::birth_generation())) {}
    SubAllocated& operator=(const SubAllocated& o) {
        if (this != &o) *this = SubAllocated(o);
        return *this;
    }
    SubAllocated(SubAllocated&&) noexcept = default;
    SubAllocated& operator=(SubAllocated&&) noexcept = default;
    ~SubAllocated() = default;
    template <class Arg>
        requires(!std::same_as<std::remove_cvref_t<Arg>, SubAllocated> && !std::same_as<std::remove_cvref_t<Arg>, B> &&
                 std::constructible_from<B, const Arg&>)
    SubAllocated(const Arg& arg)  // NOLINT(google-explicit-constructor)
        : SubAllocated(B(arg)) {}

    // The parent's, rounded down to granularity().
    std::size_t max_alloc_size() const noexcept { return max_alloc_; }
    bool unified_memory() const noexcept { return parent_.unified_memory(); }
    std::string name() const { return std::string(parent_.name()) + " sub-allocated"; }
    const B& parent() const noexcept { return parent_; }
    B& parent() noexcept { return parent_; }
    // The rounding unit of every block: max(options.granularity, parent.sub_alignment()).
    std::size_t granularity() const noexcept { return shared_->space.opts().granularity; }

    // From the free ranges only; out_of_memory when none fits.
    Allocation<memory_type> allocate_held(std::size_t n, MemoryKind kind) noexcept {
        if (n > max_alloc_) return {memory_type(), AllocStatus::failed, 0};  // the arena's rounding would wrap
        auto& space = shared_->space;
        const std::size_t rounded = space.round(n);
        typename arena_type::range* r = nullptr;
        {
            std::lock_guard lock(space.mutex());
            r = space.take(rounded);
        }
        if (!r) return {memory_type(), AllocStatus::out_of_memory, 0};
        return view_of(r, n, kind);
    }

    // A new segment (the request's own above large_limit), carved at once.
    // Whole empty segments go back to the driver first if the new one would
    // take the segments past their peak (or too much is free): none could
    // hold the request (the pool asked allocate_held), and keeping them then
    // would only raise the peak beyond what is live.
    Allocation<memory_type> allocate(std::size_t n, MemoryKind kind) noexcept {
        if (n > max_alloc_) return {memory_type(), AllocStatus::failed, 0};
        auto& space = shared_->space;
        const std::size_t rounded = space.round(n);
        // Pinned memory starts at full-size segments: each pinned allocation costs about 1 ms
        // (and a map), and host memory is not what decides whether a model fits.
        const bool gradual = kind == MemoryKind::device_local;
        release_before_growing(rounded, gradual);
        std::size_t seg_bytes = 0;
        {
            std::lock_guard lock(space.mutex());  // segment_size_for reads what the arena holds
            seg_bytes = space.segment_size_for(rounded, max_alloc_, gradual);
        }
        auto got = parent_.allocate(seg_bytes, kind);
        if (got.status == AllocStatus::ok) return add_and_carve(got.memory, seg_bytes, n, kind);
        // The full segment did not fit: a segment of exactly the request may.
        if (seg_bytes != rounded) got = parent_.allocate(rounded, kind);
        if (got.status == AllocStatus::ok) return add_and_carve(got.memory, rounded, n, kind);
        if (got.status != AllocStatus::out_of_memory) return {memory_type(), got.status, got.native_code};
        return allocate_under_pressure(n, rounded, kind, got.native_code);
    }

    // Every kept idle view released, then every whole empty segment back to
    // the driver (trim()); returns the segments' bytes.
    std::size_t release_empty() noexcept {
        release_cached_views();
        return release_empty_above(0, 0);
    }

    // More than max_free_fraction of the segments is free: then empty
    // segments go before a new one comes.
    bool too_much_free() const noexcept {
        std::lock_guard lock(shared_->space.mutex());
        return too_much_free_locked();
    }

    void add_stats(PoolStats& s) const noexcept {
        std::lock_guard lock(shared_->space.mutex());
        const auto& space = shared_->space;
        s.segments = space.segments();
        s.segment_bytes = space.segment_bytes();
        s.peak_segment_bytes = space.peak_segment_bytes();
        s.segment_free_bytes = space.free_bytes();
        s.largest_free_block = space.largest_free();
        s.segment_allocations = space.segment_allocations() + shared_->fallbacks;
        s.sub_buffer_fallbacks = shared_->fallbacks;
        s.sub_buffers_made = shared_->made.load(std::memory_order_relaxed);
        s.sub_buffers_reused = shared_->reused;
        s.sub_buffers_cached = shared_->cached;
    }

    // Every segment with its ranges, in address order: a block taken by a
    // buffer is listed as in use with no buffer id (the pool fills both in,
    // matching place_of). Throws bad_alloc only.
    void add_segments(std::vector<SegmentInfo>& out) const {
        std::lock_guard lock(shared_->space.mutex());
        shared_->space.for_each_segment([&](const typename arena_type::segment& seg) {
            SegmentInfo info;
            info.id = reinterpret_cast<std::uintptr_t>(&seg);
            info.bytes = seg.size;
            for (const auto* r = seg.first; r; r = r->next) {
                SegmentBlock b;
                b.offset = r->offset;
                b.bytes = r->size;
                b.free = r->free;
                if (r->free) {
                    info.free_bytes += r->size;
                    info.largest_free = std::max(info.largest_free, r->size);
                }
                info.blocks.push_back(b);
            }
            out.push_back(std::move(info));
        });
    }
    // The segment (SegmentInfo::id) and offset of a block; {0, 0} for a fallback block or an empty one.
    std::pair<std::uintptr_t, std::size_t> place_of(const memory_type& m) const noexcept {
        if (!m.range_) return {0, 0};
        return {reinterpret_cast<std::uintptr_t>(m.range_->seg), m.range_->offset};
    }

    // In a fork child: forget the parent's handles and never free a segment.
    void abandon() noexcept {
        shared_->space.abandon();
        backend_traits<B>::abandon(parent_);
    }

private:
    // Every segment's kept views released, under the lock: their ranges are
    // free, and a carve must not make a view over bytes one of them still covers.
    void release_cached_views() noexcept {
        if (!detail::may_free(shared_->generation)) return;
        std::lock_guard lock(shared_->space.mutex());
        shared_->space.for_each_segment([&](typename arena_type::segment& seg) {
            shared_->drop_views(seg, [](typename B::sub_memory_type&& v) { detail::discard(v); });
        });
    }

    // The driver refused even a segment of exactly the request: every whole
    // empty segment goes back (grace and peak aside) and the driver is asked
    // once more; then the request may split a segment of the other kind (a
    // small request beside a large block, or the reverse), so a request does
    // not fail beside free bytes it fits in only because they lie in a
    // segment of the other kind.
    Allocation<memory_type> allocate_under_pressure(std::size_t n, std::size_t rounded, MemoryKind kind,
                                                    int native_code) noexcept {
        if (release_empty_above(0, 0) != 0) {
            auto got = parent_.allocate(rounded, kind);
            if (got.status == AllocStatus::ok) return add_and_carve(got.memory, rounded, n, kind);
            native_code = got.native_code;
        }
        typename arena_type::range* r = nullptr;
        {
            std::lock_guard lock(shared_->space.mutex());
            r = shared_->space.take_any(rounded);
        }
        if (!r) return {memory_type(), AllocStatus::out_of_memory, native_code};
        return view_of(r, n, kind);
    }

    bool too_much_free_locked() const noexcept {
        return static_cast<double>(shared_->space.free_bytes()) >
               shared_->max_free_fraction * static_cast<double>(shared_->space.segment_bytes());
    }
    // Whole empty segments back to the driver before a segment for `rounded`
    // bytes is made: all if too much is free; if it would raise the
    // high-water mark, enough (oldest first, none of the request's kind
    // emptied within empty_grace) that it need not, if they can.
    void release_before_growing(std::size_t rounded, bool gradual) noexcept {
        std::size_t target = 0;
        std::uint64_t grace = 0;
        {
            const auto& space = shared_->space;
            std::lock_guard lock(shared_->space.mutex());
            if (!too_much_free_locked()) {
                if (!shared_->release_before_new_peak || space.free_bytes() == 0) return;
                const std::size_t seg_bytes = space.segment_size_for(rounded, max_alloc_, gradual);
                const std::size_t peak = space.peak_segment_bytes();
                if (space.segment_bytes() + seg_bytes <= peak) return;
                target = peak > seg_bytes ? peak - seg_bytes : 0;
                grace = shared_->empty_grace;
            }
        }
        release_empty_above(target, grace, shared_->space.pool_of(rounded));
    }

    // Whole empty segments back to the driver, oldest first, until the
    // segments hold at most `target` bytes, leaving those of `kind` emptied
    // within the last `grace` blocks asked of the arena (arena::release_empty).
    std::size_t release_empty_above(std::size_t target, std::uint64_t grace, int kind = 0) noexcept {
        if (!detail::may_free(shared_->generation)) return 0;
        typename arena_type::segment* doomed = nullptr;  // chained through first (unused once empty)
        std::size_t bytes = 0;
        {
            std::lock_guard lock(shared_->space.mutex());
            bytes = shared_->space.release_empty(
                [&](typename arena_type::segment* s) {
                    shared_->drop_views(*s, [](typename B::sub_memory_type&&) {});  // count; freed with s
                    s->first = reinterpret_cast<typename arena_type::range*>(doomed);
                    doomed = s;
                },
                target, grace, kind);
        }
        while (doomed) {  // the driver frees outside the lock
            auto* next = reinterpret_cast<typename arena_type::segment*>(doomed->first);
            delete doomed;
            doomed = next;
        }
        return bytes;
    }

    static typename arena_type::options checked(const ArenaOptions& o, const B& parent) {
        const std::size_t align = parent.sub_alignment();
        if (align == 0 || !std::has_single_bit(align))
            throw config_error("clpool: " + std::string(parent.name()) +
                               " reports a sub-buffer base-address alignment of " + std::to_string(align) +
                               " bytes (OpenCL: CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8); sub-allocation needs a power of "
                               "two of at least 1 byte");
        if (o.granularity == 0 || !std::has_single_bit(o.granularity))
            throw config_error("clpool: ArenaOptions::granularity is " + std::to_string(o.granularity) +
                               "; it must be a power of two");
        if (o.small_limit > o.small_segment || o.small_segment > o.large_segment)
            throw config_error("clpool: ArenaOptions needs small_limit <= small_segment <= large_segment (got " +
                               std::to_string(o.small_limit) + ", " + std::to_string(o.small_segment) + ", " +
                               std::to_string(o.large_segment) + ")");
        if (o.small_limit > o.large_limit || o.large_limit > o.large_segment)
            throw config_error("clpool: ArenaOptions needs small_limit <= large_limit <= large_segment (got " +
                               std::to_string(o.small_limit) + ", " + std::to_string(o.large_limit) + ", " +
                               std::to_string(o.large_segment) + ")");
        if (o.large_round == 0 || o.min_segment == 0)
            throw config_error("clpool: ArenaOptions::large_round and min_segment must be at least 1 byte (got " +
                               std::to_string(o.large_round) + ", " + std::to_string(o.min_segment) + ")");
        if (!(o.growth > 0.0 && o.growth <= 1.0))
            throw config_error("clpool: ArenaOptions::growth is " + std::to_string(o.growth) +
                               "; it must be above 0 and at most 1");
        if (!(o.max_free_fraction >= 0.0 && o.max_free_fraction <= 1.0))
            throw config_error("clpool: ArenaOptions::max_free_fraction is " + std::to_string(o.max_free_fraction) +
                               "; it must be between 0 and 1");
        constexpr std::size_t views_per_segment = detail::view_cache<typename B::sub_memory_type>::capacity;
        if (o.cached_views > views_per_segment)
            throw config_error("clpool: ArenaOptions::cached_views is " + std::to_string(o.cached_views) +
                               "; a segment keeps at most " + std::to_string(views_per_segment) +
                               " idle sub-buffers (0 keeps none)");
        return {std::max(o.granularity, align),
                o.small_limit,
                o.small_segment,
                o.large_segment,
                o.large_limit,
                o.large_round,
                o.min_segment,
                o.growth};
    }

    Allocation<memory_type> add_and_carve(typename B::memory_type& mem, std::size_t seg_bytes, std::size_t n,
                                          MemoryKind kind) noexcept {
        auto& space = shared_->space;
        typename arena_type::range* r = nullptr;
        {
            std::lock_guard lock(space.mutex());
            auto* seg = space.add(mem, seg_bytes, space.pool_of(space.round(n)));
            if (!seg) return {memory_type(), AllocStatus::out_of_memory, 0};  // mem frees itself
            // From the new segment, not the best fit: a range freed meanwhile
            // by another thread would leave the new segment empty.
            r = space.take_from(seg->first, space.round(n));
        }
        return view_of(r, n, kind);
    }

    // The parent's view of range r; if it cannot be made, r goes back and the
    // block is a whole buffer of its own (counted in sub_buffer_fallbacks).
    // A view of exactly this range and size kept idle in the segment is taken
    // back instead (no driver call); kept views it overlaps are released first.
    Allocation<memory_type> view_of(typename arena_type::range* r, std::size_t n, MemoryKind kind) noexcept {
        const std::size_t bytes = n == 0 ? 1 : n;
        if (shared_->cached_limit != 0) {
            typename shared_type::view_type kept{};
            bool hit = false;
            {
                std::lock_guard lock(shared_->space.mutex());
                hit = shared_->take_view(r, bytes, kept);
            }
            if (hit) return {memory_type(std::move(kept), shared_, r, bytes), AllocStatus::ok, 0};
        }
        auto view = parent_.sub_range(r->seg->memory, r->offset, bytes);
        if (view.status == AllocStatus::ok) {
            if constexpr (!detail::views_are_free<B>())
                shared_->made.fetch_add(1, std::memory_order_relaxed);  // a failed call made none
            return {memory_type(std::move(view.memory), shared_, r, bytes), AllocStatus::ok, 0};
        }
        {
            std::lock_guard lock(shared_->space.mutex());
            shared_->space.give(r);
        }
        auto whole = parent_.allocate(bytes, kind);
        if (whole.status != AllocStatus::ok) return {memory_type(), whole.status, whole.native_code};
        {
            std::lock_guard lock(shared_->space.mutex());
            ++shared_->fallbacks;  // a block served as a whole buffer (a refused one is no fallback)
        }
        auto v = parent_.whole_range(whole.memory, bytes);
        return {memory_type(std::move(v), shared_, std::move(whole.memory)), AllocStatus::ok, 0};
    }

    B parent_;
    std::size_t max_alloc_;
    ArenaOptions options_;  // as given: a copy's arena is made from them
    std::shared_ptr<shared_type> shared_;
};

}  // namespace clpool
