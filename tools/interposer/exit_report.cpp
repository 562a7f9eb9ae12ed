// The exit report (CLPOOL_REPORT=1) and clpool_interpose_get_counters: hit rates, bytes, fallbacks.
#include "state.hpp"
#include "clpool_interpose.h"

#include <clpool/runtime/config.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace clpool::interpose {
namespace {

bool read_report_setting() {
    const auto s = config::read_setting<bool>("CLPOOL_REPORT", false, config::parse_bool);
    if (!s.value) {
        std::fprintf(stderr, "%s; the report stays off\n", s.error.c_str());
        return false;
    }
    return *s.value;
}

// Hits as a percentage of hits and misses; 0 with neither.
double rate_of(std::uint64_t hits, std::uint64_t misses) {
    return hits + misses ? 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
}

// Makes no OpenCL call: runs at exit. Waits briefly for the lock, then gives up.
void report(State& st) {
    std::unique_lock lock(st.mu, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!lock.owns_lock()) {
        std::fprintf(stderr, "clpool: report skipped: the interposer was busy at exit\n");
        return;
    }
    std::uint64_t hits = st.closed.hits, misses = st.closed.misses, evictions = st.closed.evictions;
    std::size_t held = 0, cached = 0, pending = 0, peak = st.closed.peak_held;
    for (auto& [c, cs] : st.contexts) {
        for (auto& [flags, pool] : cs->pools) {
            const auto s = pool->stats();
            // As in the total: a bucket sent back to wait for its fence was not a reuse.
            const auto r = cs->rewaits.find(pool.get());
            const std::uint64_t pool_hits = s.hits - (r == cs->rewaits.end() ? 0 : std::min(r->second, s.hits));
            std::fprintf(stderr,
                         "clpool: ctx 0x%x flags 0x%" PRIx64 ": hits %" PRIu64 " misses %" PRIu64
                         " hit_rate %.1f%% held %zu B cached %zu B evictions %" PRIu64 "\n",
                         cs->token, static_cast<std::uint64_t>(flags), pool_hits, s.misses,
                         rate_of(pool_hits, s.misses), s.bytes_allocated, s.bytes_cached, s.evictions);
            hits += s.hits;
            misses += s.misses;
            evictions += s.evictions;
            held += s.bytes_allocated;
            cached += s.bytes_cached;
            pending += s.bytes_pending;
            peak = std::max(peak, s.peak_bytes_allocated);
        }
    }
    hits -= st.rewaits;  // a bucket sent back to wait for its fence was not a reuse
    const double rate = rate_of(hits, misses);
    std::fprintf(stderr,
                 "clpool: interposer (%s) total: hits %" PRIu64 " misses %" PRIu64 " hit_rate %.1f%% evictions %" PRIu64
                 " held %zu B cached %zu B pending %zu B peak_pool_held %zu B passthrough %" PRIu64
                 " fallbacks %" PRIu64 " sub_buffers %" PRIu64 " oom_retries %" PRIu64 "\n",
                 st.mode, hits, misses, rate, evictions, held, cached, pending, peak, st.passthrough.load(),
                 st.fallbacks.load(), st.sub_buffers.load(), st.oom_retries.load());
}

void at_exit() noexcept {
    State& st = state();
    if (st.report && st.saw_context) report(st);
    if (st.trace) st.trace->flush();
}

}  // namespace

void arm_exit_report(State& st) {
    st.report = read_report_setting();
    std::atexit(at_exit);
}

}  // namespace clpool::interpose

extern "C" __attribute__((visibility("default"))) int clpool_interpose_get_counters(clpool_interpose_counters* out) {
    using namespace clpool::interpose;
    State& st = state();
    clpool_interpose_counters c{};
    std::lock_guard lock(st.mu);
    c.hits = st.closed.hits;
    c.misses = st.closed.misses;
    c.evictions = st.closed.evictions;
    for (auto& [ctx, cs] : st.contexts) {
        ++c.contexts_open;
        for (auto& [flags, pool] : cs->pools) {
            const auto s = pool->stats();
            ++c.pools_open;
            c.hits += s.hits;
            c.misses += s.misses;
            c.evictions += s.evictions;
            c.bytes_cached += s.bytes_cached;
            c.bytes_pending += s.bytes_pending;
            c.bytes_held += s.bytes_allocated;
        }
    }
    for (auto& [m, rec] : st.mems) c.live_buffers += (rec->refs > 0 && !rec->parent);
    c.hits -= st.rewaits;  // a bucket sent back to wait for its fence was not a reuse
    c.passthrough = st.passthrough;
    c.fallbacks = st.fallbacks;
    c.sub_buffers = st.sub_buffers;
    c.oom_retries = st.oom_retries;
    *out = c;
    return 0;
}
