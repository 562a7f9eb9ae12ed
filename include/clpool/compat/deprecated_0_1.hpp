// The spellings of clpool 0.1's public types, kept for one minor version:
// a program written against 0.1 compiles, and each use warns with the name
// that replaces it. CHANGELOG.md ("Migrating from 0.1") lists every change.
// The umbrella <clpool/clpool.hpp> and each of 0.1's header paths (the
// compat/ include root) include this header; the spellings of the shape and
// PinnedAllocator types are in deprecated_0_1_shapes.hpp and
// deprecated_0_1_interop.hpp, which the umbrella and 0.1's paths of their
// headers include.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/has_opencl.hpp>
#include <clpool/core/memory_kind.hpp>
#include <clpool/devices/device_description.hpp>
#include <clpool/devices/device_handle.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/shutdown.hpp>
#include <clpool/runtime/waits.hpp>

namespace clpool {

using alloc_status [[deprecated("use clpool::AllocStatus")]] = AllocStatus;
template <class Memory>
using allocation [[deprecated("use clpool::Allocation")]] = Allocation<Memory>;
using memory_kind [[deprecated("use clpool::MemoryKind")]] = MemoryKind;

using backend_kind [[deprecated("use clpool::BackendKind")]] = BackendKind;
using device_type [[deprecated("use clpool::DeviceType")]] = DeviceType;
using device_facts [[deprecated("use clpool::DeviceFacts")]] = DeviceFacts;
using device_description [[deprecated("use clpool::DeviceDescription")]] = DeviceDescription;
using device_match [[deprecated("use clpool::DeviceMatch")]] = DeviceMatch;
using device_scope [[deprecated("use clpool::DeviceScope")]] = DeviceScope;

using shutdown_report [[deprecated("use clpool::ShutdownReport")]] = ShutdownReport;
#ifdef CLPOOL_HAS_OPENCL
using wait_status [[deprecated("use clpool::WaitStatus")]] = WaitStatus;
using wait_options [[deprecated("use clpool::WaitOptions")]] = WaitOptions;
#endif
using interrupt_handler_options [[deprecated("use clpool::InterruptHandlerOptions")]] = InterruptHandlerOptions;

}  // namespace clpool
