// history_ring: a ring of a pool's recent events, written under a lock the event's path already holds; its clock, and CLPOOL_HISTORY.
#pragma once

#include <clpool/core/detail/call_sites.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/history.hpp>
#include <clpool/core/snapshot.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clpool::detail {

// The event clock. On x86 the time-stamp counter: about 20 cycles, where a
// steady_clock read is a vDSO call several times that, and a hit pair is only
// some 25 ns. Ticks become steady-clock nanoseconds when a snapshot is taken
// (tick_clock). Elsewhere, steady_clock itself.
#if defined(__x86_64__) || defined(__i386__)
inline constexpr bool ticks_are_ns = false;
inline std::uint64_t ticks() noexcept { return __builtin_ia32_rdtsc(); }
#else
inline constexpr bool ticks_are_ns = true;
inline std::uint64_t ticks() noexcept { return steady_ns(); }
#endif

// Ticks to steady nanoseconds, by linear interpolation between two moments
// read on both clocks: one taken once per process, when a history is first
// turned on (before any event), and one taken now (after every event read).
// Assumes a constant-rate counter, as every x86 CPU of the last fifteen years
// has (constant_tsc); between the two moments the error is that of reading
// each pair, tens of nanoseconds.
class tick_clock {
public:
    struct moment {
        std::uint64_t ticks, ns;
    };
    static moment read() noexcept {
        const std::uint64_t before = ticks();
        const std::uint64_t ns = steady_ns();
        const std::uint64_t after = ticks();
        return {before + (after - before) / 2, ns};
    }
    static moment anchor() noexcept {
        static const moment m = read();
        return m;
    }

    tick_clock() noexcept : from_(anchor()), to_(read()) {}

    std::uint64_t to_ns(std::uint64_t t) const noexcept {
        if constexpr (ticks_are_ns) {
            return t;
        } else {
            if (to_.ticks <= from_.ticks) return to_.ns;
            const long double scale = static_cast<long double>(to_.ns - from_.ns) / (to_.ticks - from_.ticks);
            const long double dt = static_cast<long double>(static_cast<std::int64_t>(t - from_.ticks));
            return static_cast<std::uint64_t>(static_cast<long double>(from_.ns) + dt * scale);
        }
    }

private:
    moment from_, to_;
};

// What a history records: how many events per ring, and whether call sites.
struct history_config {
    std::size_t capacity = 0;  // 0: off
    bool stacks = false;
    bool on() const noexcept { return capacity != 0; }
};

inline constexpr std::size_t max_history_events = std::size_t{1} << 24;

// One event as recorded: ticks, not nanoseconds, and the tag's pointer.
struct history_slot {
    std::uint64_t ticks;
    std::uintptr_t id;
    std::size_t requested;
    std::size_t held;
    const char* tag;
    HistoryAction action;
    bool hit;
    bool exact;  // of the exact-size bucket (bucket_size 0)
};

// The newest `capacity` events of one writer, which records under a lock it
// already holds (a lock stripe, or a ThreadCached magazine): so recording
// takes no lock and no atomic operation of its own. A snapshot, which holds
// every such lock, merges the rings by time (history_events).
// Its storage is made on the first event, so stripes that see none cost
// nothing; if it cannot be made the event is counted and not kept.
class history_ring {
public:
    explicit history_ring(history_config cfg) noexcept : capacity_(cfg.capacity), stacks_(cfg.stacks) {}
    history_ring(const history_ring&) = delete;
    history_ring& operator=(const history_ring&) = delete;

    void record(HistoryAction action, bool hit, std::uintptr_t id, std::size_t requested, std::size_t held, bool exact,
                const char* tag, const call_site* site) noexcept {
        put({ticks(), id, requested, held, tag, action, hit, exact}, site);
    }

    // Events in the order recorded, oldest first: f(slot, site or nullptr).
    template <class F>
    void for_each(F&& f) const {
        std::size_t i = (next_ + capacity_ - kept_) % (capacity_ ? capacity_ : 1);
        for (std::size_t n = 0; n < kept_; ++n) {
            f(slots_[i], sites_ ? &sites_[i] : nullptr);
            if (++i == capacity_) i = 0;
        }
    }

