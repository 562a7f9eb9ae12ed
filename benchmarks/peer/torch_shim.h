// torch_shim: PyTorch's caching allocators behind a plain C interface (Torch's ABI flags stay inside).
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Starts CUDA through Torch. Returns 0, or a message naming what failed.
const char* clpool_torch_init(void);
// The Torch version string, e.g. "2.5.1".
const char* clpool_torch_version(void);
// One allocate + free of n bytes through c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete.
void clpool_torch_device_pair(size_t n);
// One allocate + free of n bytes through Torch's CUDA pinned (host) caching allocator.
void clpool_torch_pinned_pair(size_t n);
// Turns the device allocator's history on, keeping the last max_entries events
// and no call sites (Python's _record_memory_history(context=None)), or off
// (max_entries 0). Returns 0, or a message naming what failed.
const char* clpool_torch_record_history(size_t max_entries);

#ifdef __cplusplus
}
#endif
