// The core's state model: the application's contexts, queues and buffers as the core keeps them, under one mutex.
#pragma once

#include "core.hpp"
#include "pool_adapters.hpp"
#include "reuse_order.hpp"
#include "trace_writer.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

// How a pooled buffer looks to the application (docs/DROPIN.md has the why):
// the application's handle is the pool's bucket buffer itself (power-of-two
// size). The core answers the queries that would show the bucket
// (CL_MEM_SIZE, CL_MEM_REFERENCE_COUNT, CL_MEM_FLAGS) and checks buffer
// transfers and sub-buffers against the size the application asked for. The
// core keeps the application's reference count itself. Once it is zero and
// nothing else holds the bucket (the application's sub-buffers of it, images
// made from it: the driver keeps those alive on their own), the bucket goes
// back to the pool, ordered by the reuse-ordering protocol (reuse_order.hpp),
// and the application's destructor callbacks run when the commands enqueued
// so far have completed, as the driver would run them. The record stays as a
// tombstone while the bucket sits in the cache (the driver object is alive:
// the pool holds it), so a second release is answered CL_INVALID_MEM_OBJECT;
// it is dropped the moment the bucket goes back to the driver.
namespace clpool::interpose {

struct ContextState {
    cl_context ctx = nullptr;
    cl_uint refs = 1;  // the application's count
    unsigned token = 0;
    bool open = true;  // false once the application released it
    cl_device_id device = nullptr;
    std::map<cl_mem_flags, std::shared_ptr<PoolT>> pools;  // shared: an allocation in flight keeps its pool
    reuse::ContextOrder order{reuse::opencl_driver()};      // the application's live queues, and when reuse is safe
    cl_command_queue writer = nullptr;                      // the core's queue for CL_MEM_COPY_HOST_PTR data
    std::vector<cl_mem> parked;  // released buckets the driver still counts another holder of (let_go)
    // Per pool: buckets it handed out that went back to wait for a fence (check_reissue), which
    // its stats count as hits; the exit report leaves them out of the pool's line, as of the total.
    std::map<const PoolT*, std::uint64_t> rewaits;
    // clSVMAlloc's pools, per access flags; nullptr: the device cannot serve them (the driver does).
    std::map<cl_mem_flags, std::shared_ptr<SVMPoolT>> svm_pools;
};

// An SVM allocation the application holds, served by a pool (api_svm.cpp).
struct SVMRec {
    SVMPoolT::handle block;
    std::shared_ptr<ContextState> ctx;
};

struct MemRec {
    cl_mem mem = nullptr;  // the application's handle: the bucket, or a sub-buffer of it
    std::shared_ptr<ContextState> ctx;
    cl_mem_flags flags = 0;    // as asked
    std::size_t size = 0;      // as asked
    cl_uint refs = 1;          // the application's count; 0 = freed (a tombstone)
    MemRec* parent = nullptr;  // application sub-buffers: the pooled buffer they are part of
    std::size_t live_subs = 0;  // the application's sub-buffers of this pooled buffer
    std::size_t holders = 0;    // images made from it: the driver keeps them, and the bucket, alive
    bool parked = false;        // released, but the driver counts a holder the core cannot see
    std::vector<std::pair<core::mem_notify, void*>> callbacks;  // pooled buffers only (the driver runs a sub-buffer's)
    PoolT::handle block;  // pooled buffers: the bucket, until recycled
    PoolT* pool = nullptr;  // pooled buffers: where the bucket goes back
    std::uint64_t trace_id = 0;
    bool empty_properties = false;  // made by clCreateBufferWithProperties with the list {0}
    reuse::BufferMark reuse;  // pooled buffers: how its last release was fenced
};

struct QueueRec {
    std::shared_ptr<ContextState> ctx;
    cl_uint refs = 1;
};

struct Totals {  // stats of pools already destroyed
    std::uint64_t hits = 0, misses = 0, evictions = 0;
    std::size_t peak_held = 0;  // the largest any one pool ever held
};

struct State {
    std::mutex mu;
    std::unordered_map<cl_context, std::shared_ptr<ContextState>> contexts;
    std::unordered_map<cl_command_queue, QueueRec> queues;
    std::unordered_map<cl_mem, std::unique_ptr<MemRec>> mems;
    std::unordered_map<void*, SVMRec> svm;  // pooled SVM pointers the application holds, by pointer
    Totals closed;
    unsigned next_token = 0;
    std::uint64_t rewaits = 0;  // buckets a pool handed out that went back to wait for a fence (counted as hits)
    std::atomic<std::uint64_t> passthrough{0}, fallbacks{0}, sub_buffers{0}, oom_retries{0};
    // clSVMAlloc / clSVMFree / clEnqueueSVMFree (clpool_interpose_get_svm_counters).
    std::atomic<std::uint64_t> svm_pooled{0}, svm_passthrough{0}, svm_fallbacks{0}, svm_driver_frees{0};
    Totals svm_closed;  // stats of SVM pools already destroyed
    // The application looked up cl_khr_command_buffer: a recording may hold a
    // buffer the core never sees, so a release asks the driver's count (let_go).
    std::atomic<bool> watch_driver_refs{false};
    std::atomic<bool> saw_context{false};
    bool report = false;
    Trace* trace = nullptr;
    const char* mode = "preload";
};

// The one State. Never destroyed: the exit report must not race a static
// destructor, and no OpenCL call may run at exit.
State& state();
// Reads CLPOOL_REPORT into st and registers what runs at exit (exit_report.cpp).
void arm_exit_report(State& st);
// CLPOOL_SNAPSHOT=path: registers the snapshot written at exit, and on
// SIGUSR1 by a thread of its own (snapshot_writer.cpp; docs/DROPIN.md).
void arm_snapshot();
// Puts the SIGUSR1 handler back in front if a driver installed its own over it
// (LLVM in PoCL does, when the driver loads): called after a context is made.
void keep_snapshot_signal() noexcept;

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

// Work due once `events` (one reference each) have completed (none: at once):
// a pooled buffer's application destructor callbacks, and/or another look at
// a context's parked buckets (their commands have completed by then).
struct DueCallbacks {
    cl_mem mem = nullptr;
    std::vector<std::pair<core::mem_notify, void*>> callbacks;
    std::vector<cl_event> events;
    std::shared_ptr<ContextState> unpark;
};
// Runs (or arms) them, callbacks as application code. Outside State::mu: a callback may call the interposer.
void run_due(std::vector<DueCallbacks>& due) noexcept;

// --- under State::mu from here on -------------------------------------------------------------------

// Nothing holds the pooled buffer any more: the bucket may go back.
inline bool unheld(const MemRec& r) noexcept { return r.refs == 0 && r.live_subs == 0 && r.holders == 0; }
// The handle is a live buffer: the application holds it, or (a pooled buffer it released) a
// sub-buffer or an image of it does, which keeps the driver's object, and so its handle, alive.
// It may be retained, queried, sliced and used again; only a release wants the application's count.
inline bool alive(const MemRec& r) noexcept { return !unheld(r); }
// The bucket is its pool's (cached or pending): the record is a tombstone.
inline bool is_tombstone(const MemRec& r) noexcept { return !r.parent && r.refs == 0 && !r.block; }

// Drops a record whose bucket is not its own any more (the pool's, or the driver's).
void destroy_tombstone(State& st, MemRec* rec) noexcept;

// Drops every tombstone of the pools `which` accepts (before those pools give
// their buckets back, or after they did). Buckets still held stay.
// Allocates nothing: it runs on release paths and when memory is short.
template <class Which>
void drop_tombstones(State& st, Which which) noexcept {
    for (auto it = st.mems.begin(); it != st.mems.end();) {
        MemRec& rec = *it->second;
        if (is_tombstone(rec) && which(&rec)) {
            rec.block.release();  // empty: the bucket is the pool's
            it = st.mems.erase(it);
        } else {
            ++it;
        }
    }
}

// Gives back everything the context's pools hold but do not lend (the
// out-of-memory answer): tombstones first, since they keep their buckets alive.
void give_back(State& st, ContextState& cs);
// The same for the context's SVM pools; takes State::mu itself and trims with it let go (a trim
// waits for the events of allocations freed by clEnqueueSVMFree, which can wait for the lock).
void give_back_svm(State& st, ContextState& cs) noexcept;

std::shared_ptr<PoolT> pool_for(ContextState& cs, cl_mem_flags key);
// The context's state while the application holds it, else nullptr.
std::shared_ptr<ContextState> open_context(State& st, cl_context c);
// Closes a context the application released: its pools, tombstones, queues; the caller
// destroys its SVM pools (cs->svm_pools) once it has let go of State::mu.
// Buffers the application still holds keep working and are freed on release;
// parked ones go to the driver (which keeps them for their holders).
void close_context(State& st, const std::shared_ptr<ContextState>& cs, std::vector<DueCallbacks>& due);

// A context's pooled buffers and cache, as the reuse-ordering protocol asks for them.
class ContextBuffers final : public reuse::Buffers {
public:
    ContextBuffers(State& st, ContextState& cs) noexcept : st_(st), cs_(cs) {}
    void each(const std::function<void(reuse::BufferMark&, bool cached)>& f) override;
    void give_back_cache() override { give_back(st_, cs_); }

private:
    State& st_;
    ContextState& cs_;
};

// Hands a pooled buffer's bucket back (unheld(*rec)); its destructor callbacks join `due`.
void recycle(State& st, MemRec* rec, std::vector<DueCallbacks>& due);
// What the core does once nothing it sees holds the buffer (unheld(*rec)):
// recycle, or, while the application uses command buffers (their recordings
// hold buffers the core never sees) and the driver counts a reference besides
// the pool's, park it until the driver's count says it is free.
void let_go(State& st, MemRec* rec, std::vector<DueCallbacks>& due);
// Recycles the context's parked buckets the driver no longer counts a holder of.
void unpark(State& st, ContextState& cs, std::vector<DueCallbacks>& due) noexcept;
// Looks at the context's parked buckets now (outside State::mu).
void look_at_parked(const std::shared_ptr<ContextState>& cs) noexcept;

enum class reissue { ok, wait, fail };
// Whether the bucket in h, just taken from its pool, may be handed out.
// `wait`: it went back to its pool behind a fence; the caller asks the pool
// again. `core_writes`: the core's COPY_HOST_PTR write comes first. `known`:
// no old owner's command can still use it (the driver just made it, or it
// passed this check already); any other bucket without a record lost its
// tombstone to a give-back while the caller held it, and waits for every
// command enqueued so far.
reissue check_reissue(State& st, const std::shared_ptr<ContextState>& cs, PoolT::handle& h, bool core_writes,
                      bool known) noexcept;

}  // namespace clpool::interpose
