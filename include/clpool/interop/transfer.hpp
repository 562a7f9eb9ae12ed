// upload/download: host <-> device copies, direct from pinned memory or pipelined through pinned staging buffers.
#pragma once

#include <clpool/runtime/config.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>
#include <clpool/interop/detail/parallel_copy.hpp>
#include <clpool/platform/numa_opencl.hpp>
#include <clpool/backends/pinned_ranges.hpp>
#include <clpool/backends/svm.hpp>
#include <clpool/backends/usm.hpp>
#include <clpool/platform/opencl_svm.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace clpool {

// How upload/download move the bytes. The defaults suit a discrete GPU; see
// docs/TRANSFERS.md for the measured reasons.
struct TransferOptions {
    // Where staging buffers come from; nullptr: get_mapped_pinned_pool(queue).
    // Its buffers stay mapped while pooled, so staging does no map/unmap.
    MappedPinnedPool* staging_pool = nullptr;
    // The largest staging chunk, and how many staging buffers rotate (2..8):
    // the host fills chunk i+1 while the device copies chunk i. A transfer of
    // fewer chunks than buffers is cut in staging_buffers pieces (>= 64 KiB).
    // 0 (default): automatic, a power of two near n/8 between 4 and 16 MiB, so
    // per-chunk costs (an enqueue, an event wait, a thread hand-off) stay
    // small beside a chunk's DMA while a transfer still has >= 8 chunks to
    // overlap (docs/TRANSFERS.md).
    std::size_t chunk_bytes = 0;
    unsigned staging_buffers = 3;
    // Transfers of at most this many bytes go direct: for them the extra host
    // copy and the per-chunk costs outweigh what a pageable DMA loses.
    std::size_t direct_max_bytes = std::size_t{256} << 10;
    // Threads for each host copy into/out of staging (0: half the cores, at most 16; 1..32).
    unsigned copy_threads = 0;
    // The host memory is already pinned (e.g. from cudaHostAlloc or a mapped
    // buffer of your own): go direct. PinnedAllocator memory is recognised
    // without this.
    bool host_is_pinned = false;
    // Overrides of CLPOOL_PINNED_H2D (stage pageable memory; unset too: stage
    // unless the device shares host memory) and, for uploads, of
    // CLPOOL_ASYNC_H2D (return before the copy is done).
    std::optional<bool> stage;
    std::optional<bool> async;
    // Events the transfer waits for before touching the device buffer.
    std::vector<cl::Event> wait_for;
};

