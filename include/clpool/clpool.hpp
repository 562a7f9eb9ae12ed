// clpool: pool allocators for OpenCL buffers and pinned host memory. The umbrella header: every
// public part but the drop-in (<clpool/interop/dropin.hpp>), which a CL-HPP application opts into
// by including it before <CL/opencl.hpp>, and which defines the C pair under a macro of its own.
#pragma once

#include <clpool/core/has_opencl.hpp>

// The core and its policies (docs/DESIGN.md, "Layers").
#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/handle.hpp>
#include <clpool/core/pool.hpp>
#include <clpool/core/stats.hpp>
#include <clpool/policies/arena_buckets.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#include <clpool/policies/thread_cached.hpp>
#include <clpool/backends/host.hpp>
#include <clpool/backends/sub_allocated.hpp>

// Capabilities with or without OpenCL.
#include <clpool/runtime/config.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/shutdown.hpp>
#include <clpool/runtime/waits.hpp>
#include <clpool/pools/aliases.hpp>
#include <clpool/pools/host_registry.hpp>
#include <clpool/devices/device_handle.hpp>
#include <clpool/devices/device_list.hpp>
#include <clpool/devices/selector.hpp>
#include <clpool/shapes/shape_trie.hpp>

// The OpenCL parts need OpenCL-CLHPP; define CLPOOL_NO_OPENCL to build
// without them (the host backend alone).
#ifdef CLPOOL_HAS_OPENCL
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>
#include <clpool/interop/pinned_allocator.hpp>
#include <clpool/interop/transfer.hpp>
#include <clpool/interop/svm.hpp>
#include <clpool/shapes/shape_mirror.hpp>
#endif

// clpool 0.1's spellings of these headers' types, deprecated (CHANGELOG.md, "Migrating from 0.1").
#include <clpool/compat/deprecated_0_1.hpp>
#include <clpool/compat/deprecated_0_1_interop.hpp>
#include <clpool/compat/deprecated_0_1_shapes.hpp>
