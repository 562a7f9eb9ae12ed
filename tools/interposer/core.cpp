// The interception core: per-(context, flags) pools behind the application's clCreateBuffer, with
// the application's reference counts, queries and callbacks kept as OpenCL promises them.
//
// How a pooled buffer looks to the application (docs/DROPIN.md has the why):
// the application's handle is the pool's bucket buffer itself (power-of-two
// size). The core answers the queries that would show the bucket
// (CL_MEM_SIZE, CL_MEM_REFERENCE_COUNT, CL_MEM_FLAGS) and checks buffer
// transfers and sub-buffers against the size the application asked for.
// (A sub-buffer of the bucket would let the driver answer, but PoCL 3.1
// crashes on rectangular and image copies of sub-buffers.) The core keeps the
// application's reference count itself; when it reaches zero the
// application's destructor callbacks fire, and once the buffer's own
// sub-buffers are gone the bucket goes back to the pool behind a marker on
// every queue of the context (none while the context's only queue is in
// order: see lone_queue and end_unfenced). The record stays as a tombstone while the
// bucket sits in the cache (the driver object is alive: the pool holds it),
// so a second release is answered CL_INVALID_MEM_OBJECT; it is dropped the
// moment the bucket goes back to the driver.
#include "core.hpp"
#include "next.hpp"
#include "clpool_interpose.h"
#include "common/trace_format.hpp"

#include <clpool/runtime/config.hpp>
#include <clpool/pools/opencl_pools.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unistd.h>

