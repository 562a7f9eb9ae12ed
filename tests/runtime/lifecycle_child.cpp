// Helper for test_lifecycle.cpp: runs one exit, shutdown, fork or Ctrl+C scenario in its own process.
// Usage: clpool_lifecycle_child <scenario>. Prints what it sees; the test checks output and exit status.
#include <clpool/clpool.hpp>
#include <clpool/devices/device_handle.hpp>
#include <clpool/devices/device_list.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/shutdown.hpp>
#include <clpool/runtime/waits.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef CLPOOL_HAS_OPENCL
#include <dlfcn.h>

// Every OpenCL call the clpool code in this executable makes to these entry
// points is counted: the executable's definitions take precedence over the
// ICD loader's, and forward to it. The fork scenario checks the child makes none.
static std::atomic<long> cl_calls{0};
#define CLPOOL_COUNT(ret, name, params, args)                                                   \
    extern "C" CL_API_ENTRY ret CL_API_CALL name params {                                       \
        cl_calls.fetch_add(1);                                                                  \
        static auto real = reinterpret_cast<ret(CL_API_CALL*) params>(dlsym(RTLD_NEXT, #name)); \
        return real args;                                                                       \
    }
CLPOOL_COUNT(cl_int, clReleaseMemObject, (cl_mem m), (m))
CLPOOL_COUNT(cl_int, clReleaseCommandQueue, (cl_command_queue q), (q))
CLPOOL_COUNT(cl_int, clRetainCommandQueue, (cl_command_queue q), (q))
CLPOOL_COUNT(cl_int, clReleaseContext, (cl_context c), (c))
CLPOOL_COUNT(cl_int, clReleaseEvent, (cl_event e), (e))
CLPOOL_COUNT(cl_int, clRetainEvent, (cl_event e), (e))
CLPOOL_COUNT(cl_int, clFinish, (cl_command_queue q), (q))
CLPOOL_COUNT(cl_int, clFlush, (cl_command_queue q), (q))
CLPOOL_COUNT(cl_int, clWaitForEvents, (cl_uint n, const cl_event* e), (n, e))
CLPOOL_COUNT(cl_int, clGetEventInfo, (cl_event e, cl_event_info i, size_t s, void* v, size_t* r), (e, i, s, v, r))
CLPOOL_COUNT(cl_int, clGetCommandQueueInfo, (cl_command_queue q, cl_command_queue_info i, size_t s, void* v, size_t* r),
             (q, i, s, v, r))
CLPOOL_COUNT(void, clSVMFree, (cl_context c, void* p), (c, p))
CLPOOL_COUNT(cl_mem, clCreateBuffer, (cl_context c, cl_mem_flags f, size_t n, void* p, cl_int* e), (c, f, n, p, e))
CLPOOL_COUNT(cl_command_queue, clCreateCommandQueue,
             (cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int* e), (c, d, p, e))
#endif

// A fork child leaks the parent's pools on purpose (no OpenCL call may free
// them), so leak checking is off in this helper under LeakSanitizer.
extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }

namespace {

void say(const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
}

// The Ctrl+C scenarios run as a program started from a terminal would: the
// handler leaves a SIGINT or SIGTERM inherited as ignored alone, and a test
// runner started in the background passes SIGINT on ignored.
void default_interrupt_signals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
}

int shutdown_host() {
    auto& pool = clpool::get_host_buffer_pool();
    { auto cached = pool.allocate(1 << 20); }
    auto held = pool.allocate(4096);
    say("cached before: " + std::to_string(pool.stats().bytes_cached));
    const auto r = clpool::shutdown();
    say("released: " + std::to_string(r.bytes_released));
    say("cached after: " + std::to_string(pool.stats().bytes_cached));
    try {
        (void)pool.allocate(10);
        say("allocate after shutdown: accepted");
    } catch (const clpool::usage_error& e) {
        say(std::string("allocate after shutdown: usage_error: ") + e.what());
    }
    try {
        clpool::get_host_buffer_pool();
        say("registry after shutdown: accepted");
    } catch (const clpool::usage_error&) {
        say("registry after shutdown: usage_error");
    }
    const auto frees = pool.stats().driver_frees;
    held.release();  // goes straight back, not into the cache
    say("release after shutdown cached: " + std::to_string(pool.stats().bytes_cached) +
        " freed: " + std::to_string(pool.stats().driver_frees - frees));
    say(std::string("is_shut_down: ") + (clpool::is_shut_down() ? "1" : "0"));
    clpool::shutdown();  // idempotent
    return 0;
}

// Every registry made on first use (host and OpenCL) is reached by
// shutdown(), which names none of them: each had 1 MiB cached.
int shutdown_registries() {
    std::size_t cached = 0;
    std::vector<std::function<std::size_t()>> cached_now;
    auto fill = [&](auto& pool, const char* name) {
        { auto h = pool.allocate(1 << 20); }
        const auto bytes = pool.stats().bytes_cached;
        say(std::string(name) + " cached: " + (bytes >= (1u << 20) ? "1" : "0"));
        cached += bytes;
        cached_now.push_back([&pool] { return pool.stats().bytes_cached; });
    };
    fill(clpool::get_host_buffer_pool(), "host buffer");
    fill(clpool::get_host_pinned_pool(), "host pinned");
    fill(clpool::get_host_persistent_pool(), "host persistent");
#ifdef CLPOOL_HAS_OPENCL
    const auto& d = clpool::select_device("auto");
    if (d.backend() == clpool::BackendKind::opencl) {
        fill(clpool::get_buffer_pool(d.queue()), "buffer");
        fill(clpool::get_pinned_pool(d.queue()), "pinned");
        fill(clpool::get_persistent_pool(d.queue()), "persistent");
        fill(clpool::get_mapped_pinned_pool(d.queue()), "mapped pinned");
    }
#endif
    const auto r = clpool::shutdown();
    say("registries: " + std::to_string(cached_now.size()));
    say(std::string("released every cache: ") + (r.bytes_released == cached ? "1" : "0"));
    std::size_t left = 0;
    for (const auto& f : cached_now) left += f();
    say("cached after: " + std::to_string(left));
    return 0;
}

// shutdown() in a fork child reaches the child's registries: one whose type
// the parent had made (and enrolled) and one first made in the child.
int shutdown_fork() {
    auto& parent_pool = clpool::get_host_buffer_pool();
    { auto h = parent_pool.allocate(1 << 20); }
#ifdef CLPOOL_HAS_OPENCL
    const auto& d = clpool::select_device("auto");
    if (d.backend() == clpool::BackendKind::opencl) {
        auto cached = clpool::get_buffer_pool(d.queue()).allocate(1 << 20);
    }
#endif
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
#ifdef CLPOOL_HAS_OPENCL
        const long before = cl_calls.load();
#endif
        auto& fresh = clpool::get_host_buffer_pool();
        { auto h = fresh.allocate(64 << 10); }
        auto& first = clpool::get_host_persistent_pool();  // this type's first registry: made in the child
        { auto h = first.allocate(64 << 10); }
        const auto cached = fresh.stats().bytes_cached + first.stats().bytes_cached;
        const auto r = clpool::shutdown();
        say(std::string("child: fresh pool: ") + (&fresh != &parent_pool ? "1" : "0"));
        say(std::string("child: released its own cache: ") +
            (cached >= (128u << 10) && r.bytes_released == cached ? "1" : "0"));
        say("child: cached after: " + std::to_string(fresh.stats().bytes_cached + first.stats().bytes_cached));
        // A parent's pool reports nothing in a child (its locks may be held by a parent thread);
        // that shutdown() left its cache alone shows in the parent, and in no OpenCL call here.
        say("child: parent's pool reports: " + std::to_string(parent_pool.stats().bytes_cached));
#ifdef CLPOOL_HAS_OPENCL
        say("child: OpenCL calls: " + std::to_string(cl_calls.load() - before));
#endif
        std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    say("parent: child status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
    say(std::string("parent: not shut down: ") + (clpool::is_shut_down() ? "0" : "1"));
    say("parent: cache kept: " + std::to_string(parent_pool.stats().bytes_cached));
    return 0;
}

int device_env() {
    try {
        const auto& d = clpool::default_device();
        say("default device: " + std::string(clpool::to_string(d.backend())) + " " + d.describe());
        say(std::string("same again: ") + (&d == &clpool::default_device() ? "1" : "0"));
        return 0;
    } catch (const clpool::config_error& e) {
        say(std::string("config_error: ") + e.what());
        return 3;
    }
}

int interrupt_idle() {
#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
    clpool::InterruptHandlerOptions o;
    o.grace = std::chrono::milliseconds(200);
    default_interrupt_signals();
    say(std::string("installed: ") + (clpool::install_interrupt_handler(o) ? "1" : "0"));
    say(std::string("installed again: ") + (clpool::install_interrupt_handler(o) ? "1" : "0"));
    std::raise(SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));  // past the grace window: idle queues, no exit
    say(std::string("still running, interrupt_requested=") + (clpool::interrupt_requested() ? "1" : "0"));
    std::raise(SIGINT);  // second Ctrl+C: _exit(130) at once
    std::this_thread::sleep_for(std::chrono::seconds(5));
    say("not reached");
    return 0;
#else
    say("no interrupt handler on this platform");
    return 2;
#endif
}

// SIGINT and, right after it, SIGTERM, before the watchdog thread has
// looked: the SIGTERM must still end the process (by SIGTERM). To make "before
// the watchdog has looked" certain, the process runs on one CPU and the
// watchdog at SCHED_IDLE (lowering a thread's priority needs no privilege),
// so it cannot preempt this thread between the two signals.
int interrupt_then_term() {
#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) say("sched_setaffinity failed");  // the watchdog inherits it
    clpool::InterruptHandlerOptions o;
    o.grace = std::chrono::milliseconds(200);
    default_interrupt_signals();
    clpool::install_interrupt_handler(o);
    const pid_t self = gettid();
    DIR* tasks = opendir("/proc/self/task");
    int idled = 0;
    while (dirent* e = tasks ? readdir(tasks) : nullptr) {
        const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
        if (tid <= 0 || tid == self) continue;
        sched_param none{};
        idled += sched_setscheduler(tid, SCHED_IDLE, &none) == 0;
    }
    if (tasks) closedir(tasks);
    say("threads at SCHED_IDLE: " + std::to_string(idled));
    std::raise(SIGINT);   // its handler runs here, in this thread
    std::raise(SIGTERM);  // and this one's next, before the watchdog runs
    std::this_thread::sleep_for(std::chrono::seconds(3));
    say("survived SIGTERM");
    return 0;
#else
    say("no interrupt handler on this platform");
    return 2;
#endif
}

#ifdef CLPOOL_HAS_OPENCL
// A marker on the device's queue that waits for a user event: the queue is
// busy until the event is set.
struct busy_queue {
    cl_event gate = nullptr, marker = nullptr;
    busy_queue(cl_context ctx, cl_command_queue q) {
        cl_int err = CL_SUCCESS;
        gate = clCreateUserEvent(ctx, &err);
        clEnqueueMarkerWithWaitList(q, 1, &gate, &marker);
        clFlush(q);
    }
    explicit busy_queue(const clpool::DeviceHandle& d) : busy_queue(d.context()(), d.queue()()) {}
    void open_after(std::chrono::milliseconds ms) const {
        std::thread([g = gate, ms] {
            std::this_thread::sleep_for(ms);
            clSetUserEventStatus(g, CL_COMPLETE);
        }).detach();
    }
    cl_int status() const {
        cl_int s = CL_QUEUED;
        clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
        return s;
    }
};

busy_queue* exit_busy = nullptr;

// Registered after the driver is loaded but before clpool's handler, so it
// runs after clpool's and before the driver's teardown.
void check_at_exit() {
    const bool done = exit_busy->status() == CL_COMPLETE;
    say(std::string("exit-check: marker ") + (done ? "complete" : "pending"));
    if (!done) clSetUserEventStatus(exit_busy->gate, CL_COMPLETE);  // let the driver wind down
}

// Handles alive at exit: one in a static (released by its destructor into a
// registry pool, which is never destroyed: list work only, no driver call),
// others in locals that exit() never unwinds, from registry pools and from a
// pool the program owns.
clpool::PersistentBufferPool::handle static_handle;

int exit_with_live_handles() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    static_handle = clpool::get_persistent_pool(queue).allocate(1 << 20);
    auto device = clpool::get_buffer_pool(queue).allocate(4096);
    auto pinned = clpool::get_pinned_pool(queue).allocate(64 << 10);
    auto* owned = new clpool::BufferPool(context);  // the program's own pool, never deleted
    auto own = owned->allocate(1000);
    const bool all = static_handle && device && pinned && own;
    say(std::string("exit-live: holding 4 handles: ") + (all ? "yes" : "no"));
    std::exit(all ? 0 : 3);
}