namespace detail {

inline std::size_t buffer_size(const cl::Buffer& b) {
    std::size_t n = 0;
    opencl::check(clGetMemObjectInfo(b(), CL_MEM_SIZE, sizeof n, &n, nullptr), "clGetMemObjectInfo");
    return n;
}

// Null OpenCL objects are the caller's mistake, not the driver's: say which one.
inline void check_buffer(const cl::Buffer& b, const char* what, const char* into_or_from, std::size_t offset,
                         std::size_t n) {
    if (!b())
        throw usage_error(std::string("clpool: ") + what + " of " + std::to_string(n) + " bytes at offset " +
                          std::to_string(offset) + " " + into_or_from +
                          " a null cl::Buffer (default-constructed or moved from)");
}
inline void check_queue(const cl::CommandQueue& q, const char* what, std::size_t n) {
    if (!q())
        throw usage_error(std::string("clpool: ") + what + " of " + std::to_string(n) +
                          " bytes on a null cl::CommandQueue (default-constructed or moved from)");
}

inline void check_range(std::size_t offset, std::size_t n, std::size_t limit, const void* host) {
    if (n != 0 && host == nullptr)
        throw usage_error("clpool: transfer of " + std::to_string(n) +
                          " bytes with a null host pointer (only a transfer of 0 bytes may pass nullptr)");
    if (offset > limit || n > limit - offset)
        throw size_error("clpool: transfer of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                             " runs past the end of the " + std::to_string(limit) +
                             "-byte device buffer (offset + size may be at most " + std::to_string(limit) + ")",
                         n, limit);
}

inline void validate_options(const TransferOptions& o) {
    if (o.chunk_bytes > (std::size_t{1} << 30))
        throw config_error("clpool: TransferOptions::chunk_bytes=" + std::to_string(o.chunk_bytes) +
                           " must be 0 (automatic) or between 1 and 1073741824");
    if (o.staging_buffers < 2 || o.staging_buffers > 8)
        throw config_error("clpool: TransferOptions::staging_buffers=" + std::to_string(o.staging_buffers) +
                           " must be between 2 and 8");
    if (o.copy_threads > 32)
        throw config_error("clpool: TransferOptions::copy_threads=" + std::to_string(o.copy_threads) +
                           " must be 0 (automatic) or between 1 and 32");
}

inline const cl_event* raw_events(const std::vector<cl::Event>& v, std::vector<cl_event>& out) {
    out.clear();
    for (const auto& e : v) out.push_back(e());
    return out.empty() ? nullptr : out.data();
}

inline cl_context queue_context(const cl::CommandQueue& q) {
    cl_context ctx = nullptr;
    opencl::check(clGetCommandQueueInfo(q(), CL_QUEUE_CONTEXT, sizeof ctx, &ctx, nullptr), "clGetCommandQueueInfo");
    return ctx;
}

// Where a transfer's device bytes are: a cl_mem at base + offset, or an SVM
// pointer (base + offset bytes from it), or a USM one with its platform's calls.
struct device_range {
    cl_mem buffer = nullptr;
    char* svm = nullptr;  // SVM, or USM where `usm` is set
    std::size_t base = 0;
    const opencl::usm_functions* usm = nullptr;
};

// One copy between host memory and the device range at `off`:
// clEnqueueWrite/ReadBuffer, or clEnqueueSVMMemcpy for SVM.
inline cl_int enqueue_copy(cl_command_queue q, bool write, const device_range& dev, std::size_t off, void* host,
                           std::size_t n, cl_bool blocking, cl_uint waits, const cl_event* wait_list, cl_event* ev) {
    const std::size_t at = dev.base + off;
    if (dev.usm)
        return write ? dev.usm->memcpy(q, blocking, dev.svm + at, host, n, waits, wait_list, ev)
                     : dev.usm->memcpy(q, blocking, host, dev.svm + at, n, waits, wait_list, ev);
    if (dev.svm)
        return write ? clEnqueueSVMMemcpy(q, blocking, dev.svm + at, host, n, waits, wait_list, ev)
                     : clEnqueueSVMMemcpy(q, blocking, host, dev.svm + at, n, waits, wait_list, ev);
    return write ? clEnqueueWriteBuffer(q, dev.buffer, blocking, at, n, host, waits, wait_list, ev)
                 : clEnqueueReadBuffer(q, dev.buffer, blocking, at, n, host, waits, wait_list, ev);
}
inline const char* copy_call(bool write, const device_range& dev) noexcept {
    if (dev.usm) return "clEnqueueMemcpyINTEL";
    if (dev.svm) return "clEnqueueSVMMemcpy";
    return write ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer";
}

// A transfer that stays on the caller's queue: one enqueued copy.
inline cl::Event direct(const cl::CommandQueue& q, bool write, const device_range& dev, std::size_t off, void* host,
                        std::size_t n, bool blocking, const std::vector<cl::Event>& wait_for) {
    std::vector<cl_event> raw;
    const cl_event* wl = raw_events(wait_for, raw);
    cl_event ev = nullptr;
    const cl_int err = enqueue_copy(q(), write, dev, off, host, n, blocking, static_cast<cl_uint>(raw.size()), wl, &ev);
    opencl::check(err, copy_call(write, dev));
    if (!blocking) clFlush(q());  // a blocking call has submitted and finished it
    return cl::Event(ev, false);
}

// One pinned staging buffer while a transfer holds it. Its host pointer is
// the pool's persistent mapping (no map or unmap here); at the end it goes
// back with release_after(the last copy that read or wrote it), so the pool
// hands it out again only once no copy uses it. The destructor does the same
// on an error path.
struct staging_slot {
    MappedPinnedPool::handle h;
    char* ptr = nullptr;
    cl::Event last;  // the copy that last used ptr

    staging_slot() = default;
    staging_slot(const staging_slot&) = delete;
    staging_slot& operator=(const staging_slot&) = delete;
    ~staging_slot() { finish(); }