namespace clpool::interpose {

const cl_icd_dispatch* g_next = nullptr;

namespace {

namespace fmt = tools::trace_format;

// Capped (CLPOOL_MAX_CACHED_GB, 16 per bucket), but telling the core whether
// its last answer kept the buffer: a bucket the cap sends back to the driver
// must take its tombstone with it.
thread_local bool tl_admitted = false;
struct RecordingCapped : EnvironmentCapped {
    bool admit(std::size_t bucket_bytes, std::size_t cached_total, std::size_t in_bucket) const noexcept {
        tl_admitted = Capped::admit(bucket_bytes, cached_total, in_bucket);
        return tl_admitted;
    }
};
static_assert(LimitPolicy<RecordingCapped>);

// OpenCLBackend, telling the core when the driver ran out of memory: the pool
// then trims itself before retrying, and the tombstones of the buckets it
// gave back must go.
thread_local bool tl_driver_oom = false;
struct WatchedBackend : OpenCLBackend {
    using OpenCLBackend::OpenCLBackend;
    allocation<cl::Buffer> allocate(std::size_t n, memory_kind kind) noexcept {
        auto a = OpenCLBackend::allocate(n, kind);
        if (a.status == alloc_status::out_of_memory) tl_driver_oom = true;
        return a;
    }
};
static_assert(Backend<WatchedBackend>);

using PoolT = Pool<PowerOfTwoBuckets, DeviceLocal, RecordingCapped, SingleMutex, WatchedBackend>;

constexpr cl_mem_flags access_bits = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
constexpr cl_mem_flags host_access_bits = CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;
constexpr cl_mem_flags poolable_bits = access_bits | host_access_bits | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;

struct ContextState {
    cl_context ctx = nullptr;
    cl_uint refs = 1;  // the application's count
    unsigned token = 0;
    bool open = true;  // false once the application released it
    cl_device_id device = nullptr;
    std::map<cl_mem_flags, std::shared_ptr<PoolT>> pools;  // shared: an allocation in flight keeps its pool
    std::vector<cl_command_queue> queues;  // the application's live queues
    std::vector<cl_event> retired;         // markers on queues the application released
    // Buffers that went back to the pool with no fence (their lone in-order
    // queue orders the reuse; see lone_queue) are numbered 1, 2, ... in
    // `released`; those numbered up to `covered` need nothing more (a clFinish
    // on that queue returned after their release, or end_unfenced fenced them).
    std::uint64_t released = 0, covered = 0;
    // Fences every queue created from now on starts behind (a barrier), while
    // they run: live buffers reissued with no fence may go to the new queue
    // while their old owner's commands still wait on the old one.
    std::vector<cl_event> handovers;
    cl_command_queue writer = nullptr;     // the core's queue for CL_MEM_COPY_HOST_PTR data
};

struct MemRec {
    cl_mem mem = nullptr;  // the application's handle: the bucket, or a sub-buffer of it
    std::shared_ptr<ContextState> ctx;
    cl_mem_flags flags = 0;  // as asked
    std::size_t size = 0;    // as asked
    cl_uint refs = 1;        // the application's count; 0 = freed (a tombstone)
    MemRec* parent = nullptr;  // application sub-buffers: the pooled buffer they are part of
    std::size_t live_subs = 0;
    std::vector<cl_mem> dead_subs;  // freed sub-buffers kept alive with their parent's tombstone
    std::vector<std::pair<core::mem_notify, void*>> callbacks;
    PoolT::handle block;     // pooled buffers: the bucket, until recycled
    PoolT* pool = nullptr;   // pooled buffers: where the bucket goes back
    std::uint64_t trace_id = 0;
    // Pooled buffers: the bucket went back to the pool with no fence, behind its
    // context's lone in-order queue, as its number `unfenced` (0: with a fence;
    // kept while reissued: its old owner's commands may still be queued) ...
    std::uint64_t unfenced = 0;
    // ... or, once that queue stopped being alone, the fence it waits for
    // before it is handed out again (a tombstone; checked in create_pooled).
    cl::Event fence;
};

struct QueueRec {
    std::shared_ptr<ContextState> ctx;
    cl_uint refs = 1;
    bool in_order = false;  // false when out-of-order, or possibly so (unknown, clSetCommandQueueProperty)
};

struct Totals {  // stats of pools already destroyed
    std::uint64_t hits = 0, misses = 0, evictions = 0;
    std::size_t peak_held = 0;  // the largest any one pool ever held
};

// The trace: one line per event, in the format of common/trace_format.hpp.
class Trace {
public:
    explicit Trace(FILE* f) : f_(f), t0_(std::chrono::steady_clock::now()) {
        static char buffer[1 << 16];
        std::setvbuf(f_, buffer, _IOFBF, sizeof buffer);
        char note[64];
        std::snprintf(note, sizeof note, "pid %ld; written by libclpool_interpose", static_cast<long>(getpid()));
        char line[fmt::max_line];
        write(line, fmt::format_header(line, sizeof line, note));
    }
    std::uint64_t alloc(unsigned ctx_token, cl_mem_flags flags, std::size_t bytes) noexcept {
        std::lock_guard lock(mu_);
        const std::uint64_t id = ++last_id_;
        char line[fmt::max_line];
        write(line, fmt::format_alloc(line, sizeof line, now(), id, ctx_token, flags, bytes));
        return id;
    }
    void free(std::uint64_t id) noexcept {
        std::lock_guard lock(mu_);
        char line[fmt::max_line];
        write(line, fmt::format_free(line, sizeof line, now(), id));
    }
    void flush() noexcept {
        if (!mu_.try_lock()) return;  // exit during a write on another thread: lose the tail, never hang
        std::fflush(f_);
        mu_.unlock();
    }

private:
    std::uint64_t now() const noexcept {
        const auto dt = std::chrono::steady_clock::now() - t0_;
        // Strictly increasing, so the replay's order is the file's order.
        std::uint64_t t = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
        if (t <= last_t_) t = last_t_ + 1;
        last_t_ = t;
        return t;
    }
    // n as snprintf returned it: a line that did not fit is not written.
    void write(const char* line, int n) noexcept {
        if (n > 0 && static_cast<std::size_t>(n) < fmt::max_line) std::fwrite(line, 1, static_cast<std::size_t>(n), f_);
    }
    std::mutex mu_;
    FILE* f_;
    std::chrono::steady_clock::time_point t0_;
    std::uint64_t last_id_ = 0;
    mutable std::uint64_t last_t_ = 0;
};

struct State {
    std::mutex mu;
    std::unordered_map<cl_context, std::shared_ptr<ContextState>> contexts;
    std::unordered_map<cl_command_queue, QueueRec> queues;
    std::unordered_map<cl_mem, std::unique_ptr<MemRec>> mems;
    Totals closed;
    unsigned next_token = 0;
    std::uint64_t rewaits = 0;  // buckets a pool handed out that went back to wait for a fence (counted as hits)
    std::atomic<std::uint64_t> passthrough{0}, fallbacks{0}, sub_buffers{0}, oom_retries{0};
    std::atomic<bool> saw_context{false};
    bool report = false;
    Trace* trace = nullptr;
    const char* mode = "preload";
};

void at_exit() noexcept;

bool read_report_setting() {
    const auto s = config::read_setting<bool>("CLPOOL_REPORT", false, config::parse_bool);
    if (!s.value) {
        std::fprintf(stderr, "%s; the report stays off\n", s.error.c_str());
        return false;
    }
    return *s.value;
}

State& state() {
    // Never destroyed: the exit report must not race a static destructor, and
    // no OpenCL call may run at exit.
    static State* s = [] {
        auto* st = new State;
        st->report = read_report_setting();
        if (const char* path = std::getenv("CLPOOL_TRACE"); path && *path) {
            if (FILE* f = std::fopen(path, "w"))
                st->trace = new Trace(f);
            else
                std::fprintf(stderr, "clpool: CLPOOL_TRACE='%s' cannot be opened for writing (%s); no trace\n", path,
                             std::strerror(errno));
        }
        std::atexit(at_exit);
        return st;
    }();
    return *s;
}

// Fills an info query's answer as the driver would: CL_INVALID_VALUE when the
// caller's room is too small.
template <class T>
cl_int answer(const T& v, std::size_t size, void* value, std::size_t* size_ret) {
    if (value) {
        if (size < sizeof(T)) return CL_INVALID_VALUE;
        std::memcpy(value, &v, sizeof(T));
    }
    if (size_ret) *size_ret = sizeof(T);
    return CL_SUCCESS;
}

bool poolable(cl_mem_flags flags, std::size_t size, const void* host_ptr) noexcept {
    if (size == 0 || (flags & ~poolable_bits) != 0) return false;  // the driver answers errors and rare flags
    if (std::popcount(flags & access_bits) > 1 || std::popcount(flags & host_access_bits) > 1) return false;
    if (flags & CL_MEM_COPY_HOST_PTR) {
        // The copy is an enqueued write, which host-access flags would forbid.
        return host_ptr != nullptr && (flags & host_access_bits) == 0;
    }
    return host_ptr == nullptr;
}

// --- under State::mu from here on -------------------------------------------------------------------

void release_dead_subs(State& st, MemRec* rec) noexcept {
    for (cl_mem sub : rec->dead_subs) {
        next().clReleaseMemObject(sub);
        st.mems.erase(sub);
    }
    rec->dead_subs.clear();
}

// Drops a tombstone: its dead sub-buffers, then the record (the bucket is the pool's).
void destroy_tombstone(State& st, MemRec* rec) noexcept {
    release_dead_subs(st, rec);
    rec->block.release();  // empty unless the context closed before the release
    st.mems.erase(rec->mem);  // destroys rec
}

// Drops every tombstone of the pools `which` accepts (before those pools give
// their buckets back, or after they did).
template <class Which>
void drop_tombstones(State& st, Which which) {
    std::vector<MemRec*> doomed;
    for (auto& [m, rec] : st.mems)
        if (!rec->parent && rec->refs == 0 && which(rec.get())) doomed.push_back(rec.get());
    for (MemRec* rec : doomed) destroy_tombstone(st, rec);
}

void fold_stats(State& st, const PoolT& pool) {
    const auto s = pool.stats();
    st.closed.hits += s.hits;
    st.closed.misses += s.misses;
    st.closed.evictions += s.evictions;
    st.closed.peak_held = std::max(st.closed.peak_held, s.peak_bytes_allocated);
}

// Releases and drops the events that have completed.
void drop_completed(std::vector<cl_event>& events) {
    std::erase_if(events, [](cl_event e) {
        if (!OpenCLBackend::event_complete(cl::Event(e, true))) return false;
        clReleaseEvent(e);
        return true;
    });
}

// A marker on q (flushed: an unflushed marker might never complete), or nullptr.
cl_event marker_on(cl_command_queue q) {
    cl_event marker = nullptr;
    if (clEnqueueMarkerWithWaitList(q, 0, nullptr, &marker) != CL_SUCCESS) return nullptr;
    clFlush(q);
    return marker;
}

// The events a released buffer waits for: a marker on each of the context's
// queues (every command enqueued so far) and the markers of queues already released.
std::vector<cl::Event> fences(ContextState& cs) {
    std::vector<cl::Event> out;
    drop_completed(cs.retired);
    for (cl_event e : cs.retired) out.emplace_back(e, true);
    for (cl_command_queue q : cs.queues) {
        if (cl_event marker = marker_on(q))
            out.emplace_back(marker, false);
        else
            clFinish(q);  // cannot fence: wait instead
    }
    return out;
}

// The context's only queue, when no marker is needed to reuse its buffers:
// the application has exactly one live queue there, in order, and no
// released queue's marker is still pending. A command on a reissued buffer
// must then go through that queue, so it runs after every command the old
// owner enqueued (issue 7: "reuse on the same in-order queue needs no wait").
// nullptr otherwise (several queues, out of order, or in doubt).
cl_command_queue lone_queue(State& st, ContextState& cs) {
    if (cs.queues.size() != 1) return nullptr;
    auto it = st.queues.find(cs.queues[0]);
    if (it == st.queues.end() || !it->second.in_order) return nullptr;
    drop_completed(cs.retired);
    return cs.retired.empty() ? cs.queues[0] : nullptr;
}

// Hands the bucket in h (rec's, or about to be) back to its pool behind
// `events`; a bucket the cap sends to the driver takes rec's tombstone with it.
void put_back(State& st, MemRec* rec, PoolT::handle& h, const cl::Event* events, std::size_t n) {
    tl_admitted = false;
    h.release_after(events, n);
    if (!tl_admitted) destroy_tombstone(st, rec);
}

void give_back(State& st, ContextState& cs);

// Hands a pooled buffer's bucket back (its count and its sub-buffers' are zero).
void recycle(State& st, MemRec* rec) {
    ContextState& cs = *rec->ctx;
    if (!cs.open) {  // the context's pools are gone: free at once (the driver waits for running commands)
        destroy_tombstone(st, rec);
        return;
    }
    rec->fence = cl::Event();
    if (lone_queue(st, cs)) {
        // No marker: the lone queue orders the reuse. end_unfenced fences the
        // bucket if that stops holding before it is reused.
        rec->unfenced = ++cs.released;
        put_back(st, rec, rec->block, nullptr, 0);
        return;
    }
    rec->unfenced = 0;  // the markers cover what its earlier owners enqueued too
    std::vector<cl::Event> events;
    try {
        events = fences(cs);
    } catch (...) {
        for (cl_command_queue q : cs.queues) clFinish(q);
        events.clear();
    }
    put_back(st, rec, rec->block, events.data(), events.size());
}

// The lone queue is about to stop being the only way to the context's
// buffers (a second queue, its own release, out-of-order mode). Every buffer
// that went back with no fence since the last call gets `fence`, an event
// that completes after everything the lone queue had enqueued: a cached one
// waits for it when next handed out (create_pooled); a live one (reissued
// with no fence) may be used on the new queue, so queues created while the
// fence runs start behind it (hold_back). fence == nullptr: no fence could be
// enqueued; the context's cache goes back to the driver, which waits for the
// commands (a live buffer stays unordered then; a clFinish here could hang on
// a user event the application sets later).
void end_unfenced(State& st, ContextState& cs, cl_event fence) {
    if (cs.released == cs.covered) return;
    if (!fence) give_back(st, cs);
    bool live = false;
    for (auto& [m, rec] : st.mems) {
        if (rec->ctx.get() != &cs || rec->parent || rec->unfenced <= cs.covered) continue;
        rec->unfenced = 0;
        if (!fence) continue;
        if (rec->refs == 0 && rec->live_subs == 0)
            rec->fence = cl::Event(fence, true);  // cached
        else
            live = true;
    }
    cs.covered = cs.released;
    if (live && clRetainEvent(fence) == CL_SUCCESS) cs.handovers.push_back(fence);
}

// Makes a new queue start behind the context's pending handover fences.
void hold_back(ContextState& cs, cl_command_queue q) {
    drop_completed(cs.handovers);
    if (cs.handovers.empty()) return;
    // A barrier: later commands wait for it in out-of-order queues too. If it
    // cannot be enqueued, nothing safe is left (waiting could hang).
    clEnqueueBarrierWithWaitList(q, static_cast<cl_uint>(cs.handovers.size()), cs.handovers.data(), nullptr);
}

enum class reissue { ok, wait, fail };

// Whether the bucket in h, just taken from its pool, may be handed out. `wait`:
// it went back behind a fence (it was cached with a fence still running, or
// with no fence and the reuse is not on the lone queue: the core's own
// COPY_HOST_PTR write runs on another queue); the caller asks the pool again.
reissue check_reissue(State& st, ContextState& cs, PoolT::handle& h, bool core_writes) noexcept {
    auto t = st.mems.find(h.buffer()());
    if (t == st.mems.end()) return reissue::ok;  // a new bucket
    MemRec* rec = t->second.get();
    try {
        std::vector<cl::Event> events;
        if (rec->unfenced > cs.covered && (core_writes || !lone_queue(st, cs))) {
            events = fences(cs);
            rec->unfenced = 0;
        } else if (rec->fence() && !OpenCLBackend::event_complete(rec->fence)) {
            events.push_back(rec->fence);
        } else {
            return reissue::ok;
        }
        ++st.rewaits;
        put_back(st, rec, h, events.data(), events.size());
        return reissue::wait;
    } catch (...) {
        return reissue::fail;  // the caller gives up; h goes back as it came (the tombstone keeps its mark)
    }
}

// Gives back everything the context's pools hold but do not lend (the
// out-of-memory answer): tombstones first, since they keep their buckets alive.
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

// Closes a context the application released: its pools, tombstones, queues.
// Buffers the application still holds keep working and are freed on release.
void close_context(State& st, const std::shared_ptr<ContextState>& cs) {
    cs->open = false;
    drop_tombstones(st, [&](const MemRec* r) { return r->ctx == cs; });
    for (auto& [flags, pool] : cs->pools) fold_stats(st, *pool);
    cs->pools.clear();  // buffers still lent become orphans, freed on release
    for (cl_event e : cs->retired) clReleaseEvent(e);
    cs->retired.clear();
    for (cl_event e : cs->handovers) clReleaseEvent(e);
    cs->handovers.clear();
    if (cs->writer) next().clReleaseCommandQueue(cs->writer);
    cs->writer = nullptr;
    for (cl_command_queue q : cs->queues) st.queues.erase(q);
    cs->queues.clear();
}

void trace_passthrough(State& st, cl_mem m, cl_context c, cl_mem_flags flags, std::size_t size) {
    ++st.passthrough;
    if (!st.trace) return;
    unsigned token = 0;
    {
        std::lock_guard lock(st.mu);
        if (auto cs = open_context(st, c)) token = cs->token;
    }
    const std::uint64_t id = st.trace->alloc(token, flags, size);
    // The driver says when it frees the buffer; the callback writes only the trace.
    next().clSetMemObjectDestructorCallback(
        m, [](cl_mem, void* p) { state().trace->free(reinterpret_cast<std::uintptr_t>(p)); },
        reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)));
}