// What statics made before the driver was loaded hold at exit: their
// destructors run after clpool's exit handler (and may run after the driver's
// teardown), so they must make no OpenCL call. A handle from a pool that
// caches nothing (releasing it evicts the buffer), and a pool the program
// keeps in a static, with a buffer cached.
using CappedOpenCLPool = clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Capped,
                                      clpool::SingleMutex, clpool::OpenCLBackend>;
struct exit_probe {
    CappedOpenCLPool* capped = nullptr;
    CappedOpenCLPool::handle evicted;
    std::optional<clpool::BufferPool> own_pool;
    ~exit_probe() {
        if (!capped) return;  // another scenario
        const long before = cl_calls.load();
        evicted.release();
        try {
            (void)capped->allocate(4096);
            say("exit-static: allocate: accepted");
        } catch (const clpool::usage_error& e) {
            say(std::string("exit-static: allocate: usage_error: ") + e.what());
        }
        own_pool.reset();
        say("exit-static: OpenCL calls from static destructors: " + std::to_string(cl_calls.load() - before));
    }
};
exit_probe static_probe;  // constructed before main: destroyed after clpool's exit handler

int exit_with_static_pools() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    static_probe.capped = new CappedOpenCLPool(clpool::OpenCLBackend(context), clpool::Capped(0, 0));  // never deleted
    static_probe.evicted = static_probe.capped->allocate(4096);
    static_probe.own_pool.emplace(context);
    { auto cached = static_probe.own_pool->allocate(1 << 20); }
    const bool ready = static_probe.evicted && static_probe.own_pool->stats().bytes_cached > 0;
    say(std::string("exit-static: ready: ") + (ready ? "yes" : "no"));
    return ready ? 0 : 3;
}

