// runtime/: settings parsed as documented whatever the program's locale or leading zeros, waits
// whose budget is "as long as it takes" or whose polls have no floor, the watchdog's queues,
// shutdown() out of host memory, SIGTERM in a fork child, and signals inherited as ignored. Each
// case failed before its fix.
#include <clpool/clpool.hpp>
#include <clpool/devices/device_handle.hpp>
#include <clpool/runtime/config.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/shutdown.hpp>
#include <clpool/runtime/waits.hpp>

#include "alloc_counter.hpp"
#include "sanitizers.hpp"

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

#include <doctest/doctest.h>

#include <chrono>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

using namespace clpool;

namespace {

std::string config_error_text(auto&& f) {
    try {
        f();
    } catch (const config_error& e) {
        return e.what();
    }
    return "(no config_error)";
}

}  // namespace

// --- config.hpp --------------------------------------------------------------------------------

// Before: parse_milliseconds (and CLPOOL_HISTORY's parse_history_events) refused any text
// longer than 9 characters, so a value in range written with leading zeros was refused with
// a message that said it was out of range.
TEST_CASE("CLPOOL_EXIT_WAIT_MS with leading zeros is a number in range, not an error") {
    CHECK_NOTHROW(CHECK(config::parse_milliseconds("CLPOOL_EXIT_WAIT_MS", "0000005000") == 5000));
    CHECK_NOTHROW(CHECK(detail::parse_history_events("CLPOOL_HISTORY", "0000000100") == 100));
}

// The error for a blank CLPOOL_DEVICE names the value as set (before: '   ' was reported as '').
TEST_CASE("a blank CLPOOL_DEVICE's error names the value as set") {
    const std::string msg = config_error_text([] { (void)config::parse_device_spec("CLPOOL_DEVICE", "   "); });
    CHECK(msg.find("CLPOOL_DEVICE='   '") != std::string::npos);
}

// Before: parse_gib used strtod, which follows LC_NUMERIC: in a program that calls
// setlocale(LC_ALL, "") under a decimal-comma locale (de_DE, fr_FR, ...), every fractional
// CLPOOL_MAX_CACHED_GB ("0.5") was refused. The locale is made here with localedef (Debian's
// locales package, .ci/deps.d/locales.txt).
TEST_CASE("CLPOOL_MAX_CACHED_GB=0.5 is accepted whatever the program's locale") {
    const char* dir = "/tmp/clpool_test_locale";
    setenv("LOCPATH", dir, 1);
    if (access((std::string(dir) + "/de_DE.UTF-8").c_str(), F_OK) !=
        0) {  // before any lookup: glibc keeps a failed one
        const std::string cmd =
            std::string("mkdir -p ") + dir + " && localedef -i de_DE -f UTF-8 " + dir + "/de_DE.UTF-8 >/dev/null 2>&1";
        (void)std::system(cmd.c_str());
    }
    const char* got = std::setlocale(LC_NUMERIC, "de_DE.UTF-8");
    unsetenv("LOCPATH");
    REQUIRE_MESSAGE(got != nullptr, "no de_DE locale could be made (needs localedef and Debian's locales package)");
    std::uint64_t bytes = 0;
    const std::string msg = config_error_text([&] { bytes = config::parse_gib("CLPOOL_MAX_CACHED_GB", "0.5"); });
    std::setlocale(LC_NUMERIC, "C");
    CHECK(msg == "(no config_error)");
    CHECK(bytes == (std::uint64_t{1} << 29));
}

#ifdef CLPOOL_HAS_OPENCL
// --- runtime/detail/queue_registry.hpp, interrupts.hpp: waits with a huge budget -----------------

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

// Before: set_exit_wait(std::chrono::milliseconds::max()) ("as long as it takes") made
// finish_all_within compute now + budget in nanoseconds, which overflowed (UB): the deadline
// landed in the past and exit waited for nothing.
TEST_CASE("an exit wait of milliseconds::max() waits for a busy queue instead of none") {
    BusyQueue busy(std::chrono::milliseconds(200));
    auto& reg = detail::queue_registry::instance();
    reg.add(busy.q());
    set_exit_wait(std::chrono::milliseconds::max());
    const auto left = reg.finish_all_within(detail::exit_wait());
    detail::exit_wait_override_ms.store(-1);  // back to CLPOOL_EXIT_WAIT_MS (negative: not set)
    CHECK(left == 0);
}

// Before: once one queue was found busy, every queue after it was counted busy unchecked, so
// the exit message ("N of M ... still busy") and the count returned named idle queues too.
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

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
// Before: the Ctrl+C watchdog's drain() had the same overflow for a huge `grace`: it gave up
// at once, and the first Ctrl+C _exited although the device would have finished.
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