void report(State& st) {
    // Makes no OpenCL call: runs at exit. Waits briefly for the lock, then gives up.
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
            std::fprintf(stderr,
                         "clpool: ctx 0x%x flags 0x%" PRIx64 ": hits %" PRIu64 " misses %" PRIu64
                         " hit_rate %.1f%% held %zu B cached %zu B evictions %" PRIu64 "\n",
                         cs->token, static_cast<std::uint64_t>(flags), s.hits, s.misses, 100.0 * s.hit_rate(),
                         s.bytes_allocated, s.bytes_cached, s.evictions);
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
    const double rate = hits + misses ? 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
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

namespace core {

void set_mode(const char* mode) noexcept { state().mode = mode; }

// --- contexts ---------------------------------------------------------------------------------------

static cl_context track_context(cl_context c) {
    if (!c) return c;
    State& st = state();
    st.saw_context = true;
    std::lock_guard lock(st.mu);
    auto cs = std::make_shared<ContextState>();
    cs->ctx = c;
    cs->token = ++st.next_token;
    st.contexts[c] = std::move(cs);
    return c;
}

cl_context create_context(const cl_context_properties* props, cl_uint ndev, const cl_device_id* devices,
                          context_notify notify, void* user_data, cl_int* err) {
    core_scope guard;
    return track_context(next().clCreateContext(props, ndev, devices, notify, user_data, err));
}

cl_context create_context_from_type(const cl_context_properties* props, cl_device_type type, context_notify notify,
                                    void* user_data, cl_int* err) {
    core_scope guard;
    return track_context(next().clCreateContextFromType(props, type, notify, user_data, err));
}

cl_int retain_context(cl_context c) {
    core_scope guard;
    State& st = state();
    const cl_int rc = next().clRetainContext(c);
    if (rc == CL_SUCCESS) {
        std::lock_guard lock(st.mu);
        if (auto cs = open_context(st, c)) ++cs->refs;
    }
    return rc;
}

cl_int release_context(cl_context c) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto cs = open_context(st, c);
    if (!cs) {
        lock.unlock();
        return next().clReleaseContext(c);
    }
    const cl_int rc = next().clReleaseContext(c);  // the pools' own references keep it valid meanwhile
    if (rc != CL_SUCCESS) return rc;
    if (--cs->refs == 0) {
        st.contexts.erase(c);
        close_context(st, cs);
    }
    return rc;
}

cl_int get_context_info(cl_context c, cl_context_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    if (param == CL_CONTEXT_REFERENCE_COUNT) {
        State& st = state();
        std::unique_lock lock(st.mu);
        if (auto cs = open_context(st, c)) return answer<cl_uint>(cs->refs, size, value, size_ret);
    }
    return next().clGetContextInfo(c, param, size, value, size_ret);
}

// --- queues -----------------------------------------------------------------------------------------

static cl_command_queue track_queue(cl_context c, cl_command_queue q) {
    if (!q) return q;
    State& st = state();
    cl_command_queue_properties props = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;  // if the driver cannot say
    next().clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, nullptr);
    std::lock_guard lock(st.mu);
    if (auto cs = open_context(st, c)) {
        if (cs->released != cs->covered && !cs->queues.empty()) {
            // The lone queue gets company: one marker on it fences what went
            // back with no fence (never clFinish: a user event may hold it).
            cl_event marker = marker_on(cs->queues[0]);
            end_unfenced(st, *cs, marker);
            if (marker) clReleaseEvent(marker);
        }
        hold_back(*cs, q);
        cs->queues.push_back(q);
        st.queues[q] = QueueRec{cs, 1, (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) == 0};
    }
    return q;
}