int exit_finishes(bool through_clpool) {
    cl_uint n = 0;
    clGetPlatformIDs(0, nullptr, &n);  // loads the driver first
    std::atexit(&check_at_exit);
    if (through_clpool) {
        const auto& d = clpool::select_device("auto");  // registers its queue (and clpool's exit handler)
        exit_busy = new busy_queue(d);
    } else {
        // The control: the same work on a queue clpool does not know.
        static cl::Context ctx;
        static cl::CommandQueue q;
        const auto devs = clpool::list_devices();
        cl_int err = CL_SUCCESS;
        cl_device_id id = devs.at(0).id;
        ctx = cl::Context(clCreateContext(nullptr, 1, &id, nullptr, nullptr, &err), false);
        q = cl::CommandQueue(clCreateCommandQueue(ctx(), id, 0, &err), false);
        exit_busy = new busy_queue(ctx(), q());
    }
    exit_busy->open_after(std::chrono::milliseconds(300));
    say("main returns");
    return 0;
}

// The application's queue passed to get_buffer_pool, then main returns while
// a command on it waits for a user event nobody will set: the exit handler
// waits CLPOOL_EXIT_WAIT_MS (or set_exit_wait) for it, then leaves it.
int exit_stuck(bool through_api) {
    static cl::Context ctx;
    static cl::CommandQueue q;
    const auto devs = clpool::list_devices();
    cl_int err = CL_SUCCESS;
    cl_device_id id = devs.at(0).id;
    ctx = cl::Context(clCreateContext(nullptr, 1, &id, nullptr, nullptr, &err), false);
    q = cl::CommandQueue(clCreateCommandQueue(ctx(), id, 0, &err), false);
    auto& pool = clpool::get_buffer_pool(q);  // registers q: finished at exit
    auto h = pool.allocate(4096);
    if (through_api) clpool::set_exit_wait(std::chrono::milliseconds(200));
    static busy_queue* stuck = new busy_queue(ctx(), q());  // never opened
    (void)stuck;
    say("main returns");
    return 0;
}

