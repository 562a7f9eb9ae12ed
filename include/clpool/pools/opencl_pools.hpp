// The OpenCL pools: BufferPool, PinnedBufferPool, PersistentBufferPool over OpenCLBackend.
#pragma once

#include <clpool/pools/aliases.hpp>
#include <clpool/backends/mapped_pinned.hpp>
#include <clpool/backends/opencl.hpp>

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
// segments (docs/ARENA.md). What an engine should pick by default (README).
using ArenaPool = BasicArenaPool<OpenCLBackend>;
// Pinned staging buffers carved from a few large pinned segments.
using PinnedArenaPool = BasicPinnedArenaPool<OpenCLBackend>;

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