cl_command_queue create_queue(cl_context c, cl_device_id d, cl_command_queue_properties props, cl_int* err) {
    core_scope guard;
    return track_queue(c, next().clCreateCommandQueue(c, d, props, err));
}

cl_command_queue create_queue_with_properties(cl_context c, cl_device_id d, const cl_queue_properties* props,
                                              cl_int* err) {
    core_scope guard;
    return track_queue(c, next().clCreateCommandQueueWithProperties(c, d, props, err));
}

cl_int retain_queue(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    const cl_int rc = next().clRetainCommandQueue(q);
    if (rc == CL_SUCCESS) {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end()) ++it->second.refs;
    }
    return rc;
}

cl_int release_queue(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    {
        std::lock_guard lock(st.mu);
        auto it = st.queues.find(q);
        if (it != st.queues.end() && --it->second.refs == 0) {
            // Buffers released later must still wait for what this queue runs.
            ContextState& cs = *it->second.ctx;
            if (cl_event marker = marker_on(q)) {
                cs.retired.push_back(marker);
                end_unfenced(st, cs, marker);  // this was the lone queue: its marker fences them
            } else {
                clFinish(q);
                cs.covered = cs.released;  // everything it ran has completed
            }
            std::erase(cs.queues, q);
            st.queues.erase(it);
        }
    }
    return next().clReleaseCommandQueue(q);
}

