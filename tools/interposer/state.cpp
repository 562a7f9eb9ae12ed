// The core's state model (state.hpp): the one State, tombstones, pools per context, and buckets going back.
#include "state.hpp"
#include "next.hpp"

#include <clpool/core/detail/fork_locks.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace clpool::interpose {

const cl_icd_dispatch* g_next = nullptr;

State& state() {
    static State* s = [] {
        auto* st = new State;
        // Taken around fork() (outermost of clpool's locks): a fork child
        // never starts with it held by a thread it does not have.
        detail::fork_locks::add_mutex(detail::fork_rank::interposer_state, st->mu);
        arm_exit_report(*st);
        if (const char* path = std::getenv("CLPOOL_TRACE"); path && *path) {
            if (FILE* f = std::fopen(path, "w")) st->trace = new Trace(f);
            else
                std::fprintf(stderr, "clpool: CLPOOL_TRACE='%s' cannot be opened for writing (%s); no trace\n", path,
                             std::strerror(errno));
        }
        return st;
    }();
    return *s;
}

namespace core {
void set_mode(const char* mode) noexcept { state().mode = mode; }
}  // namespace core

void release_dead_subs(State& st, MemRec* rec) noexcept {
    for (cl_mem sub : rec->dead_subs) {
        next().clReleaseMemObject(sub);
        st.mems.erase(sub);
    }
    rec->dead_subs.clear();
}

void destroy_tombstone(State& st, MemRec* rec) noexcept {
    release_dead_subs(st, rec);
    rec->block.release();     // empty unless the context closed before the release
    st.mems.erase(rec->mem);  // destroys rec
}

void give_back(State& st, ContextState& cs) {
    drop_tombstones(st, [&](const MemRec* r) { return r->ctx.get() == &cs; });
    for (auto& [flags, pool] : cs.pools) pool->trim();
}

std::shared_ptr<PoolT> pool_for(ContextState& cs, cl_mem_flags key) {
    auto& slot = cs.pools[key];
    if (!slot) {
        if (!cs.device) cs.device = opencl::context_devices(cs.ctx)[0];
        slot = std::make_shared<PoolT>(WatchedBackend(cl::Context(cs.ctx, true), cs.device, key), RecordingCapped{});
    }
    return slot;
}

std::shared_ptr<ContextState> open_context(State& st, cl_context c) {
    auto it = st.contexts.find(c);
    return it == st.contexts.end() ? nullptr : it->second;
}

static void fold_stats(State& st, const PoolT& pool) {
    const auto s = pool.stats();
    st.closed.hits += s.hits;
    st.closed.misses += s.misses;
    st.closed.evictions += s.evictions;
    st.closed.peak_held = std::max(st.closed.peak_held, s.peak_bytes_allocated);
}

void close_context(State& st, const std::shared_ptr<ContextState>& cs) {
    cs->open = false;
    drop_tombstones(st, [&](const MemRec* r) { return r->ctx == cs; });
    for (auto& [flags, pool] : cs->pools) fold_stats(st, *pool);
    cs->pools.clear();  // buffers still lent become orphans, freed on release
    cs->order.close();
    if (cs->writer) next().clReleaseCommandQueue(cs->writer);
    cs->writer = nullptr;
    std::erase_if(st.queues, [&](const auto& q) { return q.second.ctx == cs; });
}

void ContextBuffers::each(const std::function<void(reuse::BufferMark&, bool cached)>& f) {
    for (auto& [m, rec] : st_.mems)
        if (rec->ctx.get() == &cs_ && !rec->parent) f(rec->reuse, rec->refs == 0 && rec->live_subs == 0);
}

// Hands the bucket in h (rec's, or about to be) back to its pool behind
// `events`; a bucket the cap sends to the driver takes rec's tombstone with it.
static void put_back(State& st, MemRec* rec, PoolT::handle& h, const std::vector<cl::Event>& events) {
    tl_admitted = false;
    h.release_after(events.data(), events.size());
    if (!tl_admitted) destroy_tombstone(st, rec);
}

// Takes over the protocol's event references; on failure releases them and throws.
static std::vector<cl::Event> adopt(const std::vector<cl_event>& events) {
    std::vector<cl::Event> out;
    try {
        out.reserve(events.size());
    } catch (...) {
        for (cl_event e : events) clReleaseEvent(e);
        throw;
    }
    for (cl_event e : events) out.emplace_back(e, false);
    return out;
}

void recycle(State& st, MemRec* rec) {
    ContextState& cs = *rec->ctx;
    if (!cs.open) {  // the context's pools are gone: free at once (the driver waits for running commands)
        destroy_tombstone(st, rec);
        return;
    }
    std::vector<cl::Event> events;
    try {
        events = adopt(cs.order.release(rec->reuse));
    } catch (...) {
        cs.order.finish_all();  // cannot fence: wait instead
    }
    put_back(st, rec, rec->block, events);
}

reissue check_reissue(State& st, ContextState& cs, PoolT::handle& h, bool core_writes) noexcept {
    auto t = st.mems.find(h.buffer()());
    if (t == st.mems.end()) return reissue::ok;  // a new bucket
    MemRec* rec = t->second.get();
    const std::uint64_t unfenced = rec->reuse.unfenced;
    try {
        reuse::Reissue r = cs.order.reissue(rec->reuse, core_writes);
        if (!r.wait) return reissue::ok;
        const std::vector<cl::Event> events = adopt(r.events);
        ++st.rewaits;
        put_back(st, rec, h, events);
        return reissue::wait;
    } catch (...) {
        rec->reuse.unfenced = unfenced;  // unfenced still: the next reissue fences it
        return reissue::fail;            // the caller gives up; h goes back as it came
    }
}

}  // namespace clpool::interpose