    std::uint64_t recorded() const noexcept { return recorded_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool stacks() const noexcept { return stacks_; }

    // The newest `capacity` events of several rings, in time order, as one
    // ring (what a ThreadCached pool keeps of its exited threads' magazines).
    static std::unique_ptr<history_ring> merge(const std::vector<const history_ring*>& rings, history_config cfg) {
        std::vector<std::pair<history_slot, const call_site*>> all;
        std::uint64_t recorded = 0;
        for (const auto* r : rings) {
            recorded += r->recorded_;
            r->for_each([&](const history_slot& s, const call_site* c) { all.emplace_back(s, c); });
        }
        std::stable_sort(all.begin(), all.end(),
                         [](const auto& a, const auto& b) { return a.first.ticks < b.first.ticks; });
        auto out = std::make_unique<history_ring>(cfg);
        const std::size_t first = all.size() > cfg.capacity ? all.size() - cfg.capacity : 0;
        for (std::size_t i = first; i < all.size(); ++i) out->put(all[i].first, all[i].second);
        out->recorded_ = recorded;
        return out;
    }

private:
    void put(const history_slot& s, const call_site* site) noexcept {
        ++recorded_;
        if (!slots_) [[unlikely]] {
            if (!make_storage()) return;
        }
        slots_[next_] = s;
        // rdtsc is not ordered with the instructions around it: keep one
        // ring's events in the order recorded, so the merge by time does too.
        if (s.ticks < last_ticks_) slots_[next_].ticks = last_ticks_;
        last_ticks_ = slots_[next_].ticks;
        if (sites_) {
            if (site) sites_[next_] = *site;
            else sites_[next_].count = 0;
        }
        if (++next_ == capacity_) next_ = 0;
        if (kept_ < capacity_) ++kept_;
    }

    bool make_storage() noexcept {
        slots_.reset(new (std::nothrow) history_slot[capacity_]);
        if (slots_ && stacks_) sites_.reset(new (std::nothrow) call_site[capacity_]);  // none: no call sites
        return slots_ != nullptr;
    }

    std::unique_ptr<history_slot[]> slots_;
    std::unique_ptr<call_site[]> sites_;
    std::size_t capacity_;
    std::size_t next_ = 0;  // the slot the next event fills
    std::size_t kept_ = 0;
    std::uint64_t recorded_ = 0;
    std::uint64_t last_ticks_ = 0;
    bool stacks_;
};

// A snapshot's gathering of rings (under their locks), made into a History
// after the locks are let go: there the ticks become nanoseconds and the
// call sites names.
class history_events {
public:
    explicit history_events(std::size_t capacity) : capacity_(capacity) {}

    void add(const history_ring& r) {
        recorded_ += r.recorded();
        r.for_each([&](const history_slot& s, const call_site* c) { raw_.push_back({s, c ? *c : call_site{}}); });
    }

    History finish(call_site_names& names) {
        std::stable_sort(raw_.begin(), raw_.end(),
                         [](const entry& a, const entry& b) { return a.slot.ticks < b.slot.ticks; });
        const std::size_t first = raw_.size() > capacity_ ? raw_.size() - capacity_ : 0;
        const tick_clock clock;
        History h;
        h.capacity = capacity_;
        h.recorded = recorded_;
        h.events.reserve(raw_.size() - first);
        for (std::size_t i = first; i < raw_.size(); ++i) {
            const history_slot& s = raw_[i].slot;
            HistoryEvent e;
            e.t_ns = clock.to_ns(s.ticks);
            e.action = s.action;
            e.hit = s.hit;
            e.id = s.id;
            e.bytes_requested = s.requested;
            e.bytes_held = s.held;
            e.bucket_size = s.exact || s.id == 0 ? 0 : s.held;
            if (s.tag) e.tag = s.tag;
            if (raw_[i].site.count) e.frames = names.frames(raw_[i].site);
            h.events.push_back(std::move(e));
        }
        h.dropped = h.recorded - h.events.size();
        return h;
    }

private:
    struct entry {
        history_slot slot;
        call_site site;
    };
    std::size_t capacity_;
    std::uint64_t recorded_ = 0;
    std::vector<entry> raw_;
};

// CLPOOL_HISTORY: a whole number of events, 0 (off) to max_history_events.
inline std::size_t parse_history_events(std::string_view name, std::string_view text) {
    const std::string s(text);
    const bool digits = !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    const std::size_t n = digits ? std::stoull(s) : 0;
    if (!digits || n > max_history_events)
        throw config_error("clpool: " + std::string(name) + "='" + s +
                           "' is not a whole number of events between 0 and " + std::to_string(max_history_events) +
                           " (e.g. 100000; 0 turns the history off)");
    return n;
}

// CLPOOL_HISTORY_STACKS: 0/1 (also false/true, off/on, no/yes).
inline bool parse_history_stacks(std::string_view name, std::string_view text) {
    for (auto t : {"1", "true", "on", "yes"})
        if (text == t) return true;
    for (auto f : {"0", "false", "off", "no"})
        if (text == f) return false;
    throw config_error("clpool: " + std::string(name) + "='" + std::string(text) + "' is not a boolean; use 0 or 1");
}

// What every pool records from its construction: CLPOOL_HISTORY and
// CLPOOL_HISTORY_STACKS, read once per process. Throws config_error (from
// every pool's constructor) if either is invalid. Read here, not through
// runtime/config.hpp, because Pool (core) is its reader.
inline history_config history_default() {
    struct setting {
        std::optional<history_config> value;
        std::string error;
    };
    static const setting s = []() -> setting {
        try {
            history_config c;
            if (const char* v = std::getenv("CLPOOL_HISTORY")) c.capacity = parse_history_events("CLPOOL_HISTORY", v);
            if (const char* v = std::getenv("CLPOOL_HISTORY_STACKS"))
                c.stacks = parse_history_stacks("CLPOOL_HISTORY_STACKS", v);
            return {c, {}};
        } catch (const config_error& e) {
            return {std::nullopt, e.what()};
        }
    }();
    if (!s.value) throw config_error(s.error);
    return *s.value;
}

}  // namespace clpool::detail