    void acquire(MappedPinnedPool& pool, std::size_t n) {
        h = pool.allocate(n);
        ptr = static_cast<char*>(h.buffer().host());
    }
    void finish() noexcept {
        ptr = nullptr;
        if (!h) return;
        if (last()) h.release_after(&last, 1);
        else h.release();
    }
};

inline void wait(const cl::Event& e) {
    if (!e()) return;
    cl_event raw = e();
    opencl::check(clWaitForEvents(1, &raw), "clWaitForEvents (staging copy)");
}

inline bool in_order(const cl::CommandQueue& q) {
    cl_command_queue_properties props = 0;
    opencl::check(clGetCommandQueueInfo(q(), CL_QUEUE_PROPERTIES, sizeof props, &props, nullptr),
                  "clGetCommandQueueInfo");
    return (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) == 0;
}

// An event for "all of these" (a marker; with none: all work so far on q).
// `ordered`: the events were enqueued on q in this order and q is in order, so
// the last one stands for all of them (no marker, no extra flush).
inline cl::Event all_of(const cl::CommandQueue& q, const std::vector<cl::Event>& events, bool ordered = false) {
    if (events.size() == 1 || (ordered && !events.empty())) return events.back();
    std::vector<cl_event> raw;
    raw_events(events, raw);
    cl_event ev = nullptr;
    opencl::check(clEnqueueMarkerWithWaitList(q(), static_cast<cl_uint>(raw.size()), raw.data(), &ev),
                  "clEnqueueMarkerWithWaitList");
    clFlush(q());
    return cl::Event(ev, false);
}

// Host memory the driver cannot DMA from directly (not known pinned).
inline bool pageable(const void* host, std::size_t n, const TransferOptions& o) {
    return !o.host_is_pinned && !pinned_ranges::instance().contains(host, n);
}

// Whether a direct (unstaged) transfer is made blocking. A non-blocking
// pageable copy gives the driver nothing to overlap (it must copy the bytes
// out of or into pageable memory itself), and waiting on its event after a
// flush costs a further driver round trip over a blocking call:
//  * downloads into pageable memory: always, unless wait_for events are given
//    (a blocking read behind a user event the caller has not set yet could
//    never return);
//  * uploads from pageable memory of at most direct_max_bytes: likewise (and
//    the source is free at once); larger direct uploads (staging off) and all
//    pinned copies stay non-blocking unless the upload asked to block.
// A blocking call still waits for the work already on an in-order queue.
inline bool direct_blocks(bool write, const void* host, std::size_t n, const TransferOptions& o, bool asked) {
    if (asked) return true;
    if (!o.wait_for.empty()) return false;
    if (write && n > o.direct_max_bytes) return false;
    return pageable(host, n, o);
}

// Pageable, large enough, not known pinned: a candidate for staging.
inline bool may_stage(const void* host, std::size_t n, const TransferOptions& o) {
    if (n <= o.direct_max_bytes || o.host_is_pinned) return false;
    if (o.stage == false) return false;
    return !pinned_ranges::instance().contains(host, n);
}

// The staging pool if this transfer stages, else nullptr: o.stage, else
// CLPOOL_PINNED_H2D, else "the device does not share host memory" (on a CPU
// device or an integrated GPU a staging copy is pure extra work).
inline MappedPinnedPool* staging_pool_for(const cl::CommandQueue& q, const void* host, std::size_t n,
                                          const TransferOptions& o) {
    if (!may_stage(host, n, o)) return nullptr;
    const std::optional<bool> env = config::pinned_h2d();
    if (!o.stage && env == false) return nullptr;
    auto& pool = o.staging_pool ? *o.staging_pool : get_mapped_pinned_pool(q);
    if (!o.stage && !env && pool.backend().unified_memory()) return nullptr;
    return &pool;
}

// The chunk a transfer of n bytes uses: o.chunk_bytes, but a transfer of
// fewer chunks than staging buffers is cut in staging_buffers pieces (power-
// of-two sizes, so staging buffers fill their pool buckets exactly; at least
// 64 KiB), so the host copy of one chunk still overlaps the device copy of
// another, and such a transfer never waits on the host for its own copies.
// chunk_bytes 0: the cap is the power of two >= n/8, clamped to 4..16 MiB.
// The 4 MiB floor is measured (docs/TRANSFERS.md, chunk sweep): smaller
// chunks lose more to per-chunk costs than they gain in overlap.
inline std::size_t auto_chunk_cap(std::size_t n) noexcept {
    constexpr std::size_t lo = std::size_t{4} << 20, hi = std::size_t{16} << 20;
    std::size_t cap = lo;
    while (cap < hi && cap < n / 8) cap *= 2;
    return cap;
}
inline std::size_t chunk_for(std::size_t n, const TransferOptions& o) {
    const std::size_t cap = o.chunk_bytes ? o.chunk_bytes : auto_chunk_cap(n);
    std::size_t piece = std::size_t{64} * 1024;
    const std::size_t want = (n + o.staging_buffers - 1) / o.staging_buffers;
    while (piece < want && piece < cap) piece *= 2;
    return std::min({cap, piece, n});
}

// The pieces a staged transfer moves, in order. A pipeline's wall time is
// about the sum of its slower stage plus one piece of the other stage at the
// ends: an upload's last DMA starts only when its last host copy is done, and
// a download's first host copy waits for its first DMA. So the exposed end is
// cut finer: an upload's last chunk, and a download's first, go as four
// quarter pieces (each >= 256 KiB) when the transfer has at least two chunks.
// Each piece fits a staging buffer of `chunk` bytes.
struct piece {
    std::size_t off, len;
};
inline std::vector<piece> plan_pieces(std::size_t n, std::size_t chunk, bool taper_end) {
    std::vector<piece> out;
    const std::size_t quarter = chunk / 4;
    const bool taper = n >= 2 * chunk && quarter >= (std::size_t{256} << 10);
    std::size_t off = 0;
    auto add_quarters = [&](std::size_t end) {
        while (off < end) {
            const std::size_t len = std::min(quarter, end - off);
            out.push_back({off, len});
            off += len;
        }
    };
    if (taper && !taper_end) add_quarters(chunk);
    const std::size_t body_end = taper && taper_end ? n - std::min(chunk, n - off) : n;
    while (off < body_end) {
        const std::size_t len = std::min(chunk, body_end - off);
        out.push_back({off, len});
        off += len;
    }
    if (taper && taper_end) add_quarters(n);
    return out;
}

// The copy workers on the NUMA node of the staging pool's device, bound to its CPUs, so the
// staging memory they write is local to the device's DMA (docs/TRANSFERS.md, "NUMA"); the usual
// process-wide workers on a one-node host or where the device's node is unknown.
inline copy_workers& copy_workers_for(MappedPinnedPool& pool) {
    const numa::placement& p = numa::placement_of(pool.backend().device());
    return copy_workers::for_node(p.node, p.cpus);
}

// Takes k staging buffers of `chunk` bytes: pool hits once warm, no driver call.
inline void take_slots(std::array<staging_slot, 8>& slots, std::size_t k, MappedPinnedPool& pool, std::size_t chunk) {
    for (std::size_t i = 0; i < k; ++i) slots[i].acquire(pool, chunk);
}

inline cl::Event staged_upload(const cl::CommandQueue& q, MappedPinnedPool& pool, const device_range& dev,
                               std::size_t dev_off, const char* src, std::size_t n, const TransferOptions& o) {
    const std::size_t chunk = chunk_for(n, o);
    const std::vector<piece> pieces = plan_pieces(n, chunk, /*taper_end=*/true);
    const std::size_t chunks = pieces.size();
    const std::size_t k = std::min<std::size_t>(o.staging_buffers, chunks);
    const unsigned threads = o.copy_threads ? o.copy_threads : copy_workers::default_parts();
    copy_workers& workers = copy_workers_for(pool);
    std::array<staging_slot, 8> slots;  // handed back after their last copies, on an error path too
    std::vector<cl::Event> issued;
    issued.reserve(chunks);
    std::vector<cl_event> raw_wait;
    raw_events(o.wait_for, raw_wait);
    const bool ordered = in_order(q);
    take_slots(slots, k, pool, chunk);
    for (std::size_t i = 0; i < chunks; ++i) {
        auto& s = slots[i % k];
        const auto [off, len] = pieces[i];
        if (i >= k) wait(s.last);  // the slot's previous chunk has reached the device
        workers.copy(s.ptr, src + off, len, threads, /*stream=*/true);  // the DMA reads it next
        cl_event ev = nullptr;
        // On an in-order queue only the first chunk needs the caller's events (the rest follow
        // it); on an out-of-order queue every chunk waits for them.
        const bool first = i == 0 || !ordered;
        opencl::check(enqueue_copy(q(), true, dev, dev_off + off, s.ptr, len, CL_FALSE,
                                   first ? static_cast<cl_uint>(raw_wait.size()) : 0,
                                   first && !raw_wait.empty() ? raw_wait.data() : nullptr, &ev),
                      copy_call(true, dev));
        s.last = cl::Event(ev, false);
        issued.push_back(s.last);
        clFlush(q());
    }
    return all_of(q, issued, ordered);  // the slots go back (release_after their copies) on the way out
}

inline cl::Event staged_download(const cl::CommandQueue& q, MappedPinnedPool& pool, char* dst, const device_range& dev,
                                 std::size_t dev_off, std::size_t n, const TransferOptions& o) {
    const std::size_t chunk = chunk_for(n, o);
    const std::vector<piece> pieces = plan_pieces(n, chunk, /*taper_end=*/false);
    const std::size_t chunks = pieces.size();
    const std::size_t k = std::min<std::size_t>(o.staging_buffers, chunks);
    const unsigned threads = o.copy_threads ? o.copy_threads : copy_workers::default_parts();
    copy_workers& workers = copy_workers_for(pool);
    std::array<staging_slot, 8> slots;  // handed back after their last copies, on an error path too
    std::vector<cl_event> raw_wait;
    raw_events(o.wait_for, raw_wait);
    const bool ordered = in_order(q);
    auto enqueue_read = [&](std::size_t i) {
        auto& s = slots[i % k];
        const auto [off, len] = pieces[i];
        cl_event ev = nullptr;
        const bool first = i == 0 || !ordered;  // as in staged_upload
        opencl::check(enqueue_copy(q(), false, dev, dev_off + off, s.ptr, len, CL_FALSE,
                                   first ? static_cast<cl_uint>(raw_wait.size()) : 0,
                                   first && !raw_wait.empty() ? raw_wait.data() : nullptr, &ev),
                      copy_call(false, dev));
        s.last = cl::Event(ev, false);
        clFlush(q());
    };
    take_slots(slots, k, pool, chunk);
    for (std::size_t i = 0; i < k; ++i) enqueue_read(i);
    cl::Event last;
    for (std::size_t i = 0; i < chunks; ++i) {
        auto& s = slots[i % k];
        const auto [off, len] = pieces[i];
        wait(s.last);  // chunk i is in staging
        workers.copy(dst + off, s.ptr, len, threads);
        last = s.last;
        if (i + k < chunks) enqueue_read(i + k);
    }
    return last;  // complete: the bytes are already in dst
}

}  // namespace detail

