// The interposer's way down to the real OpenCL: the next dispatch table and the re-entry guard.
#pragma once

#include <CL/cl_icd.h>

namespace clpool::interpose {

// The functions below this library: the ICD loader's (preload front) or the
// next layer's (layer front). Set by a front before the core first runs.
extern const cl_icd_dispatch* g_next;
inline const cl_icd_dispatch& next() noexcept { return *g_next; }

// Calls made while the core works (its own, and the pool's through CL-HPP)
// must reach the driver, not the core again: with LD_PRELOAD they land on
// this library's own exported symbols, and as a layer the loader sends them
// back through the layer. Every entry point forwards to next() while the
// depth is non-zero. Thread-local: other threads' calls are the application's.
inline thread_local int tl_depth = 0;
inline bool in_core() noexcept { return tl_depth > 0; }

struct core_scope {
    core_scope() noexcept { ++tl_depth; }
    ~core_scope() { --tl_depth; }
    core_scope(const core_scope&) = delete;
    core_scope& operator=(const core_scope&) = delete;
};

// Application callbacks run as application code: their OpenCL calls are intercepted.
struct app_scope {
    int saved;
    app_scope() noexcept : saved(tl_depth) { tl_depth = 0; }
    ~app_scope() { tl_depth = saved; }
    app_scope(const app_scope&) = delete;
    app_scope& operator=(const app_scope&) = delete;
};

}  // namespace clpool::interpose
