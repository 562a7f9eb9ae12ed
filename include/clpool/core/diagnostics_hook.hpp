// diagnostics_hook: the one hook a pool's diagnostics (history, call sites, snapshots, out-of-memory reports) attach to, and NoDiagnostics, which compiles it away.
#pragma once

#include <concepts>
#include <cstdint>

namespace clpool {

// Whether a pool's history also records where each event was called from
// (Pool::record_history; CLPOOL_HISTORY_STACKS).
enum class CallSites : std::uint8_t { off, on };

// What happened to a pool, as its diagnostics hear of it.
enum class HistoryAction : std::uint8_t {
    alloc,  // a hand-out: hit (from the cache) or miss (a new buffer from the driver)
    free,  // a release that cached the buffer
    pending,  // a release with events still running: cached once they complete
    evict,  // a buffer given back to the driver (a cap refused it, or trim)
    trim,  // one trim() call; bytes_held is what it gave back
    oom,  // an out-of-memory after the retry; bytes_requested is what was asked
};

constexpr const char* to_string(HistoryAction a) noexcept {
    switch (a) {
        case HistoryAction::alloc: return "alloc";
        case HistoryAction::free: return "free";
        case HistoryAction::pending: return "pending";
        case HistoryAction::evict: return "evict";
        case HistoryAction::trim: return "trim";
        case HistoryAction::oom: return "oom";
    }
    return "unknown";
}

// Pool's last template argument D: the pool's diagnostics. The core calls it
// at a few fixed points and knows nothing of what it keeps; docs/DESIGN.md
// ("Diagnostics") has the contract. In short:
//   D::enabled      false: every call below compiles away, and the pool has
//                   no record_history() or snapshot() (a static_assert says so)
//   D::site         a call site, captured by D::capture(site, skip) outside every lock
//   D::ring         a recorder written under a lock the event's path holds anyway
//                   (a lock stripe, a front's lock): note_alloc, note_release, record
//   D::block_data   what each buffer's node carries for D
//   D::pool_state   the pool's own: wants_site(), a relaxed load on every allocate and release
// and, with the pool (D is its friend): D::start, D::record_history,
// D::snapshot and D::oom_details. clpool::Diagnostics
// (<clpool/diagnostics/diagnostics.hpp>) is the one the named pools use.
struct NoDiagnostics {
    static constexpr bool enabled = false;
    struct site {};
    struct ring {};
    struct block_data {};
    struct pool_state {
        static constexpr bool wants_site() noexcept { return false; }
    };
};

template <class D>
concept PoolDiagnostics = requires(const typename D::pool_state& s) {
    requires std::same_as<decltype(D::enabled), const bool>;
    typename D::site;
    typename D::ring;
    typename D::block_data;
    { s.wants_site() } noexcept -> std::same_as<bool>;
};

static_assert(PoolDiagnostics<NoDiagnostics>);

}  // namespace clpool
