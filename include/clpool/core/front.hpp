// front: what a lock policy may put in front of a pool's shared lists (ThreadCached's magazines), the abilities a front declares, and none.
#pragma once

#include <clpool/core/policy_concepts.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace clpool {

// A pool calls its front on every path, before the shared lists (Lists, a
// shared_lists<...>), which the front reaches only through Lists's public
// interface. Every front has:
//   take(lists, index, nbytes, site)  a buffer of bucket `index` from the front's own
//                               cache, in use for nbytes; nullptr: the pool
//                               takes from the shared lists (and counts a miss there)
//   put(lists, block, nbytes, site)  a released buffer (no pending events): true if the
//                               front took it (kept or evicted), false: the shared lists
// (site: a const Lists::site_type*, the caller's call site while the pool's
// history records them, else nullptr; a front that records events does so
// whenever its history is on)
//   flush(lists)                trim(): every buffer the front holds back to the shared lists
//   detach(lists)               ~Pool: as flush, then let go of the pool
//   abandon()                   ~Pool in a fork child: let go without locks or driver calls
//   stats(lists)                lists.snapshot() with the front's buffers and hits folded in
// A front may do more; it says so, as a backend does (backend.hpp), and must
// then have the members the ability names:
//
//   static constexpr clpool::FrontAbilities abilities =
//       clpool::FrontAbility::inspect | clpool::FrontAbility::reclaim;
//
// No declaration means FrontAbility::none. The pool calls an optional member
// only when declared, and a front that has one without declaring it does not
// compile (an undeclared member would go unused).
enum class FrontAbility : unsigned {
    none = 0,
    // `inspect(lists, f)`: f(stats(lists), held) under the same locks as
    // stats, where held(block) says whether the front holds the block idle.
    // Pool::snapshot() reports such blocks as cached.
    inspect = 1u << 0,
    // `void reclaim(Lists&) noexcept`: gives back the slots the front holds
    // empty against the caps. A capped pool calls it when the caps refuse a
    // release that takes the shared lists, then asks them again.
    reclaim = 1u << 1,
    // The front records history events under locks of its own (a pool with
    // diagnostics): `set_history(lists, cfg, apply)` makes new rings for the
    // front, then calls apply() with its locks held; `collect_history(events)`,
    // within inspect, adds the front's rings. Needs `inspect`.
    history = 1u << 2,
};
// A set of front abilities: FrontAbility values joined with |.
using FrontAbilities = FrontAbility;

