// Devices: enumeration, selection by a string (CLPOOL_DEVICE), DeviceHandle, the scoped current device.
#pragma once

#include <clpool/runtime/config.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/pools/host_registry.hpp>
#include <clpool/backends/host.hpp>
#include <clpool/core/has_opencl.hpp>
#include <clpool/core/detail/process_state.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include <clpool/pools/opencl_pools.hpp>
#include <clpool/pools/registry.hpp>
#include <clpool/runtime/detail/queue_registry.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clpool {

// Which Backend a device's pools use.
enum class backend_kind : unsigned char { opencl, host };
// What kind of device it is; the host backend reports cpu.
enum class device_type : unsigned char { gpu, cpu, accelerator, other };

constexpr const char* to_string(backend_kind b) noexcept { return b == backend_kind::opencl ? "opencl" : "host"; }
constexpr const char* to_string(device_type t) noexcept {
    switch (t) {
        case device_type::gpu: return "gpu";
        case device_type::cpu: return "cpu";
        case device_type::accelerator: return "accelerator";
        default: return "other";
    }
}

// The facts about a device that the pools and their users need.
struct device_facts {
    bool unified_memory = false;         // shares host memory (integrated GPU, CPU device, host backend)
    bool fp16 = false;                   // cl_khr_fp16: half-precision kernels are available
    std::size_t max_alloc = 0;           // CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes
    std::size_t base_address_align = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes (OpenCL reports bits)
    std::size_t global_memory = 0;       // CL_DEVICE_GLOBAL_MEM_SIZE, bytes (0: unknown)
};

// One OpenCL device as enumerated: list_devices() order is platform by
// platform, each platform's devices in the order the driver gives them.
struct device_description {
    std::size_t index = 0;           // position in list_devices()
    std::size_t platform_index = 0;  // the "P" of a "P:D" selector
    std::size_t device_index = 0;    // the "D": position within its platform
    std::string platform_name, platform_vendor, device_name;
    device_type type = device_type::other;
#ifdef CLPOOL_HAS_OPENCL
    cl_device_id id = nullptr;
#endif
};

// What a selector resolved to: the host backend, or list_devices()[index].
struct device_match {
    backend_kind backend = backend_kind::host;
    std::size_t index = 0;
    friend bool operator==(const device_match&, const device_match&) = default;
};

namespace detail {

inline std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}
inline bool contains_nocase(std::string_view hay, std::string_view needle) {
    return lower(hay).find(lower(needle)) != std::string::npos;
}
inline std::optional<std::size_t> parse_index(std::string_view s) {
    std::size_t v = 0;
    if (s.empty() || s.size() > 9) return std::nullopt;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

// The first GPU among the candidates, else the first candidate.
template <class Pred>
std::optional<std::size_t> prefer_gpu(std::span<const device_description> devices, Pred pred) {
    std::optional<std::size_t> first;
    for (const auto& d : devices) {
        if (!pred(d)) continue;
        if (d.type == device_type::gpu) return d.index;
        if (!first) first = d.index;
    }
    return first;
}

inline std::string list_for_error(std::span<const device_description> devices) {
    std::string s;
    for (const auto& d : devices) {
        s += "\n  " + std::to_string(d.index) + " (" + std::to_string(d.platform_index) + ":" +
             std::to_string(d.device_index) + ") " + to_string(d.type) + " '" + d.device_name + "' on platform '" +
             d.platform_name + "' (" + d.platform_vendor + ")";
    }
    if (devices.empty()) s += "\n  (no OpenCL device found)";
    s += "\n  host (the host backend: aligned host memory)";
    return s;
}

}  // namespace detail

