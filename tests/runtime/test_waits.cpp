// Waits for busy queues and events at the ends of their budgets: an exit wait or a Ctrl+C grace
// window of milliseconds::max() ("as long as it takes") waits, an exit wait counts only the queues
// still busy, the Ctrl+C watchdog keeps alive a queue it will wait on, and a WaitOptions::max_poll
// of zero or less still sleeps between polls.
#include <clpool/clpool.hpp>
#include <clpool/runtime/config.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/waits.hpp>

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include <time.h>
#include <unistd.h>

#ifdef CLPOOL_HAS_OPENCL
using namespace clpool;

namespace {
// A queue of its own, held back by a user event that a thread opens after `delay`.
struct BusyQueue {
    cl::CommandQueue q;
    cl_event gate = nullptr;
    std::thread opener;
    explicit BusyQueue(std::chrono::milliseconds delay) {
        auto& env = test::OpenCLEnv::get();
        cl_int err = CL_SUCCESS;
        q = cl::CommandQueue(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
        REQUIRE(err == CL_SUCCESS);
        gate = clCreateUserEvent(env.context(), &err);
        REQUIRE(err == CL_SUCCESS);
        REQUIRE(clEnqueueMarkerWithWaitList(q(), 1, &gate, nullptr) == CL_SUCCESS);
        clFlush(q());
        opener = std::thread([this, delay] {
            std::this_thread::sleep_for(delay);
            clSetUserEventStatus(gate, CL_COMPLETE);
        });
    }
    ~BusyQueue() {
        opener.join();
        clFinish(q());
        clReleaseEvent(gate);
    }
};
}  // namespace

// --- the exit wait (runtime/queue_registry.hpp) ---------------------------------------------

// set_exit_wait(std::chrono::milliseconds::max()) means "as long as it takes": finish_all_within
// must not compute now + budget in nanoseconds, which overflows (UB) and puts the deadline in the
// past, so that exit would wait for nothing.
TEST_CASE("an exit wait of milliseconds::max() waits for a busy queue instead of none") {
    BusyQueue busy(std::chrono::milliseconds(200));
    auto& reg = detail::queue_registry::instance();
    reg.add(busy.q());
    set_exit_wait(std::chrono::milliseconds::max());
    const auto left = reg.finish_all_within(detail::exit_wait());
    detail::exit_wait_override_ms.store(-1);  // back to CLPOOL_EXIT_WAIT_MS (negative: not set)
    CHECK(left == 0);
}

// Once one queue is found busy, the queues after it are still checked each: the exit message
// ("N of M ... still busy") and the count returned name the busy queues only, not idle ones.
TEST_CASE("the exit wait counts only the queues still busy, not every queue after the first busy one") {
    BusyQueue busy(std::chrono::milliseconds(1500));  // busy for all of the wait below
    auto& env = test::OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl::CommandQueue idle(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    auto& reg = detail::queue_registry::instance();
    reg.add(busy.q());
    reg.add(idle());  // after the busy one
    const std::size_t registered = reg.queues().size();
    std::FILE* captured = std::tmpfile();
    REQUIRE(captured);
    std::fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    dup2(fileno(captured), STDERR_FILENO);
    const auto left = reg.finish_all_within(std::chrono::milliseconds(300));
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::string text(4096, '\0');
    std::rewind(captured);
    text.resize(std::fread(text.data(), 1, text.size(), captured));
    std::fclose(captured);
    CHECK(left == 1);
    CHECK(text.find("1 of " + std::to_string(registered) + " registered command queues still busy") !=
          std::string::npos);
}

// --- the Ctrl+C watchdog's drain (interrupts.hpp) --------------------------------------------------

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
// The watchdog's drain() has the same budget arithmetic: with a grace of milliseconds::max() it
// must wait, not give up at once and let the first Ctrl+C _exit although the device would finish.
TEST_CASE("the Ctrl+C grace window of milliseconds::max() waits for a busy queue") {
    BusyQueue busy(std::chrono::milliseconds(200));
    detail::queue_registry::instance().add(busy.q());
    detail::interrupt_handler h;
    h.options.grace = std::chrono::milliseconds::max();
    CHECK(h.drain());
}

namespace {
cl_uint drain_race_refs(cl_command_queue q) {
    cl_uint n = 0;
    REQUIRE(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, nullptr) == CL_SUCCESS);
    return n;
}
}  // namespace

// drain() waits on a copy of the registered queues, one after the other. A program that answers
// the first Ctrl+C by releasing a context's pools (release_pools forgets and releases its queues)
// and then its own queue would free a queue the watchdog is still to wait on, and the watchdog
// would enqueue a marker on a freed queue: drain holds a reference on each queue it will wait on,
// and gives it back when done.
TEST_CASE("the Ctrl+C watchdog's drain keeps a queue alive that release_pools forgets while it waits") {
    BusyQueue busy(std::chrono::milliseconds(800));  // drain waits here first
    auto& env = test::OpenCLEnv::get();
    cl_device_id device = env.device();
    cl_int err = CL_SUCCESS;
    cl::Context other(clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl::CommandQueue late(clCreateCommandQueue(other(), device, 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    auto& reg = detail::queue_registry::instance();
    reg.add(busy.q());
    reg.add(late());  // after the busy one: drain reaches it once the busy one is done
    REQUIRE(drain_race_refs(late()) == 2);  // ours and the registry's

    detail::interrupt_handler h;
    h.options.grace = std::chrono::seconds(20);
    bool drained = false;
    std::thread watchdog([&] { drained = h.drain(); });
    // Until drain holds its copy of the queues, with a reference of its own: a third.
    for (int i = 0; i < 100 && drain_race_refs(late()) < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    release_pools(other);  // forgets `late`, as a program cleaning up after Ctrl+C does
    CHECK(drain_race_refs(late()) >= 2);  // ours and drain's: releasing ours now would not free it
    watchdog.join();
    CHECK(drained);
    CHECK(drain_race_refs(late()) == 1);  // drain gave its reference back
}
#endif

// --- WaitOptions at and below zero (waits.hpp) -----------------------------------------------------

namespace {
// CPU time this thread spent in `f` against the wall time it took.
template <class F>
std::pair<double, double> waits_cpu_and_wall_ms(F&& f) {
    timespec c0{}, c1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    const auto w0 = std::chrono::steady_clock::now();
    f();
    const auto w1 = std::chrono::steady_clock::now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    const double cpu = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
    return {cpu, std::chrono::duration<double, std::milli>(w1 - w0).count()};
}
}  // namespace

// The sleep between polls doubles up to max_poll; a max_poll of zero or less must not make every
// sleep after the first zero or negative (sleep_for returns at once), which would spin on
// clGetEventInfo at 100 % of a core for the whole wait.
TEST_CASE("a WaitOptions::max_poll of zero or less still sleeps between polls instead of spinning") {
    auto& env = test::OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_event never = clCreateUserEvent(env.context(), &err);
    REQUIRE(err == CL_SUCCESS);
    const std::atomic<bool> no_stop{false};
    for (const auto max_poll : {std::chrono::microseconds(0), std::chrono::microseconds(-5)}) {
        CAPTURE(max_poll.count());
        WaitOptions o;
        o.stop = &no_stop;
        o.timeout = std::chrono::milliseconds(300);
        o.max_poll = max_poll;
        WaitStatus s = WaitStatus::failed;
        const auto [cpu_ms, wall_ms] = waits_cpu_and_wall_ms([&] { s = wait_interruptible(never, o); });
        CHECK(s == WaitStatus::timed_out);
        CHECK(wall_ms >= 290);
        CHECK(cpu_ms < wall_ms / 2);  // a spinning wait burns about all of it
    }
    // A timeout of zero or less is already over: one poll, then timed_out.
    WaitOptions o;
    o.stop = &no_stop;
    o.timeout = std::chrono::milliseconds(-1);
    CHECK(wait_interruptible(never, o) == WaitStatus::timed_out);
    clSetUserEventStatus(never, CL_COMPLETE);
    CHECK(wait_interruptible(never, o) == WaitStatus::complete);  // complete wins over the timeout
    clReleaseEvent(never);
}
#endif  // CLPOOL_HAS_OPENCL
