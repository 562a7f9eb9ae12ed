// The OpenCL pools: BufferPool, PinnedBufferPool, PersistentBufferPool, the arenas over OpenCLBackend, and the SVM pools.
#pragma once

#include <clpool/pools/aliases.hpp>
#include <clpool/backends/mapped_pinned.hpp>
#include <clpool/backends/opencl.hpp>
#include <clpool/backends/opencl_offsets.hpp>
#include <clpool/backends/svm.hpp>
#include <clpool/backends/usm.hpp>
#include <clpool/core/backend.hpp>
#include <clpool/core/handle.hpp>

#include <concepts>
#include <cstddef>

namespace clpool {

// Each is constructible from a cl::Context (or a cl::CommandQueue):
//   clpool::BufferPool pool(context);
using BufferPool = BasicBufferPool<OpenCLBackend>;
using PinnedBufferPool = BasicPinnedBufferPool<OpenCLBackend>;
using PersistentBufferPool = BasicPersistentBufferPool<OpenCLBackend>;
// Pinned staging buffers that stay mapped while pooled: handle.buffer().host()
// is usable at once, no map/unmap per use (what upload/download stage through).
using MappedPinnedPool = BasicPinnedBufferPool<MappedPinnedBackend>;
// Low-waste device memory: blocks are sub-buffers carved from 2 MiB and 20 MiB
// segments (docs/ARENA.md), for kernels that need a cl::Buffer per block.
using ArenaPool = BasicArenaPool<OpenCLBackend>;
// Pinned staging buffers carved from a few large pinned segments.
using PinnedArenaPool = BasicPinnedArenaPool<OpenCLBackend>;
// Mapped pinned staging buffers (h.buffer().host(), h.buffer().buffer()) carved
// from a few mapped pinned segments: one pinned allocation and one map serve many.
using MappedPinnedArenaPool = BasicPinnedArenaPool<MappedPinnedBackend>;
// The buffer arena with offset handles, fast and frugal (what an engine should
// pick, README): a block is h.buffer().segment() at h.buffer().offset(), and
// carving one makes no driver call;
// h.buffer().sub_buffer() makes a cl::Buffer of it only when asked for.
using OffsetArenaPool = BasicArenaPool<OpenCLOffsetBackend>;
// Coarse-grained shared virtual memory (OpenCL 2.0+): h.buffer().as<float>()
// is a device pointer. SVMPool caches whole clSVMAlloc allocations in
// power-of-two buckets; SVMArenaPool carves blocks out of a few large ones by
// pointer arithmetic, with no driver call per block (docs/SVM.md).
using SVMPool = BasicBufferPool<SVMBackend>;
using SVMArenaPool = BasicArenaPool<SVMBackend>;
// Intel unified shared memory (cl_intel_unified_shared_memory: Intel GPUs,
// PoCL 4+): device USM by default (USMBackend(context, USMKind::shared) for
// shared); h.buffer().as<float>() is the pointer. The same two pools as SVM.
using USMPool = BasicBufferPool<USMBackend>;
using USMArenaPool = BasicArenaPool<USMBackend>;

// OpenCL has no sub-buffer of a sub-buffer, and a sub-allocated block is one:
// clCreateSubBuffer on h.buffer() fails with CL_INVALID_MEM_OBJECT on a
// conformant driver (NVIDIA's accepts it: docs/ARENA.md). This makes
// the sub-buffer of n bytes at `offset` into the block from the block's
// segment instead. Refused (failed, CL_INVALID_VALUE) unless it lies within
// the nbytes() the holder asked for; the origin must keep the device's
// base-address alignment (else CL_MISALIGNED_SUB_BUFFER_OFFSET). The result
// must not outlive the handle. Never throws.
template <class P>
    requires requires(const typename P::memory_type& m) {
        { m.segment() } -> std::convertible_to<const cl::Buffer&>;
        { m.offset() } -> std::same_as<std::size_t>;
    }
Allocation<cl::Buffer> sub_buffer_of(const Handle<P>& h, std::size_t offset, std::size_t n) noexcept {
    if (!h || n == 0 || offset > h.nbytes() || n > h.nbytes() - offset)
        return {cl::Buffer(), AllocStatus::failed, CL_INVALID_VALUE};
    return opencl::sub_buffer(h.buffer().segment(), h.buffer().offset() + offset, n);
}

// Hands h back once every command enqueued on `queue` so far has completed
// (a marker's event). On an in-order queue where the next owner also works,
// a plain release() is already safe; this is for reuse across queues.
// Never throws; if the marker cannot be enqueued it finishes the queue first.
template <class Pool>
void release_after(Handle<Pool>& h, const cl::CommandQueue& queue) noexcept {
    if (!h) return;
    cl_event marker = nullptr;
    if (clEnqueueMarkerWithWaitList(queue(), 0, nullptr, &marker) == CL_SUCCESS) {
        const cl::Event e(marker, false);
        h.release_after(&e, 1);
    } else {
        clFinish(queue());
        h.release();
    }
}

}  // namespace clpool