cl_int set_queue_property(cl_command_queue q, cl_command_queue_properties props, cl_bool enable,
                          cl_command_queue_properties* old) {
    core_scope guard;
    if (!next().clSetCommandQueueProperty) return CL_INVALID_OPERATION;
    State& st = state();
    if (enable && (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end() && it->second.in_order) {
            it->second.in_order = false;  // for good, even if the driver refuses: in doubt, markers
            ContextState& cs = *it->second.ctx;
            if (cs.released != cs.covered) {
                // Enqueued while still in order: every later command runs after it.
                cl_event barrier = nullptr;
                if (clEnqueueBarrierWithWaitList(q, 0, nullptr, &barrier) == CL_SUCCESS) clFlush(q);
                end_unfenced(st, cs, barrier);
                if (barrier) clReleaseEvent(barrier);
            }
        }
    }
    return next().clSetCommandQueueProperty(q, props, enable, old);
}

cl_int finish(cl_command_queue q) {
    core_scope guard;
    State& st = state();
    std::shared_ptr<ContextState> cs;
    std::uint64_t mark = 0;
    {
        std::lock_guard lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end() && lone_queue(st, *it->second.ctx) == q) {
            cs = it->second.ctx;
            mark = cs->released;
        }
    }
    const cl_int rc = next().clFinish(q);
    if (rc == CL_SUCCESS && cs) {
        // Everything the lone queue had when clFinish began has completed:
        // buffers released before need no fence any more.
        std::lock_guard lock(st.mu);
        cs->covered = std::max(cs->covered, mark);
    }
    return rc;
}