// Resolves a device selector against `devices` (docs/DEVICES.md):
//   auto          a GPU if any, else the first OpenCL device, else the host backend
//   gpu | cpu | accelerator   the first OpenCL device of that type
//   host          the host backend
//   N             list_devices()[N];   P:D  device D of platform P
//   platform:TEXT a device (a GPU first) of a platform whose name or vendor contains TEXT
//   device:TEXT   the first device whose name contains TEXT
//   TEXT          a device (a GPU first) whose platform name, vendor or device name contains TEXT
// Case-insensitive. `source` names where the selector came from, for the
// message. Throws config_error naming the selector and listing every device
// if nothing matches. Pure: touches no driver. Thread-safe.
inline device_match match_device(std::string_view selector, std::span<const device_description> devices,
                                 std::string_view source = "device selector") {
    const std::string spec = detail::lower(selector);
    auto fail = [&](const std::string& why) -> device_match {
        throw config_error("clpool: " + std::string(source) + "='" + std::string(selector) + "' " + why +
                           ". Devices:" + detail::list_for_error(devices) +
                           "\nSelectors: auto, gpu, cpu, accelerator, host, N, P:D, platform:TEXT, device:TEXT, "
                           "TEXT (docs/DEVICES.md)");
    };
    auto opencl = [](std::size_t i) { return device_match{backend_kind::opencl, i}; };

    if (spec == "host") return {backend_kind::host, 0};
    if (spec == "auto") {
        if (devices.empty()) return {backend_kind::host, 0};
        return opencl(*detail::prefer_gpu(devices, [](const auto&) { return true; }));
    }
    for (auto [word, type] : {std::pair{"gpu", device_type::gpu}, std::pair{"cpu", device_type::cpu},
                              std::pair{"accelerator", device_type::accelerator}}) {
        if (spec != word) continue;
        for (const auto& d : devices)
            if (d.type == type) return opencl(d.index);
        return fail(std::string("matches no device: there is no OpenCL ") + word + " device");
    }
    if (auto n = detail::parse_index(spec)) {
        if (*n < devices.size()) return opencl(*n);
        return fail("is out of range: " + std::to_string(devices.size()) + " OpenCL device(s)");
    }
    if (const auto colon = spec.find(':'); colon != std::string::npos) {
        const auto head = std::string_view(spec).substr(0, colon);
        const auto tail = std::string_view(spec).substr(colon + 1);
        auto p = detail::parse_index(head);
        auto d = detail::parse_index(tail);
        if (p && d) {
            for (const auto& x : devices)
                if (x.platform_index == *p && x.device_index == *d) return opencl(x.index);
            return fail("names no device (platform:device indices)");
        }
        if (tail.empty()) return fail("has nothing after ':'");
        if (head == "platform") {
            if (auto i = detail::prefer_gpu(devices, [&](const device_description& x) {
                    return detail::contains_nocase(x.platform_name, tail) ||
                           detail::contains_nocase(x.platform_vendor, tail);
                }))
                return opencl(*i);
            return fail("matches no platform name or vendor");
        }
        if (head == "device") {
            for (const auto& x : devices)
                if (detail::contains_nocase(x.device_name, tail)) return opencl(x.index);
            return fail("matches no device name");
        }
        return fail("has an unknown prefix '" + std::string(head) + ":' (use platform: or device:)");
    }
    if (auto i = detail::prefer_gpu(devices, [&](const device_description& x) {
            return detail::contains_nocase(x.platform_name, spec) || detail::contains_nocase(x.platform_vendor, spec) ||
                   detail::contains_nocase(x.device_name, spec);
        }))
        return opencl(*i);
    return fail("matches no device");
}

// True if the space-separated extension list names `extension` exactly.
inline bool has_extension(std::string_view extensions, std::string_view extension) noexcept {
    std::size_t pos = 0;
    while (pos < extensions.size()) {
        const auto end = std::min(extensions.find(' ', pos), extensions.size());
        if (extensions.substr(pos, end - pos) == extension) return true;
        pos = end + 1;
    }
    return false;
}

// The host backend's facts: shares host memory, no fp16 kernels, the
// HostBackend's allocation limit and alignment.
inline device_facts host_device_facts() noexcept {
    const HostBackend b;
    return {true, false, b.max_alloc_size(), b.alignment(), 0};
}