int shutdown_opencl() {
    const auto& d = clpool::select_device("auto");
    auto& pool = d.buffer_pool();
    { auto cached = pool.allocate(1 << 20); }
    auto held = pool.allocate(64 << 10);
    busy_queue busy(d);
    busy.open_after(std::chrono::milliseconds(200));
    const auto r = clpool::shutdown();
    say(std::string("marker after shutdown: ") + (busy.status() == CL_COMPLETE ? "complete" : "pending"));
    say("queues finished: " + std::to_string(r.queues) + " failed: " + std::to_string(r.queues_failed));
    say("released at least 1 MiB: " + std::string(r.bytes_released >= (1u << 20) ? "1" : "0"));
    say("cached after: " + std::to_string(pool.stats().bytes_cached));
    try {
        (void)pool.allocate(10);
        say("allocate after shutdown: accepted");
    } catch (const clpool::usage_error& e) {
        say(std::string("allocate after shutdown: usage_error: ") + e.what());
    }
    const std::pair<const char*, std::function<void()>> calls[] = {
        {"get_buffer_pool", [&] { clpool::get_buffer_pool(d.queue()); }},
        {"select_device", [] { clpool::select_device("auto"); }},
        {"DeviceHandle::buffer_pool", [&] { d.buffer_pool(); }}};
    for (const auto& [what, f] : calls) {
        try {
            f();
            say(std::string(what) + " after shutdown: accepted");
        } catch (const clpool::usage_error&) {
            say(std::string(what) + " after shutdown: usage_error");
        }
    }
    const auto frees = pool.stats().driver_frees;
    held.release();
    say("release after shutdown cached: " + std::to_string(pool.stats().bytes_cached) +
        " freed: " + std::to_string(pool.stats().driver_frees - frees));
    return 0;
}