cl_int get_queue_info(cl_command_queue q, cl_command_queue_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    if (param == CL_QUEUE_REFERENCE_COUNT) {
        State& st = state();
        std::unique_lock lock(st.mu);
        if (auto it = st.queues.find(q); it != st.queues.end())
            return answer<cl_uint>(it->second.refs, size, value, size_ret);
    }
    return next().clGetCommandQueueInfo(q, param, size, value, size_ret);
}

// --- bounds: the driver sees the bucket, the application's size is checked here ---------------------

// CL_INVALID_VALUE when [offset, offset + n) leaves a live pooled buffer's asked size.
static cl_int check_range(cl_mem m, size_t offset, size_t n) {
    State& st = state();
    std::lock_guard lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end() || it->second->parent || it->second->refs == 0) return CL_SUCCESS;
    const size_t size = it->second->size;
    return offset > size || n > size - offset ? CL_INVALID_VALUE : CL_SUCCESS;
}

cl_int enqueue_read_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, void* ptr,
                           cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueReadBuffer(q, m, blocking, offset, n, ptr, nwait, wait, event);
}

cl_int enqueue_write_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, const void* ptr,
                            cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueWriteBuffer(q, m, blocking, offset, n, ptr, nwait, wait, event);
}

cl_int enqueue_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_offset, size_t dst_offset, size_t n,
                           cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(src, src_offset, n)) return e;
    if (cl_int e = check_range(dst, dst_offset, n)) return e;
    return next().clEnqueueCopyBuffer(q, src, dst, src_offset, dst_offset, n, nwait, wait, event);
}

cl_int enqueue_fill_buffer(cl_command_queue q, cl_mem m, const void* pattern, size_t pattern_size, size_t offset,
                           size_t n, cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueFillBuffer(q, m, pattern, pattern_size, offset, n, nwait, wait, event);
}

void* enqueue_map_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags, size_t offset, size_t n,
                         cl_uint nwait, const cl_event* wait, cl_event* event, cl_int* err) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) {
        if (err) *err = e;
        return nullptr;
    }
    return next().clEnqueueMapBuffer(q, m, blocking, flags, offset, n, nwait, wait, event, err);
}

// --- buffers ----------------------------------------------------------------------------------------