#ifdef CLPOOL_HAS_OPENCL
// Queries a device's facts. Throws driver_error if the device cannot be queried.
inline device_facts query_device_facts(cl_device_id d) {
    device_facts f;
    f.unified_memory = opencl::device_info<cl_bool>(d, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
    f.fp16 = has_extension(opencl::device_string(d, CL_DEVICE_EXTENSIONS), "cl_khr_fp16");
    f.max_alloc = static_cast<std::size_t>(opencl::device_info<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    f.base_address_align = opencl::device_info<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
    f.global_memory = static_cast<std::size_t>(opencl::device_info<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
    return f;
}

namespace detail {
inline std::string platform_string(cl_platform_id p, cl_platform_info what) {
    std::size_t n = 0;
    if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}
inline device_type type_of(cl_device_type t) noexcept {
    if (t & CL_DEVICE_TYPE_GPU) return device_type::gpu;
    if (t & CL_DEVICE_TYPE_CPU) return device_type::cpu;
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return device_type::accelerator;
    return device_type::other;
}
}  // namespace detail
#endif

// Every OpenCL device of every platform, in selector order. Empty where no
// platform is installed or the library is built without OpenCL. Throws
// driver_error if a device found cannot be queried. Cost: driver queries
// (the first call loads the drivers). Thread-safe.
inline std::vector<device_description> list_devices() {
    std::vector<device_description> out;
#ifdef CLPOOL_HAS_OPENCL
    cl_uint nplat = 0;
    // No ICD, or CL_PLATFORM_NOT_FOUND_KHR: no OpenCL here, the host backend serves.
    if (clGetPlatformIDs(0, nullptr, &nplat) != CL_SUCCESS || nplat == 0) return out;
    std::vector<cl_platform_id> plats(nplat);
    if (clGetPlatformIDs(nplat, plats.data(), nullptr) != CL_SUCCESS) return out;
    for (std::size_t pi = 0; pi < plats.size(); ++pi) {
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, nullptr, &ndev) != CL_SUCCESS || ndev == 0) continue;
        std::vector<cl_device_id> devs(ndev);
        opencl::check(clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, ndev, devs.data(), nullptr), "clGetDeviceIDs");
        const auto pname = detail::platform_string(plats[pi], CL_PLATFORM_NAME);
        const auto pvendor = detail::platform_string(plats[pi], CL_PLATFORM_VENDOR);
        for (std::size_t di = 0; di < devs.size(); ++di) {
            device_description d;
            d.index = out.size();
            d.platform_index = pi;
            d.device_index = di;
            d.platform_name = pname;
            d.platform_vendor = pvendor;
            d.device_name = opencl::device_string(devs[di], CL_DEVICE_NAME);
            d.type = detail::type_of(opencl::device_info<cl_device_type>(devs[di], CL_DEVICE_TYPE));
            d.id = devs[di];
            out.push_back(std::move(d));
        }
    }
#endif
    return out;
}

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
    backend_kind backend() const noexcept { return backend_; }
    device_type type() const noexcept { return type_; }
    const device_facts& facts() const noexcept { return facts_; }
    // "'name' (gpu, opencl, platform 'P')" for messages and logs.
    std::string describe() const {
        return "'" + device_name_ + "' (" + to_string(type_) + ", " + to_string(backend_) + ", platform '" +
               platform_name_ + "')";
    }
    // False in a fork child for a handle made in the parent (its OpenCL
    // objects are the parent's; select the device again in the child).
    bool usable() const noexcept { return backend_ == backend_kind::host || detail::same_process(generation_); }

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
        if (backend_ == backend_kind::opencl) return std::forward<F>(f)(buffer_pool());
#endif
        return std::forward<F>(f)(host_buffer_pool());
    }

    // Waits for everything queued on the device's queue (nothing to wait for
    // on the host backend). Throws driver_error if clFinish fails,
    // usage_error in a fork child for a parent's handle. Blocks the caller;
    // runtime/waits.hpp has a wait that Ctrl+C can interrupt.
    void finish() const {
#ifdef CLPOOL_HAS_OPENCL
        if (backend_ == backend_kind::opencl) opencl::check(clFinish(opencl_queue("finish")()), "clFinish");
#endif
    }

private:
    friend class detail::device_manager;
    DeviceHandle() = default;

#ifdef CLPOOL_HAS_OPENCL
    const cl::CommandQueue& opencl_queue(const char* what) const {
        if (backend_ != backend_kind::opencl)
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
    backend_kind backend_ = backend_kind::host;
    device_type type_ = device_type::cpu;
    device_facts facts_;
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
            h->backend_ = backend_kind::host;
            h->type_ = device_type::cpu;
            h->facts_ = host_device_facts();
            h->generation_ = generation_;
            host_ = h;
        }
        return *host_;
    }

#ifdef CLPOOL_HAS_OPENCL
    const DeviceHandle& open(const device_description& d) {
        std::lock_guard lock(mutex_);
        auto& slot = devices_[d.id];
        if (slot) return *slot;
        auto h = std::unique_ptr<DeviceHandle>(new DeviceHandle);
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
        opencl::check(err, "clCreateContext");
        h->context_ = cl::Context(ctx, false);
        cl_command_queue q = clCreateCommandQueue(ctx, d.id, 0, &err);
        opencl::check(err, "clCreateCommandQueue");
        h->queue_ = cl::CommandQueue(q, false);
        h->id_ = d.id;
        h->platform_name_ = d.platform_name;
        h->device_name_ = d.device_name;
        h->backend_ = backend_kind::opencl;
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
    if (m.backend == backend_kind::host) return device_manager::instance().host();
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

// The innermost device_scope's device on this thread, else default_device().
// Throws as default_device does. Thread-safe (per-thread state).
inline const DeviceHandle& current_device() {
    const DeviceHandle* d = detail::scoped_device;
    if (d && d->usable()) return *d;  // a parent's scope in a fork child falls back to the default
    return default_device();
}

// Makes a device the current one on this thread until the scope ends, then
// restores the previous one. Scopes nest (destroy them in reverse order, as
// blocks do). Neither copies nor moves.
class device_scope {
public:
    explicit device_scope(const DeviceHandle& device) noexcept
        : device_(device), previous_(std::exchange(detail::scoped_device, &device)) {}
    // Selects by selector first; throws as select_device does (and then changes nothing).
    explicit device_scope(std::string_view selector) : device_scope(select_device(selector)) {}
    ~device_scope() { detail::scoped_device = previous_; }
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;

    const DeviceHandle& device() const noexcept { return device_; }

private:
    const DeviceHandle& device_;
    const DeviceHandle* previous_;
};

}  // namespace clpool
