// torch_shim: calls into PyTorch's CUDA device and pinned-host caching allocators.
#include "torch_shim.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#if __has_include(<ATen/cuda/PinnedMemoryAllocator.h>)
#include <ATen/cuda/PinnedMemoryAllocator.h>
#define CLPOOL_TORCH_PINNED() at::cuda::getPinnedMemoryAllocator()
#else
#include <ATen/core/CachingHostAllocator.h>
#define CLPOOL_TORCH_PINNED() at::getHostAllocator(at::kCUDA)
#endif
#if __has_include(<torch/csrc/cuda/memory_snapshot.h>)
#include <torch/csrc/cuda/memory_snapshot.h>
#define CLPOOL_TORCH_HISTORY 1
#endif
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include <exception>
#include <optional>
#include <string>

namespace {
c10::Allocator* pinned = nullptr;
std::string failure;
}  // namespace

extern "C" const char* clpool_torch_init(void) {
    try {
        // Outside Python nothing has set the allocator up yet (raw_alloc would
        // assert "Allocator not initialized for device"): size it for every device.
        c10::cuda::CUDACachingAllocator::init(c10::cuda::device_count());
        void* p = c10::cuda::CUDACachingAllocator::raw_alloc(256);
        c10::cuda::CUDACachingAllocator::raw_delete(p);
        pinned = CLPOOL_TORCH_PINNED();
        { auto d = pinned->allocate(256); }
        return nullptr;
    } catch (const std::exception& e) {
        failure = e.what();
        return failure.c_str();
    }
}

extern "C" const char* clpool_torch_version(void) {
#ifdef TORCH_VERSION
    return TORCH_VERSION;
#else
    return "unknown";
#endif
}

extern "C" void clpool_torch_device_pair(size_t n) {
    void* p = c10::cuda::CUDACachingAllocator::raw_alloc(n);
    c10::cuda::CUDACachingAllocator::raw_delete(p);
}

extern "C" void clpool_torch_pinned_pair(size_t n) {
    auto d = pinned->allocate(n);  // freed (back to Torch's cache) when d goes
    (void)d;
}

extern "C" const char* clpool_torch_record_history(size_t max_entries) {
#ifdef CLPOOL_TORCH_HISTORY
    try {
        // enabled "all" records every alloc and free; context none: no call sites.
        const std::optional<std::string> enabled =
            max_entries ? std::optional<std::string>("all") : std::optional<std::string>();
        torch::cuda::_record_memory_history(enabled, std::optional<std::string>(), std::string("all"),
                                            max_entries ? max_entries : 1);
        return nullptr;
    } catch (const std::exception& e) {
        failure = e.what();
        return failure.c_str();
    }
#else
    (void)max_entries;
    return "this Torch has no torch/csrc/cuda/memory_snapshot.h";
#endif
}