// The pooled path; nullptr (with *err untouched) when it cannot serve the call.
// The driver work (a miss's allocation and commit, the COPY_HOST_PTR write)
// runs outside State::mu: a driver thread running an application callback
// that calls the interposer must never wait for a thread that waits for it.
static cl_mem create_pooled(State& st, cl_context c, cl_mem_flags flags, std::size_t size, void* host_ptr,
                            cl_int* err) {
    std::shared_ptr<ContextState> cs;
    std::shared_ptr<PoolT> pool;
    cl_command_queue writer = nullptr;
    {
        std::lock_guard lock(st.mu);
        cs = open_context(st, c);
        if (!cs) return nullptr;  // a context created before the interposer saw it: pass through
        try {
            pool = pool_for(*cs, flags & ~CL_MEM_COPY_HOST_PTR);
        } catch (...) {  // the context cannot be queried, invalid CLPOOL_MAX_CACHED_GB: the driver answers
            ++st.fallbacks;
            return nullptr;
        }
        if (flags & CL_MEM_COPY_HOST_PTR) {
            cl_int e = CL_SUCCESS;
            if (!cs->writer) cs->writer = next().clCreateCommandQueue(c, cs->device, 0, &e);
            if (!cs->writer || next().clRetainCommandQueue(cs->writer) != CL_SUCCESS) {
                ++st.fallbacks;
                return nullptr;
            }
            writer = cs->writer;  // retained: a context closing meanwhile cannot free it under us
        }
    }
    struct writer_ref {  // released on every way out
        cl_command_queue q;
        ~writer_ref() {
            if (q) next().clReleaseCommandQueue(q);
        }
    } writer_hold{writer};
    PoolT::handle h;
    bool driver_oom = false;  // over every attempt: the tombstones' drop must not be skipped
    std::unique_lock lock(st.mu, std::defer_lock);
    // A bucket that must first wait for a fence goes back to its pool, and the
    // pool is asked again (a few times at most, then the driver answers).
    for (int attempt = 0;; ++attempt) {
        if (attempt == 8) {
            ++st.fallbacks;
            return nullptr;
        }
        try {
            tl_driver_oom = false;
            try {
                h = pool->allocate(size);
            } catch (const out_of_memory&) {
                {
                    std::lock_guard oom_lock(st.mu);
                    ++st.oom_retries;
                    if (cs->open) give_back(st, *cs);
                }
                h = pool->try_allocate(size);
            }
        } catch (...) {
            // size above the device limit, other driver errors: the driver answers.
        }
        driver_oom = driver_oom || tl_driver_oom;
        if (h && writer) {
            // The core's write runs on its own queue: it must not overtake the
            // old owner's commands, so check the bucket before writing.
            std::lock_guard check(st.mu);
            const reissue r = check_reissue(st, *cs, h, true);
            if (r == reissue::wait) continue;
            if (r == reissue::fail) {
                ++st.fallbacks;
                return nullptr;
            }
        }
        cl_int write_err = CL_SUCCESS;
        if (h && writer)
            write_err = clEnqueueWriteBuffer(writer, h.buffer()(), CL_TRUE, 0, size, host_ptr, 0, nullptr, nullptr);

        lock.lock();
        if (driver_oom) {
            // The pool trimmed itself: its tombstones name buckets that are gone.
            drop_tombstones(st, [&](const MemRec* r) { return r->pool == pool.get(); });
        }
        if (!h || write_err != CL_SUCCESS || !cs->open) {
            ++st.fallbacks;
            return nullptr;  // h goes back to its pool (or to the driver, if the context closed meanwhile)
        }
        // Again under this lock: a queue created since may have fenced the bucket.
        const reissue r = check_reissue(st, *cs, h, writer != nullptr);
        if (r == reissue::ok) break;
        if (r == reissue::fail) {
            ++st.fallbacks;
            return nullptr;
        }
        lock.unlock();
    }
    const cl_mem bucket = h.buffer()();
    MemRec* rec = nullptr;
    if (auto t = st.mems.find(bucket); t != st.mems.end()) {
        rec = t->second.get();  // the bucket's tombstone: it serves again
        release_dead_subs(st, rec);
    } else {
        auto owned = std::make_unique<MemRec>();
        rec = owned.get();
        rec->mem = bucket;
        st.mems[bucket] = std::move(owned);
    }
    rec->ctx = cs;
    rec->flags = flags;
    rec->size = size;
    rec->refs = 1;
    rec->parent = nullptr;
    rec->live_subs = 0;
    rec->callbacks.clear();
    rec->pool = pool.get();
    rec->fence = cl::Event();  // completed, if it had one; `unfenced` stays (see MemRec)
    rec->block = std::move(h);
    if (st.trace) rec->trace_id = st.trace->alloc(cs->token, flags, size);
    if (err) *err = CL_SUCCESS;
    return rec->mem;
}

cl_mem create_buffer(cl_context c, cl_mem_flags flags, size_t size, void* host_ptr, cl_int* err) {
    core_scope guard;
    State& st = state();
    if (poolable(flags, size, host_ptr)) {
        if (cl_mem m = create_pooled(st, c, flags, size, host_ptr, err)) return m;
    }
    cl_mem m = next().clCreateBuffer(c, flags, size, host_ptr, err);
    if (m) trace_passthrough(st, m, c, flags, size);
    return m;
}

cl_mem create_buffer_with_properties(cl_context c, const cl_mem_properties* props, cl_mem_flags flags, size_t size,
                                     void* host_ptr, cl_int* err) {
    if (!props || props[0] == 0) return create_buffer(c, flags, size, host_ptr, err);
    core_scope guard;
    State& st = state();
    cl_mem m = next().clCreateBufferWithProperties(c, props, flags, size, host_ptr, err);
    if (m) trace_passthrough(st, m, c, flags, size);
    return m;
}

cl_mem create_sub_buffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type, const void* info,
                         cl_int* err) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(parent);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clCreateSubBuffer(parent, flags, type, info, err);
    }
    MemRec* rec = it->second.get();
    auto fail = [&](cl_int code) -> cl_mem {
        if (err) *err = code;
        return nullptr;
    };
    if (rec->refs == 0 || rec->parent) return fail(CL_INVALID_MEM_OBJECT);  // freed, or a sub-buffer's sub-buffer
    if (type != CL_BUFFER_CREATE_TYPE_REGION || !info) return fail(CL_INVALID_VALUE);
    const auto* region = static_cast<const cl_buffer_region*>(info);
    if (region->size == 0) return fail(CL_INVALID_BUFFER_SIZE);
    if (region->origin > rec->size || region->size > rec->size - region->origin) return fail(CL_INVALID_VALUE);
    cl_mem sub = next().clCreateSubBuffer(parent, flags, type, info, err);
    if (!sub) return nullptr;
    auto owned = std::make_unique<MemRec>();
    owned->mem = sub;
    owned->ctx = rec->ctx;
    owned->flags = flags;
    owned->size = region->size;
    owned->parent = rec;
    ++rec->live_subs;
    st.mems[sub] = std::move(owned);
    ++st.sub_buffers;
    return sub;
}

cl_int retain_mem(cl_mem m) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clRetainMemObject(m);
    }
    if (it->second->refs == 0) return CL_INVALID_MEM_OBJECT;
    ++it->second->refs;
    return CL_SUCCESS;
}