namespace detail {
inline cl::Event upload_in_range(const cl::CommandQueue&, const device_range&, std::size_t, const void*, std::size_t,
                                 const TransferOptions&);
inline cl::Event download_in_range(const cl::CommandQueue&, void*, const device_range&, std::size_t, std::size_t,
                                   const TransferOptions&);
}  // namespace detail

// Copies n bytes from host memory `src` into `dst` at byte offset dst_offset,
// enqueued on `queue` after the work already there (and o.wait_for).
// Returns an event that completes when the whole copy has reached the device.
//
// Paths: pinned host memory (a PinnedAllocator container, or
// o.host_is_pinned), transfers of at most o.direct_max_bytes, CLPOOL_PINNED_H2D=0,
// and devices with host-unified memory (CPU, integrated GPU; unless
// CLPOOL_PINNED_H2D=1 or o.stage) go straight to clEnqueueWriteBuffer. Larger pageable
// sources are copied chunk by chunk into pinned staging buffers (from
// o.staging_pool or get_mapped_pinned_pool(queue), mapped for as long as the pool
// keeps them) while earlier chunks move; the
// call returns once the last chunk is in staging, so `src` may be reused at
// once, and each staging buffer goes back to its pool to be reused only after
// its copy completed. A direct upload from pageable memory of at most
// o.direct_max_bytes with no o.wait_for is a blocking write (the call returns
// when the copy is done, after the work already on an in-order queue; the
// event is complete): a non-blocking one gains nothing there and costs a
// round trip. On the other direct paths `src` must stay unchanged until the
// event completes (as with any non-blocking enqueueWriteBuffer), unless the
// upload is blocking (CLPOOL_ASYNC_H2D=0 or o.async=false). CLPOOL_ASYNC_H2D=1
// permits an early return, it does not promise one. A staged upload of more than
// staging_buffers * chunk_bytes waits on the host for earlier chunks' copies:
// if o.wait_for never completes, such a call never returns.
//
// Throws size_error (the range runs past dst), usage_error (null src, an
// empty handle, a null cl::Buffer or cl::CommandQueue), config_error (bad options or CLPOOL_* value), driver_error, and the
// staging pool's out_of_memory. On a throw no staging buffer is handed out
// again while a copy may still use it.
// Cost: direct: one enqueue. Staged: per staging buffer a pool hit (no map or
// unmap: the pool keeps them mapped), per chunk a host copy on copy_threads
// threads, an enqueue and a flush; waits on the host only for a staging
// buffer's previous chunk.
// Thread-safe as far as the queue is (OpenCL queues are).
inline cl::Event upload(const cl::CommandQueue& queue, const cl::Buffer& dst, std::size_t dst_offset, const void* src,
                        std::size_t n, const TransferOptions& o = {}) {
    detail::check_buffer(dst, "upload", "into", dst_offset, n);
    detail::check_range(dst_offset, n, detail::buffer_size(dst), src);
    return detail::upload_in_range(queue, {dst(), nullptr, 0}, dst_offset, src, n, o);
}

