// front: what a lock policy may put in front of a pool's shared lists (ThreadCached's magazines), and none.
#pragma once

#include <clpool/core/policy_concepts.hpp>

#include <concepts>
#include <cstddef>
#include <utility>

namespace clpool {

namespace detail {
struct call_site;
}

// A pool calls its front on every path, before the shared lists (Lists, a
// shared_lists<...>), which the front reaches only through Lists's public
// interface:
//   take(lists, index, nbytes, site)  a buffer of bucket `index` from the front's own
//                               cache, in use for nbytes; nullptr: the pool
//                               takes from the shared lists (and counts a miss there)
//   put(lists, block, nbytes, site)  a released buffer (no pending events): true if the
//                               front took it (kept or evicted), false: the shared lists
// (site: the caller's call site while the pool's history records them, else
// nullptr; a front that records events does so whenever its history is on)
//   flush(lists)                trim(): every buffer the front holds back to the shared lists
//   detach(lists)               ~Pool: as flush, then let go of the pool
//   abandon()                   ~Pool in a fork child: let go without locks or driver calls
//   stats(lists)                lists.snapshot() with the front's buffers and hits folded in
// and, for Pool::snapshot(), optionally:
//   inspect(lists, f)           f(stats(lists), held) under the same locks as stats, where
//                               held(block) says whether the front holds the block idle
// and optionally, for a capped pool:
//   reclaim(lists)              gives back the slots the front holds empty against the caps:
//                               the pool calls it when the caps refuse a release that takes
//                               the shared lists, then asks them again
// and optionally, for a pool's history (Pool::record_history), when the front
// records under locks of its own:
//   set_history(lists, cfg, apply)  new rings for the front, then apply() with its locks held
//   collect_history(events)         within inspect: the front's rings
// The exact bucket always belongs to the shared lists.
template <class F, class Lists>
concept PoolFront =
    requires(F& f, const F& cf, Lists& lists, const Lists& clists, typename Lists::block_type* b, std::size_t n) {
        { f.take(lists, n, n, nullptr) } noexcept -> std::same_as<typename Lists::block_type*>;
        { f.put(lists, b, n, nullptr) } noexcept -> std::same_as<bool>;
        { f.flush(lists) } noexcept;
        { f.detach(lists) } noexcept;
        { f.abandon() } noexcept;
        { cf.stats(clists) } -> std::same_as<decltype(clists.snapshot())>;
    };

// The front of NoLock, SingleMutex, Striped and LockedBy: none. An empty type
// whose calls do nothing, so the pool's calls to it compile away.
struct no_front {
    template <class Lists>
    static constexpr typename Lists::block_type* take(Lists&, std::size_t, std::size_t,
                                                      const detail::call_site*) noexcept {
        return nullptr;
    }
    template <class Lists>
    static constexpr bool put(Lists&, typename Lists::block_type*, std::size_t, const detail::call_site*) noexcept {
        return false;
    }
    template <class Lists>
    static constexpr void flush(Lists&) noexcept {}
    template <class Lists>
    static constexpr void detach(Lists&) noexcept {}
    static constexpr void abandon() noexcept {}
    template <class Lists>
    static auto stats(const Lists& lists) {
        return lists.snapshot();
    }
    template <class Lists, class F>
    static decltype(auto) inspect(const Lists& lists, F&& f) {
        return lists.inspect([&](auto s) { return f(std::move(s), [](const auto*) { return false; }); });
    }
};

namespace detail {
template <class Locks, class Lists>
struct front_of {
    using type = no_front;
};
template <class Locks, class Lists>
    requires requires { typename Locks::template front<Lists>; }
struct front_of<Locks, Lists> {
    using type = typename Locks::template front<Lists>;
};
}  // namespace detail

// A lock policy's front over Lists: its `front<Lists>` if it names one, else no_front.
template <LockPolicy Locks, class Lists>
using front_t = typename detail::front_of<Locks, Lists>::type;

}  // namespace clpool