constexpr FrontAbilities operator|(FrontAbilities a, FrontAbilities b) noexcept {
    return static_cast<FrontAbilities>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
// True when every ability of `wanted` is in `set`.
constexpr bool has_abilities(FrontAbilities set, FrontAbilities wanted) noexcept {
    return (static_cast<unsigned>(set) & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

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

namespace detail {
// What the pool passes to a front's optional members, to check them by.
struct inspect_probe {
    template <class Stats, class Held>
    Stats operator()(Stats s, const Held&) const {
        return s;
    }
};
struct apply_probe {
    void operator()() const noexcept {}
};

// No `abilities` member, or a `static constexpr FrontAbilities abilities`.
template <class F>
concept front_abilities_declaration = !requires { F::abilities; } || requires {
    requires std::same_as<decltype(F::abilities), const FrontAbilities>;
    typename std::integral_constant<FrontAbilities, F::abilities>;  // a constant expression
};

template <class F>
consteval FrontAbilities declared_front_abilities() noexcept {
    if constexpr (requires { F::abilities; } && front_abilities_declaration<F>) return F::abilities;
    else return FrontAbility::none;
}

template <class F, class Lists>
concept front_inspect = requires(const F& cf, const Lists& clists) {
    { cf.inspect(clists, inspect_probe{}) } -> std::same_as<decltype(clists.snapshot())>;
};
template <class F, class Lists>
concept front_reclaim = requires(F& f, Lists& lists) {
    { f.reclaim(lists) } noexcept;
};
// Checked only for a pool whose diagnostics keep a history (they name the
// settings and the gathering: Diag::config, Diag::events).
template <class F, class Lists>
concept front_history = !Lists::diagnostics::enabled ||
                        requires(F& f, const F& cf, Lists& lists, const typename Lists::diagnostics::config& cfg,
                                 typename Lists::diagnostics::events& events) {
                            f.set_history(lists, cfg, apply_probe{});
                            cf.collect_history(events);
                        };
template <class F, class Lists>
concept has_history_members = Lists::diagnostics::enabled &&
    (requires(F& f, Lists& lists, const typename Lists::diagnostics::config& cfg) {
        f.set_history(lists, cfg, apply_probe{});
    } || requires(const F& cf, typename Lists::diagnostics::events& events) { cf.collect_history(events); });
}  // namespace detail

// F declares front ability A (in a well-formed `abilities`).
template <class F, FrontAbility A>
concept front_declares = has_abilities(detail::declared_front_abilities<F>(), A);

namespace detail {
// True if F is a PoolFront over Lists whose declared abilities match its
// members; else a static_assert whose sentence names the member at fault.
template <class F, class Lists>
consteval bool diagnose_front() {
    static_assert(front_abilities_declaration<F>,
                  "clpool: the front's `abilities` must be `static constexpr clpool::FrontAbilities abilities = ...`");
    static_assert(
        requires(F& f, Lists& lists, std::size_t n) {
            { f.take(lists, n, n, nullptr) } noexcept -> std::same_as<typename Lists::block_type*>;
        },
        "clpool: the front has no `block_type* take(Lists&, std::size_t index, std::size_t nbytes, const "
        "site_type*) noexcept`");
    static_assert(
        requires(F& f, Lists& lists, typename Lists::block_type* b, std::size_t n) {
            { f.put(lists, b, n, nullptr) } noexcept -> std::same_as<bool>;
        }, "clpool: the front has no `bool put(Lists&, block_type*, std::size_t nbytes, const site_type*) noexcept`");
    static_assert(
        requires(F& f, Lists& lists) {
            { f.flush(lists) } noexcept;
            { f.detach(lists) } noexcept;
        }, "clpool: the front has no `void flush(Lists&) noexcept` or no `void detach(Lists&) noexcept`");
    static_assert(
        requires(F& f) {
            { f.abandon() } noexcept;
        }, "clpool: the front has no `void abandon() noexcept`");
    static_assert(
        requires(const F& cf, const Lists& clists) {
            { cf.stats(clists) } -> std::same_as<decltype(clists.snapshot())>;
        }, "clpool: the front has no `PoolStats stats(const Lists&) const`");
    if constexpr (front_declares<F, FrontAbility::inspect>)
        static_assert(front_inspect<F, Lists>,
                      "clpool: the front declares FrontAbility::inspect but has no "
                      "`inspect(const Lists&, f) const` returning f(stats, held)");
    else
        static_assert(!front_inspect<F, Lists>,
                      "clpool: the front has `inspect(lists, f)` but does not declare "
                      "FrontAbility::inspect in `abilities` (an undeclared member would "
                      "go unused)");
    if constexpr (front_declares<F, FrontAbility::reclaim>)
        static_assert(front_reclaim<F, Lists>,
                      "clpool: the front declares FrontAbility::reclaim but has no `void reclaim(Lists&) noexcept`");
    else
        static_assert(!front_reclaim<F, Lists>,
                      "clpool: the front has `reclaim(lists)` but does not declare "
                      "FrontAbility::reclaim in `abilities` (an undeclared member would "
                      "go unused)");
    if constexpr (front_declares<F, FrontAbility::history>) {
        static_assert(front_declares<F, FrontAbility::inspect>,
                      "clpool: the front declares FrontAbility::history without FrontAbility::inspect (its rings "
                      "are read under inspect's locks)");
        static_assert(front_history<F, Lists>,
                      "clpool: the front declares FrontAbility::history but has no `set_history(Lists&, const "
                      "config&, apply)` or no `collect_history(events&) const`");
    } else {
        static_assert(!has_history_members<F, Lists>,
                      "clpool: the front has `set_history` or `collect_history` but does not declare "
                      "FrontAbility::history in `abilities` (an undeclared member would go unused)");
    }
    return PoolFront<F, Lists>;
}
}  // namespace detail

// The pool's one door to its front's optional members: each does what the
// front declared, or what a pool without that front does.
template <class F, class Lists>
struct front_traits {
    static constexpr FrontAbilities abilities = detail::declared_front_abilities<F>();
    static constexpr bool has_inspect = has_abilities(abilities, FrontAbility::inspect);
    static constexpr bool has_reclaim = has_abilities(abilities, FrontAbility::reclaim);
    static constexpr bool has_history = has_abilities(abilities, FrontAbility::history);

    // f(stats, held) under the locks of stats(); held(block): whether the front holds it idle.
    template <class G>
    static decltype(auto) inspect(const F& front, const Lists& lists, G&& g) {
        if constexpr (has_inspect) return front.inspect(lists, std::forward<G>(g));
        else return lists.inspect([&](auto s) { return g(std::move(s), [](const auto*) { return false; }); });
    }
};

// The front of NoLock, SingleMutex, Striped and LockedBy: none. An empty type
// whose calls do nothing, so the pool's calls to it compile away.
struct no_front {
    template <class Lists>
    static constexpr typename Lists::block_type* take(Lists&, std::size_t, std::size_t,
                                                      const typename Lists::site_type*) noexcept {
        return nullptr;
    }
    template <class Lists>
    static constexpr bool put(Lists&, typename Lists::block_type*, std::size_t,
                              const typename Lists::site_type*) noexcept {
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