namespace detail {
// upload() once the range is known to fit (a handle's range needs no driver query).
inline cl::Event upload_in_range(const cl::CommandQueue& queue, const device_range& dst, std::size_t dst_offset,
                                 const void* src, std::size_t n, const TransferOptions& o) {
    detail::check_queue(queue, "upload", n);
    detail::validate_options(o);
    const bool blocking = !o.async.value_or(config::async_h2d());
    if (n == 0) return detail::all_of(queue, o.wait_for);
    cl::Event done;
    if (MappedPinnedPool* pool = detail::staging_pool_for(queue, src, n, o)) {
        done = detail::staged_upload(queue, *pool, dst, dst_offset, static_cast<const char*>(src), n, o);
        if (blocking) detail::wait(done);
    } else {
        done = detail::direct(queue, true, dst, dst_offset, const_cast<void*>(src), n,
                              detail::direct_blocks(true, src, n, o, blocking), o.wait_for);
    }
    return done;
}
}  // namespace detail

// Copies n bytes of `src` from byte offset src_offset into host memory `dst`,
// after the work already on `queue` (and o.wait_for). Returns an event that
// completes when `dst` holds the bytes.
//
// Direct (pinned dst, small, or CLPOOL_PINNED_H2D=0): one clEnqueueReadBuffer,
// blocking when dst is pageable and o.wait_for is empty (the call returns with
// the bytes in dst and a complete event; it still waits for the work already
// on an in-order queue, so do not call it behind a command held by a user
// event you set later), else non-blocking: wait on the event before reading
// dst. Staged (large
// pageable dst): chunks are read into pinned staging buffers and copied out
// on the host as each one lands, so the call returns when dst is filled and
// the returned event is already complete (like CUDA's pageable D2H copy).
// Throws as upload. Thread-safe as far as the queue is.
inline cl::Event download(const cl::CommandQueue& queue, void* dst, const cl::Buffer& src, std::size_t src_offset,
                          std::size_t n, const TransferOptions& o = {}) {
    detail::check_buffer(src, "download", "from", src_offset, n);
    detail::check_range(src_offset, n, detail::buffer_size(src), dst);
    return detail::download_in_range(queue, dst, {src(), nullptr, 0}, src_offset, n, o);
}