// Before: drain() copied the registered queues without retaining them, then waited on each in
// turn. A program that answers the first Ctrl+C by releasing a context's pools (release_pools
// forgets and releases its queues) and then its own queue freed a queue the watchdog was still
// to wait on: the watchdog then enqueued a marker on a freed queue. Now drain holds a reference
// on each queue it will wait on, and gives it back when done.
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
    // Until drain holds its copy (a reference of its own, once fixed; a second at most, before).
    for (int i = 0; i < 100 && drain_race_refs(late()) < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    release_pools(other);  // forgets `late`, as a program cleaning up after Ctrl+C does
    CHECK(drain_race_refs(late()) >= 2);  // ours and drain's: releasing ours now would not free it
    watchdog.join();
    CHECK(drained);
    CHECK(drain_race_refs(late()) == 1);  // drain gave its reference back
}
#endif

// --- waits.hpp: WaitOptions at and below zero -------------------------------------------------------

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

// Before: the sleep between polls was min(twice the last, max_poll), so a max_poll of zero or
// less made every sleep after the first zero or negative, and sleep_for returned at once: the
// waiting thread spun on clGetEventInfo at 100 % of a core for the whole wait.
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

#ifdef CLPOOL_HAS_OPENCL
// --- shutdown.hpp: nothing registered, no room ------------------------------------------------------

// Only where operator new is the tests' own, which can fail on demand (sanitizers.hpp); that is
// never under TSan, which the fork case below avoids too.
#if CLPOOL_TEST_COUNTS_NEW
// Before: shutdown() and finish_registered_queues(), both noexcept, made this process's queue
// registry when none existed yet (a fork child, or a program that never made a queue) with
// operator new: out of host memory there, the bad_alloc left a noexcept function and
// std::terminate ended the process. With no registry there is nothing to finish.
TEST_CASE("shutdown() and finish_registered_queues() with no queue registry survive a failing allocation") {
    (void)detail::birth_generation();  // the child is a generation of its own: no registry yet
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::size_t failed = 1;
        {
            test::FailNthAllocation fail(1);  // this generation's first: its queue registry, before
            failed = finish_registered_queues();
        }
        ShutdownReport r;
        {
            test::FailNthAllocation fail(1);
            r = shutdown();
        }
        _exit(failed == 0 && r.queues == 0 && r.queues_failed == 0 && is_shut_down() ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE_MESSAGE(WIFEXITED(status), "the child died of signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WEXITSTATUS(status) == 0);
}
#endif
#endif  // CLPOOL_HAS_OPENCL

// --- interrupts.hpp: SIGTERM in a fork child ------------------------------------------------------

// Not under TSan: it forks a process whose watchdog thread runs, and TSan's
// signal emulation in such a child does not deliver the re-raised SIGTERM
// (as test_fork_locks.cpp, TSan does not support threads in that child).
#if defined(CLPOOL_HAS_INTERRUPT_HANDLER) && !CLPOOL_TEST_TSAN
// Before: the handler stays installed in a fork child, but its watchdog thread does not exist
// there: on_signal only set a pending bit and posted a semaphore nobody waits on, so a
// SIGTERM sent to the child was swallowed.
TEST_CASE("a fork child of a process with the Ctrl+C handler still ends on SIGTERM") {
    const pid_t outer = fork();
    REQUIRE(outer >= 0);
    if (outer == 0) {
        // In a child of the test process, so the test process keeps its own signal dispositions;
        // SIGTERM's default first, as in a program of its own (not doctest's crash handler).
        std::signal(SIGTERM, SIG_DFL);
        install_interrupt_handler();
        const pid_t inner = fork();
        if (inner == 0) {
            for (int i = 0; i < 30; ++i) usleep(100 * 1000);  // 3 s, unless SIGTERM ends it
            _exit(0);
        }
        usleep(200 * 1000);
        kill(inner, SIGTERM);
        int st = 0;
        waitpid(inner, &st, 0);
        _exit(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(outer, &status, 0) == outer);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 1: the grandchild ignored SIGTERM and ran to its end
}
#endif

// --- interrupts.hpp: a signal inherited as ignored ------------------------------------------------

#if defined(CLPOOL_HAS_INTERRUPT_HANDLER) && !CLPOOL_TEST_TSAN
// Before: install_interrupt_handler replaced SIGINT and SIGTERM whatever their disposition, so a
// background job of a non-interactive shell or a program under nohup, which inherits SIGINT as
// ignored, saw interrupt_requested() on a Ctrl+C meant for the shell, and a second one ended it
// with _exit(130).
TEST_CASE("install_interrupt_handler leaves a SIGINT and SIGTERM the process inherited as ignored alone") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::signal(SIGINT, SIG_IGN);
        std::signal(SIGTERM, SIG_IGN);
        install_interrupt_handler();
        raise(SIGINT);
        raise(SIGINT);  // a second one used to _exit(130)
        raise(SIGTERM);
        usleep(200 * 1000);  // the watchdog, had it been woken
        if (interrupt_requested()) _exit(2);
        struct sigaction now_int{}, now_term{};
        sigaction(SIGINT, nullptr, &now_int);
        sigaction(SIGTERM, nullptr, &now_term);
        _exit(now_int.sa_handler == SIG_IGN && now_term.sa_handler == SIG_IGN ? 0 : 3);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE_MESSAGE(WIFEXITED(status), "the child died of signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WEXITSTATUS(status) == 0);  // 130 or 2: a Ctrl+C reached the handler; 3: it replaced SIG_IGN
}
#endif
