// The core's state model (state.hpp): the one State, tombstones, pools per context, and buckets going back.
#include "state.hpp"
#include "next.hpp"

#include <clpool/platform/fork_locks.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace clpool::interpose {

const cl_icd_dispatch* g_next = nullptr;

State& state() {
    static State* s = [] {
        auto* st = new State;
        // Taken around fork() (outermost of clpool's locks but the global shape trie's stripes): a fork child
        // never starts with it held by a thread it does not have.
        detail::fork_locks::add_mutex(detail::fork_rank::interposer_state, st->mu);
        arm_exit_report(*st);
        arm_snapshot();
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

void destroy_tombstone(State& st, MemRec* rec) noexcept {
    rec->block.release();     // empty unless the context closed before the release
    st.mems.erase(rec->mem);  // destroys rec
}

namespace {

using Callbacks = std::vector<std::pair<core::mem_notify, void*>>;

void run_callbacks(cl_mem m, const Callbacks& callbacks) noexcept {
    app_scope as_app;  // their OpenCL calls are the application's
    for (auto cb = callbacks.rbegin(); cb != callbacks.rend(); ++cb) cb->first(m, cb->second);  // last registered first
}

// Work waiting for its fences; the last fence to complete does it.
struct Countdown {
    DueCallbacks work;
    std::atomic<std::size_t> left;
};

void CL_CALLBACK on_fence(cl_event /*e*/, cl_int /*status*/, void* p) {
    auto* c = static_cast<Countdown*>(p);
    if (c->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    run_callbacks(c->work.mem, c->work.callbacks);
    if (c->work.unpark) look_at_parked(c->work.unpark);
    delete c;
}

}  // namespace

void look_at_parked(const std::shared_ptr<ContextState>& cs) noexcept {
    core_scope guard;  // a driver thread, or a call the core makes: the core's own calls go down
    State& st = state();
    std::vector<DueCallbacks> due;
    {
        std::lock_guard lock(st.mu);
        if (!cs->open || cs->parked.empty()) return;
        unpark(st, *cs, due);  // still held: the next creation in the context or clFinish looks again
    }
    run_due(due);
}

void run_due(std::vector<DueCallbacks>& due) noexcept {
    for (DueCallbacks& d : due) {
        std::vector<cl_event> events = std::move(d.events);
        Countdown* c = events.empty() ? nullptr : new (std::nothrow) Countdown{std::move(d), {}};
        if (!c) {  // nothing to wait for, or no memory to wait with: wait here
            if (!events.empty()) clWaitForEvents(static_cast<cl_uint>(events.size()), events.data());
            run_callbacks(d.mem, d.callbacks);
            if (d.unpark) look_at_parked(d.unpark);
        } else {
            c->left.store(events.size(), std::memory_order_relaxed);
            for (cl_event e : events)
                if (clSetEventCallback(e, CL_COMPLETE, on_fence, c) != CL_SUCCESS) {
                    clWaitForEvents(1, &e);
                    on_fence(e, CL_COMPLETE, c);
                }
        }
        for (cl_event e : events) clReleaseEvent(e);
    }
    due.clear();
}

void give_back(State& st, ContextState& cs) {
    drop_tombstones(st, [&](const MemRec* r) { return r->ctx.get() == &cs; });
    for (auto& [flags, pool] : cs.pools) pool->trim();
}

void give_back_svm(State& st, ContextState& cs) noexcept {
    std::vector<std::shared_ptr<SVMPoolT>> pools;
    try {
        std::lock_guard lock(st.mu);
        for (auto& [flags, pool] : cs.svm_pools)
            if (pool) pools.push_back(pool);
    } catch (...) {  // out of host memory too: nothing more to give
    }
    for (auto& pool : pools) pool->trim();
}

std::shared_ptr<PoolT> pool_for(ContextState& cs, cl_mem_flags key) {
    if (auto it = cs.pools.find(key); it != cs.pools.end()) return it->second;
    // Made before it goes into the map: every walk of cs.pools may take each entry to be a pool.
    if (!cs.device) cs.device = opencl::context_devices(cs.ctx)[0];
    auto pool = std::make_shared<PoolT>(WatchedBackend(cl::Context(cs.ctx, true), cs.device, key), RecordingCapped{});
    pool->backend().pool = pool.get();
    cs.pools.emplace(key, pool);
    return pool;
}

namespace {
thread_local std::unique_lock<decltype(State::mu)> tl_trim_lock;  // held from the driver's failure to the pool's retry
}  // namespace

void oom_trim_begins() noexcept { tl_trim_lock = std::unique_lock(state().mu); }

bool oom_trim_pending() noexcept { return tl_trim_lock.owns_lock(); }

void oom_trim_ends(const void* pool) noexcept {
    drop_tombstones(state(), [&](const MemRec* r) { return r->pool == pool; });
    tl_trim_lock.unlock();
}

std::shared_ptr<ContextState> open_context(State& st, cl_context c) {
    auto it = st.contexts.find(c);
    return it == st.contexts.end() ? nullptr : it->second;
}

// Reading a pool's stats allocates; out of host memory the closing pool's
// counts are lost to the totals (said on stderr) rather than the release failing.
template <class P>
static void fold_stats(Totals& closed, const P& pool) noexcept {
    try {
        const auto s = pool.stats();
        closed.hits += s.hits;
        closed.misses += s.misses;
        closed.evictions += s.evictions;
        closed.peak_held = std::max(closed.peak_held, s.peak_bytes_allocated);
    } catch (...) {
        std::fprintf(stderr, "clpool: out of host memory: a closed pool's hits and misses are not in the totals\n");
    }
}

void close_context(State& st, const std::shared_ptr<ContextState>& cs, std::vector<DueCallbacks>& due) {
    cs->open = false;
    for (cl_mem m : cs->parked)
        if (auto it = st.mems.find(m); it != st.mems.end()) {
            it->second->parked = false;
            recycle(st, it->second.get(), due);  // closed: to the driver, which keeps it for its holders
        }
    cs->parked.clear();
    drop_tombstones(st, [&](const MemRec* r) { return r->ctx == cs; });
    for (auto& [flags, pool] : cs->pools) fold_stats(st.closed, *pool);
    cs->pools.clear();  // buffers still lent become orphans, freed on release
    for (auto& [flags, pool] : cs->svm_pools)
        if (pool) fold_stats(st.svm_closed, *pool);
    // cs->svm_pools are the caller's to destroy, outside State::mu: they free their pending
    // allocations only after their clEnqueueSVMFree events, which can wait for an application
    // callback that frees through the core. SVM pointers still lent are freed at their clSVMFree.
    cs->order.close();
    if (cs->writer) next().clReleaseCommandQueue(cs->writer);
    cs->writer = nullptr;
    std::erase_if(st.queues, [&](const auto& q) { return q.second.ctx == cs; });
}

void ContextBuffers::each(const std::function<void(reuse::BufferMark&, bool cached)>& f) {
    for (auto& [m, rec] : st_.mems)
        if (rec->ctx.get() == &cs_ && !rec->parent) f(rec->reuse, is_tombstone(*rec));
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

// The application's destructor callbacks, due when the commands enqueued so
// far have completed (the driver deletes a released buffer then). Never throws:
// without the events, the callbacks wait for the queues' clFinish instead.
static void callbacks_due(ContextState& cs, MemRec* rec, std::vector<DueCallbacks>& due) noexcept {
    if (rec->callbacks.empty()) return;
    try {
        due.emplace_back();  // callers reserve room first: this throws only when that failed too
    } catch (...) {  // they cannot run under the lock (they may call the interposer): say so
        std::fprintf(stderr, "clpool: out of host memory: %zu destructor callback(s) of %p not run\n",
                     rec->callbacks.size(), static_cast<void*>(rec->mem));
        rec->callbacks.clear();
        return;
    }
    DueCallbacks& d = due.back();
    d.mem = rec->mem;
    d.callbacks.swap(rec->callbacks);
    try {
        if (cs.open) d.events = cs.order.completion();
    } catch (...) {
        cs.order.finish_all();
    }
}

void recycle(State& st, MemRec* rec, std::vector<DueCallbacks>& due) {
    ContextState& cs = *rec->ctx;
    callbacks_due(cs, rec, due);
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

// With command buffers in use, a recording may hold a bucket the core never
// saw; the driver's own count says so (the pool's reference is one). On
// PoCL, commands still queued count too: those buckets wait here instead of
// behind their fences, which is as safe.
static bool held_by_driver(const State& st, const MemRec* rec) noexcept {
    if (!st.watch_driver_refs.load(std::memory_order_relaxed) || !rec->ctx->open) return false;
    cl_uint refs = 1;
    return next().clGetMemObjectInfo(rec->mem, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, nullptr) == CL_SUCCESS &&
           refs > 1;
}

void let_go(State& st, MemRec* rec, std::vector<DueCallbacks>& due) {
    if (held_by_driver(st, rec)) {
        ContextState& cs = *rec->ctx;
        try {
            cs.parked.push_back(rec->mem);
        } catch (...) {  // no room to watch it: it goes back now, as without command buffers
            recycle(st, rec, due);
            return;
        }
        rec->parked = true;
        // Its callbacks run once the commands queued so far have completed, as
        // they would have (a recording that still holds it does not delay them);
        // the bucket waits until the driver's count is the pool's alone.
        callbacks_due(cs, rec, due);
        try {  // look again then, too
            due.emplace_back();
            due.back().unpark = rec->ctx;
            due.back().events = cs.order.completion();
        } catch (...) {  // the next creation in the context, or clFinish, looks again
        }
        return;
    }
    recycle(st, rec, due);
}

void unpark(State& st, ContextState& cs, std::vector<DueCallbacks>& due) noexcept {
    for (std::size_t i = 0; i < cs.parked.size();) {
        auto it = st.mems.find(cs.parked[i]);
        MemRec* rec = it == st.mems.end() ? nullptr : it->second.get();
        if (rec && held_by_driver(st, rec)) {
            ++i;
            continue;
        }
        cs.parked[i] = cs.parked.back();
        cs.parked.pop_back();
        if (!rec) continue;
        rec->parked = false;
        try {
            recycle(st, rec, due);
        } catch (...) {  // cannot order its reuse: the bucket stays out of the pool
        }
    }
}

// A bucket a pool handed out that goes back to wait for a fence: counted in
// all and per pool (the exit report), the latter lost out of host memory.
static void note_rewait(State& st, ContextState& cs, const PoolT* pool) noexcept {
    ++st.rewaits;
    try {
        ++cs.rewaits[pool];
    } catch (...) {  // the pool's line then counts it as a hit
    }
}

// A bucket whose tombstone is gone while its old owner's commands may still
// run: a tombstone again, back in its pool behind everything enqueued so far.
static reissue refence(State& st, const std::shared_ptr<ContextState>& cs, PoolT::handle& h) noexcept {
    try {
        auto owned = std::make_unique<MemRec>();
        owned->mem = h.buffer()();
        owned->ctx = cs;
        owned->refs = 0;
        owned->pool = h.pool();
        const std::vector<cl::Event> events = adopt(cs->order.completion());
        MemRec* rec = owned.get();
        st.mems.emplace(rec->mem, std::move(owned));
        note_rewait(st, *cs, h.pool());
        put_back(st, rec, h, events);
        return reissue::wait;
    } catch (...) {
        return reissue::fail;  // the caller gives up; h goes back as it came, and is refenced when next taken
    }
}

reissue check_reissue(State& st, const std::shared_ptr<ContextState>& cs, PoolT::handle& h, bool core_writes,
                      bool known) noexcept {
    auto t = st.mems.find(h.buffer()());
    if (t == st.mems.end()) return known ? reissue::ok : refence(st, cs, h);
    MemRec* rec = t->second.get();
    const std::uint64_t unfenced = rec->reuse.unfenced;
    try {
        reuse::Reissue r = cs->order.reissue(rec->reuse, core_writes);
        if (!r.wait) return reissue::ok;
        const std::vector<cl::Event> events = adopt(r.events);
        note_rewait(st, *cs, h.pool());
        put_back(st, rec, h, events);
        return reissue::wait;
    } catch (...) {
        rec->reuse.unfenced = unfenced;  // unfenced still: the next reissue fences it
        return reissue::fail;  // the caller gives up; h goes back as it came
    }
}

}  // namespace clpool::interpose