int fork_case() {
    const auto& d = clpool::select_device("auto");
    auto& pool = d.buffer_pool();
    auto in_use = pool.allocate(1 << 20);
    { auto cached = pool.allocate(2 << 20); }
    auto* own = new clpool::BufferPool(d.context());  // a pool the program owns
    { auto cached = own->allocate(1000); }
    auto* svm_arena = new clpool::SVMArenaPool(d.context());  // SVM: freed by clSVMFree, no reference count
    auto svm_held = svm_arena->allocate(3000);
    { auto cached = svm_arena->allocate(5000); }
    auto* svm_whole = new clpool::SVMPool(d.context());
    { auto cached = svm_whole->allocate(4096); }
    auto& host_pool = clpool::get_host_buffer_pool();
    auto host_held = host_pool.allocate(100);
    busy_queue busy(d);  // the parent's queue is busy across the fork
    const auto* registry_before = &clpool::detail::context_registry<clpool::BufferPool>::instance();
    const auto hits_before = pool.stats().hits;

    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        const long before = cl_calls.load();
        try {
            (void)pool.allocate(1 << 20);
            say("child: inherited pool accepted work");
        } catch (const clpool::usage_error& e) {
            say(std::string("child: inherited pool refused: ") + e.what());
        }
        in_use.release();
        say("child: trim gave back " + std::to_string(pool.trim()));
        delete own;
        svm_held.release();
        svm_arena->trim();
        delete svm_arena;
        delete svm_whole;
        say(std::string("child: device usable: ") + (d.usable() ? "1" : "0"));
        try {
            d.buffer_pool();
            say("child: parent's device handle gave a pool");
        } catch (const clpool::usage_error&) {
            say("child: parent's device handle refused");
        }
        try {
            (void)host_pool.allocate(10);
            say("child: inherited host pool accepted work");
        } catch (const clpool::usage_error&) {
            say("child: inherited host pool refused");
        }
        host_held.release();
        const long calls = cl_calls.load() - before;
        auto& fresh_host = clpool::get_host_buffer_pool();
        auto h = fresh_host.allocate(100);
        say(std::string("child: new host pool works: ") + (h && &fresh_host != &host_pool ? "1" : "0"));
        say(std::string("child: fresh registry: ") +
            (&clpool::detail::context_registry<clpool::BufferPool>::instance() != registry_before ? "1" : "0"));
        say("child: OpenCL calls on inherited objects: " + std::to_string(calls));
        std::exit(0);  // normal exit: the exit handler must not finish the parent's (busy) queue
    }
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            say("parent: child hung");
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    say("parent: child status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
    clSetUserEventStatus(busy.gate, CL_COMPLETE);
    d.finish();
    auto again = pool.allocate(2 << 20);
    const int pattern = 7;
    const bool ok = clEnqueueFillBuffer(d.queue()(), in_use.buffer()(), &pattern, sizeof pattern, 0, 1 << 20, 0,
                                        nullptr, nullptr) == CL_SUCCESS;
    d.finish();
    say(std::string("parent: keeps working: ") +
        (ok && pool.stats().hits == hits_before + 1 && busy.status() == CL_COMPLETE ? "1" : "0"));
    delete own;
    svm_held.release();
    delete svm_arena;
    delete svm_whole;
    return 0;
}