namespace detail {
// download() once the range is known to fit.
inline cl::Event download_in_range(const cl::CommandQueue& queue, void* dst, const device_range& src,
                                   std::size_t src_offset, std::size_t n, const TransferOptions& o) {
    detail::check_queue(queue, "download", n);
    detail::validate_options(o);
    if (n == 0) return detail::all_of(queue, o.wait_for);
    if (MappedPinnedPool* pool = detail::staging_pool_for(queue, dst, n, o)) {
        return detail::staged_download(queue, *pool, static_cast<char*>(dst), src, src_offset, n, o);
    }
    return detail::direct(queue, false, src, src_offset, dst, n, detail::direct_blocks(false, dst, n, o, false),
                          o.wait_for);
}
}  // namespace detail

namespace detail {
// Where a pooled handle's bytes are: its cl::Buffer; for a block carved from a
// buffer arena, its segment at its offset (no sub-buffer needed); for SVM, its pointer.
template <class Memory>
device_range range_of(const Memory& m) noexcept {
    if constexpr (std::derived_from<Memory, SVMSpan>) return {nullptr, static_cast<char*>(m.get()), 0};
    else if constexpr (std::derived_from<Memory, USMSpan>) return {nullptr, static_cast<char*>(m.get()), 0, m.calls()};
    else if constexpr (requires {
                           { m.segment() } -> std::convertible_to<const cl::Buffer&>;
                           { m.offset() } -> std::same_as<std::size_t>;
                       })
        return {static_cast<const cl::Buffer&>(m.segment())(), nullptr, m.offset()};
    else return {m(), nullptr, 0};
}
template <class Memory>
concept transferable_memory = std::same_as<Memory, cl::Buffer> || std::derived_from<Memory, SVMSpan> ||
                              std::derived_from<Memory, USMSpan> || requires(const Memory& m) {
                                  { m.segment() } -> std::convertible_to<const cl::Buffer&>;
                                  { m.offset() } -> std::same_as<std::size_t>;
                              };
}  // namespace detail