cl_int release_mem(cl_mem m) {
    core_scope guard;
    State& st = state();
    std::vector<std::pair<mem_notify, void*>> callbacks;
    {
        std::unique_lock lock(st.mu);
        auto it = st.mems.find(m);
        if (it == st.mems.end()) {
            lock.unlock();
            return next().clReleaseMemObject(m);
        }
        MemRec* rec = it->second.get();
        if (rec->refs == 0) return CL_INVALID_MEM_OBJECT;  // released already: the handle is a tombstone
        if (--rec->refs > 0) return CL_SUCCESS;
        callbacks = std::move(rec->callbacks);
        rec->callbacks.clear();
        if (MemRec* parent = rec->parent) {
            --parent->live_subs;
            parent->dead_subs.push_back(m);
            if (parent->refs == 0 && parent->live_subs == 0) recycle(st, parent);
        } else {
            if (st.trace) st.trace->free(rec->trace_id);
            if (rec->live_subs == 0) recycle(st, rec);
        }
    }
    // The application's destructor callbacks, last registered first, outside the lock.
    app_scope as_app;
    for (auto cb = callbacks.rbegin(); cb != callbacks.rend(); ++cb) cb->first(m, cb->second);
    return CL_SUCCESS;
}

cl_int get_mem_info(cl_mem m, cl_mem_info param, size_t size, void* value, size_t* size_ret) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clGetMemObjectInfo(m, param, size, value, size_ret);
    }
    const MemRec* rec = it->second.get();
    if (rec->refs == 0) return CL_INVALID_MEM_OBJECT;
    switch (param) {
    case CL_MEM_REFERENCE_COUNT:
        return answer<cl_uint>(rec->refs, size, value, size_ret);
    case CL_MEM_SIZE:
        return answer<size_t>(rec->size, size, value, size_ret);
    case CL_MEM_FLAGS: {
        // The driver's answer (the bucket was made with the application's flags),
        // plus the COPY_HOST_PTR the core did by hand.
        cl_mem_flags f = 0;
        const cl_int rc = next().clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof f, &f, nullptr);
        if (rc != CL_SUCCESS) return rc;
        const cl_mem_flags asked = rec->parent ? rec->parent->flags : rec->flags;
        return answer<cl_mem_flags>(f | (asked & CL_MEM_COPY_HOST_PTR), size, value, size_ret);
    }
    default:  // CL_MEM_OFFSET, CL_MEM_TYPE, CL_MEM_CONTEXT, CL_MEM_ASSOCIATED_MEMOBJECT, ...: the driver's are right
        return next().clGetMemObjectInfo(m, param, size, value, size_ret);
    }
}

cl_int set_mem_destructor_callback(cl_mem m, mem_notify notify, void* user_data) {
    core_scope guard;
    State& st = state();
    std::unique_lock lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end()) {
        lock.unlock();
        return next().clSetMemObjectDestructorCallback(m, notify, user_data);
    }
    if (!notify) return CL_INVALID_VALUE;
    if (it->second->refs == 0) return CL_INVALID_MEM_OBJECT;
    try {
        it->second->callbacks.emplace_back(notify, user_data);
    } catch (...) {
        return CL_OUT_OF_HOST_MEMORY;
    }
    return CL_SUCCESS;
}

// Checks a rectangular region of a live pooled buffer against the asked size
// (*err = CL_INVALID_VALUE past it); returns m unchanged (the driver checks
// everything else, against the bucket).
static cl_mem rect_target(cl_mem m, const size_t* origin, const size_t* region, size_t row, size_t slice,
                          cl_int* err) {
    State& st = state();
    std::lock_guard lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end() || it->second->parent || it->second->refs == 0 || !origin || !region) return m;
    const MemRec& rec = *it->second;
    if (region[0] == 0 || region[1] == 0 || region[2] == 0) return m;  // the driver's error
    if (row == 0) row = region[0];
    if (slice == 0) slice = region[1] * row;
    const size_t first = origin[2] * slice + origin[1] * row + origin[0];
    const size_t extent = (region[2] - 1) * slice + (region[1] - 1) * row + region[0];
    if (first > rec.size || extent > rec.size - first) *err = CL_INVALID_VALUE;
    return m;
}

cl_int enqueue_read_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* bo, const size_t* ho,
                                const size_t* region, size_t brp, size_t bsp, size_t hrp, size_t hsp, void* ptr,
                                cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    m = rect_target(m, bo, region, brp, bsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueReadBufferRect(q, m, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait, event);
}

cl_int enqueue_write_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* bo, const size_t* ho,
                                 const size_t* region, size_t brp, size_t bsp, size_t hrp, size_t hsp, const void* ptr,
                                 cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    m = rect_target(m, bo, region, brp, bsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueWriteBufferRect(q, m, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait,
                                           event);
}

cl_int enqueue_copy_buffer_rect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t* so, const size_t* dO,
                                const size_t* region, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nwait,
                                const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    src = rect_target(src, so, region, srp, ssp, &err);
    dst = rect_target(dst, dO, region, drp, dsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueCopyBufferRect(q, src, dst, so, dO, region, srp, ssp, drp, dsp, nwait, wait, event);
}

}  // namespace core

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
