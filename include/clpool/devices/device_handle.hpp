// DeviceHandle and device choice: select_device, default_device, current_device, DeviceScope.
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/core/has_opencl.hpp>
#include <clpool/platform/process_state.hpp>
#include <clpool/devices/device_description.hpp>
#include <clpool/devices/device_list.hpp>
#include <clpool/devices/selector.hpp>
#include <clpool/pools/host_registry.hpp>
#include <clpool/runtime/config.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>
#include <clpool/runtime/queue_registry.hpp>
#endif

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace clpool {

namespace detail {
class device_manager;
}

// One selected device: its names, backend, type and facts, its context and
// in-order queue (OpenCL), and the way to its pools. Made by select_device()
// and friends, one per device per process, and never destroyed (so no OpenCL
// call runs at exit); hold it by reference. Thread-safe (const).
class DeviceHandle {
public:
    DeviceHandle(const DeviceHandle&) = delete;
    DeviceHandle& operator=(const DeviceHandle&) = delete;

    const std::string& platform_name() const noexcept { return platform_name_; }
    const std::string& device_name() const noexcept { return device_name_; }
    BackendKind backend() const noexcept { return backend_; }
    DeviceType type() const noexcept { return type_; }
    const DeviceFacts& facts() const noexcept { return facts_; }
    // "'name' (gpu, opencl, platform 'P')" for messages and logs.
    std::string describe() const {
        return "'" + device_name_ + "' (" + to_string(type_) + ", " + to_string(backend_) + ", platform '" +
               platform_name_ + "')";
    }
    // False in a fork child for a handle made in the parent (its OpenCL
    // objects are the parent's; select the device again in the child).
    bool usable() const noexcept { return backend_ == BackendKind::host || detail::same_process(generation_); }

#ifdef CLPOOL_HAS_OPENCL
    // The context and in-order queue; empty (null) objects for the host backend.
    const cl::Context& context() const noexcept { return context_; }
    const cl::CommandQueue& queue() const noexcept { return queue_; }
    cl_device_id device_id() const noexcept { return id_; }

    // The per-context pools of this device (get_buffer_pool(queue()) ...).
    // Throws usage_error for the host backend (use host_buffer_pool() or
    // with_buffer_pool), in a fork child for a parent's handle, or after
    // shutdown(). Thread-safe.
    BufferPool& buffer_pool() const { return get_buffer_pool(opencl_queue("buffer_pool")); }
    PinnedBufferPool& pinned_pool() const { return get_pinned_pool(opencl_queue("pinned_pool")); }
    PersistentBufferPool& persistent_pool() const { return get_persistent_pool(opencl_queue("persistent_pool")); }
#endif

    // The process-wide host pools (any backend). Throw usage_error after shutdown().
    host::BufferPool& host_buffer_pool() const { return get_host_buffer_pool(); }
    host::PinnedBufferPool& host_pinned_pool() const { return get_host_pinned_pool(); }
    host::PersistentBufferPool& host_persistent_pool() const { return get_host_persistent_pool(); }

    // Calls f with this device's general-purpose pool: BufferPool& for
    // OpenCL, host::BufferPool& for the host backend, and returns what f
    // returns (the same type for both). Throws what the accessors throw.
    template <class F>
    decltype(auto) with_buffer_pool(F&& f) const {
#ifdef CLPOOL_HAS_OPENCL
        if (backend_ == BackendKind::opencl) return std::forward<F>(f)(buffer_pool());
#endif
        return std::forward<F>(f)(host_buffer_pool());
    }

    // Waits for everything queued on the device's queue (nothing to wait for
    // on the host backend). Throws driver_error if clFinish fails,
    // usage_error in a fork child for a parent's handle. Blocks the caller;
    // runtime/waits.hpp has a wait that Ctrl+C can interrupt.
    void finish() const {
#ifdef CLPOOL_HAS_OPENCL
        if (backend_ == BackendKind::opencl) opencl::check(clFinish(opencl_queue("finish")()), "clFinish");
#endif
    }

private:
    friend class detail::device_manager;
    DeviceHandle() = default;

#ifdef CLPOOL_HAS_OPENCL
    const cl::CommandQueue& opencl_queue(const char* what) const {
        if (backend_ != BackendKind::opencl)
            throw usage_error(std::string("clpool: DeviceHandle::") + what + " on " + describe() +
                              ", a host-backend device: use host_buffer_pool() or with_buffer_pool()");
        if (!usable())
            throw usage_error(std::string("clpool: DeviceHandle::") + what + " on " + describe() +
                              " in a fork child: the handle holds the parent's OpenCL objects; call "
                              "select_device() again in the child");
        return queue_;
    }
    cl::Context context_;
    cl::CommandQueue queue_;
    cl_device_id id_ = nullptr;
#endif
    std::string platform_name_, device_name_;
    BackendKind backend_ = BackendKind::host;
    DeviceType type_ = DeviceType::cpu;
    DeviceFacts facts_;
    std::uint32_t generation_ = 0;
};

namespace detail {

// Owns the DeviceHandles of this process: one per device, made on first
// selection, never destroyed. A fork child gets a fresh manager (the
// parent's handles are leaked there, never released).
class device_manager {
public:
    static device_manager& instance() {
        static std::atomic<device_manager*> current{nullptr};
        device_manager* m = current.load(std::memory_order_acquire);
        const auto gen = birth_generation();
        if (m && m->generation_ == gen) return *m;
        auto* fresh = new device_manager(gen);  // intentionally never deleted
        if (current.compare_exchange_strong(m, fresh, std::memory_order_acq_rel)) return *fresh;
        delete fresh;
        return *m;
    }

    const DeviceHandle& host() {
        std::lock_guard lock(mutex_);
        if (!host_) {
            auto* h = new DeviceHandle;
            h->platform_name_ = "host";
            h->device_name_ = "host memory";
            h->backend_ = BackendKind::host;
            h->type_ = DeviceType::cpu;
            h->facts_ = host_device_facts();
            h->generation_ = generation_;
            host_ = h;
        }
        return *host_;
    }

#ifdef CLPOOL_HAS_OPENCL
    const DeviceHandle& open(const DeviceDescription& d) {
        std::lock_guard lock(mutex_);
        auto& slot = devices_[d.id];
        if (slot) return *slot;
        auto h = std::unique_ptr<DeviceHandle>(new DeviceHandle);
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
        opencl::check(err, "clCreateContext");
        h->context_ = cl::Context(ctx, false);
        cl_command_queue q = opencl::create_queue(ctx, d.id, &err);
        opencl::check(err, "clCreateCommandQueue");
        h->queue_ = cl::CommandQueue(q, false);
        h->id_ = d.id;
        h->platform_name_ = d.platform_name;
        h->device_name_ = d.device_name;
        h->backend_ = BackendKind::opencl;
        h->type_ = d.type;
        h->facts_ = query_device_facts(d.id);
        h->generation_ = generation_;
        queue_registry::instance().add(q);  // finished at exit and by shutdown()
        slot = h.release();                 // never deleted: no OpenCL call at exit
        return *slot;
    }
#endif

private:
    explicit device_manager(std::uint32_t gen) : generation_(gen) {}
    const std::uint32_t generation_;
    std::mutex mutex_;
    DeviceHandle* host_ = nullptr;
#ifdef CLPOOL_HAS_OPENCL
    std::map<cl_device_id, DeviceHandle*> devices_;
#endif
};

inline const DeviceHandle& select_from(std::string_view selector, std::string_view source) {
    if (shut_down())
        throw usage_error("clpool: device selection ('" + std::string(selector) +
                          "') after clpool::shutdown(); nothing accepts work once shutdown() has run");
    const auto devices = list_devices();
    const auto m = match_device(selector, devices, source);
    if (m.backend == BackendKind::host) return device_manager::instance().host();
#ifdef CLPOOL_HAS_OPENCL
    return device_manager::instance().open(devices[m.index]);
#else
    return device_manager::instance().host();  // unreachable: without OpenCL nothing else matches
#endif
}

inline thread_local const DeviceHandle* scoped_device = nullptr;

}  // namespace detail

// The device a selector names (match_device has the grammar), with its
// context and queue made on first selection and shared by every later
// selection of the same device in this process. Throws config_error (no
// match; the message lists every device), driver_error (the context or queue
// cannot be made), usage_error (after shutdown()). Cost: enumerates the
// platforms on every call; keep the handle. Thread-safe.
inline const DeviceHandle& select_device(std::string_view selector) {
    return detail::select_from(selector, "device selector");
}

// The process's default device: CLPOOL_DEVICE if set, else "auto", resolved
// on first use and kept (a fork child resolves again). Throws as
// select_device does, config_error naming CLPOOL_DEVICE for a bad value.
// Cost: one atomic load after the first call. Thread-safe.
inline const DeviceHandle& default_device() {
    static std::atomic<const DeviceHandle*> cached{nullptr};
    const DeviceHandle* d = cached.load(std::memory_order_acquire);
    if (d && d->usable() && !detail::shut_down()) return *d;
    const bool from_env = config::read("CLPOOL_DEVICE").has_value();
    d = &detail::select_from(config::device_spec(), from_env ? "CLPOOL_DEVICE" : "default device");
    cached.store(d, std::memory_order_release);
    return *d;
}

// The innermost DeviceScope's device on this thread, else default_device().
// Throws as default_device does. Thread-safe (per-thread state).
inline const DeviceHandle& current_device() {
    const DeviceHandle* d = detail::scoped_device;
    if (d && d->usable()) return *d;  // a parent's scope in a fork child falls back to the default
    return default_device();
}

// Makes a device the current one on this thread until the scope ends, then
// restores the previous one. Scopes nest (destroy them in reverse order, as
// blocks do). Neither copies nor moves.
class DeviceScope {
public:
    explicit DeviceScope(const DeviceHandle& device) noexcept
        : device_(device), previous_(std::exchange(detail::scoped_device, &device)) {}
    // Selects by selector first; throws as select_device does (and then changes nothing).
    explicit DeviceScope(std::string_view selector) : DeviceScope(select_device(selector)) {}
    ~DeviceScope() { detail::scoped_device = previous_; }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

    const DeviceHandle& device() const noexcept { return device_; }

private:
    const DeviceHandle& device_;
    const DeviceHandle* previous_;
};

}  // namespace clpool