int interrupt_grace() {
#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
    const auto& d = clpool::select_device("auto");
    busy_queue busy(d);  // never opened: the device stays busy
    clpool::InterruptHandlerOptions o;
    o.grace = std::chrono::milliseconds(300);
    default_interrupt_signals();
    clpool::install_interrupt_handler(o);
    std::raise(SIGINT);
    const auto s = clpool::finish_interruptible(d.queue());  // the flag is up: returns at once
    say(std::string("wait: ") + clpool::to_string(s));
    std::this_thread::sleep_for(std::chrono::seconds(10));
    say("not reached");
    return 0;
#else
    return 2;
#endif
}
#endif

}  // namespace

int main(int argc, char** argv) {
    const std::string s = argc > 1 ? argv[1] : "";
    if (s == "shutdown-host") return shutdown_host();
    if (s == "shutdown-registries") return shutdown_registries();
    if (s == "shutdown-fork") return shutdown_fork();
    if (s == "device-env") return device_env();
    if (s == "interrupt-idle") return interrupt_idle();
    if (s == "interrupt-then-term") return interrupt_then_term();
#ifdef CLPOOL_HAS_OPENCL
    if (s == "exit-finish") return exit_finishes(true);
    if (s == "exit-live") return exit_with_live_handles();
    if (s == "exit-static") return exit_with_static_pools();
    if (s == "exit-control") return exit_finishes(false);
    if (s == "exit-stuck") return exit_stuck(false);
    if (s == "exit-stuck-api") return exit_stuck(true);
    if (s == "shutdown") return shutdown_opencl();
    if (s == "fork") return fork_case();
    if (s == "interrupt-grace") return interrupt_grace();
#endif
    std::fprintf(stderr, "unknown scenario '%s'\n", s.c_str());
    return 99;
}