// The same for a pooled handle of any OpenCL pool (BufferPool, the arenas,
// OffsetArenaPool, the SVM and USM pools): the range is checked against h.nbytes()
// (the caller's part of the block), not the larger bucket. An SVM handle's
// copies are clEnqueueSVMMemcpy, staged through pinned memory as above.
template <class Pool>
    requires detail::transferable_memory<typename Pool::memory_type>
cl::Event upload(const cl::CommandQueue& queue, const Handle<Pool>& dst, std::size_t dst_offset, const void* src,
                 std::size_t n, const TransferOptions& o = {}) {
    if (!dst)
        throw usage_error("clpool: upload of " + std::to_string(n) + " bytes at offset " + std::to_string(dst_offset) +
                          " into an empty handle (0 bytes: it holds no buffer)");
    detail::check_range(dst_offset, n, dst.nbytes(), src);  // nbytes <= the buffer's size
    return detail::upload_in_range(queue, detail::range_of(dst.buffer()), dst_offset, src, n, o);
}
template <class Pool>
    requires detail::transferable_memory<typename Pool::memory_type>
cl::Event download(const cl::CommandQueue& queue, void* dst, const Handle<Pool>& src, std::size_t src_offset,
                   std::size_t n, const TransferOptions& o = {}) {
    if (!src)
        throw usage_error("clpool: download of " + std::to_string(n) + " bytes at offset " +
                          std::to_string(src_offset) + " from an empty handle (0 bytes: it holds no buffer)");
    detail::check_range(src_offset, n, src.nbytes(), dst);  // nbytes <= the buffer's size
    return detail::download_in_range(queue, dst, detail::range_of(src.buffer()), src_offset, n, o);
}

// Copies into / out of shared virtual memory not held by a pool handle:
// `dst` / `src` is n or more bytes at an SVM pointer (its size() bounds the range).
inline cl::Event upload(const cl::CommandQueue& queue, const SVMSpan& dst, std::size_t dst_offset, const void* src,
                        std::size_t n, const TransferOptions& o = {}) {
    if (!dst)
        throw usage_error("clpool: upload of " + std::to_string(n) + " bytes at offset " + std::to_string(dst_offset) +
                          " into a null SVM pointer");
    detail::check_range(dst_offset, n, dst.size(), src);
    return detail::upload_in_range(queue, detail::range_of(dst), dst_offset, src, n, o);
}
inline cl::Event download(const cl::CommandQueue& queue, void* dst, const SVMSpan& src, std::size_t src_offset,
                          std::size_t n, const TransferOptions& o = {}) {
    if (!src)
        throw usage_error("clpool: download of " + std::to_string(n) + " bytes at offset " +
                          std::to_string(src_offset) + " from a null SVM pointer");
    detail::check_range(src_offset, n, src.size(), dst);
    return detail::download_in_range(queue, dst, detail::range_of(src), src_offset, n, o);
}

}  // namespace clpool
