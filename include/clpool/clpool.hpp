// clpool: pool allocators for OpenCL buffers and pinned host memory. The umbrella header.
#pragma once

#include <clpool/aliases.hpp>
#include <clpool/backend.hpp>
#include <clpool/config.hpp>
#include <clpool/errors.hpp>
#include <clpool/handle.hpp>
#include <clpool/pool.hpp>
#include <clpool/shape_trie.hpp>
#include <clpool/stats.hpp>
#include <clpool/backends/host.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#include <clpool/policies/thread_cached.hpp>

// The OpenCL parts need OpenCL-CLHPP; define CLPOOL_NO_OPENCL to build
// without them (the host backend alone).
#if !defined(CLPOOL_NO_OPENCL) && __has_include(<CL/opencl.hpp>)
#define CLPOOL_HAS_OPENCL 1
#include <clpool/dropin.hpp>
#include <clpool/opencl.hpp>
#include <clpool/pinned_allocator.hpp>
#include <clpool/registry.hpp>
#include <clpool/shape_mirror.hpp>
#include <clpool/transfer.hpp>
#endif

// Devices and the process lifecycle (with or without OpenCL).
#include <clpool/device.hpp>
#include <clpool/host_registry.hpp>
#include <clpool/lifecycle.hpp>
