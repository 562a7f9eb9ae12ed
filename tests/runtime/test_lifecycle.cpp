// Lifecycle: exit, shutdown(), fork and Ctrl+C, each run in a child process (lifecycle_child.cpp, or a fork of
// this one); interruptible waits.
#include <clpool/clpool.hpp>
#include <clpool/runtime/interrupts.hpp>
#include <clpool/runtime/shutdown.hpp>
#include <clpool/runtime/waits.hpp>

#include "alloc_counter.hpp"
#include "sanitizers.hpp"

#ifdef CLPOOL_HAS_OPENCL
#include "opencl_env.hpp"
#endif

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

struct child_result {
    int status = -1;  // exit code, or 128 + signal
    std::string output;
    double seconds = 0;
};

// Runs the helper with one scenario (and extra NAME=VALUE environment
// entries), stdout and stderr captured; killed after 60 s.
child_result run_child(const std::string& scenario, std::vector<std::string> env_extra = {}) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<std::string> env_store;
    bool asan_options = false;
    for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        if (kv.rfind("CLPOOL_DEVICE=", 0) == 0) continue;  // each case sets its own
        // The child leaks a fork parent's pools on purpose; a caller's
        // ASAN_OPTIONS=detect_leaks=1 (CI's) would override its own default.
        if (kv.rfind("ASAN_OPTIONS=", 0) == 0) {
            kv += ":detect_leaks=0";
            asan_options = true;
        }
        env_store.push_back(kv);
    }
    if (!asan_options) env_store.push_back("ASAN_OPTIONS=detect_leaks=0");
    for (auto& kv : env_extra) env_store.push_back(kv);
    std::vector<char*> envp;
    for (auto& kv : env_store) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::string path = CLPOOL_LIFECYCLE_CHILD;
    std::vector<char*> argv{path.data(), const_cast<char*>(scenario.c_str()), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    REQUIRE(rc == 0);
    child_result r;
    char buf[4096];
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        const int ready = poll(&p, 1, 100);
        if (ready > 0) {
            const ssize_t n = read(fds[0], buf, sizeof buf);
            if (n <= 0) break;
            r.output.append(buf, static_cast<std::size_t>(n));
        }
        if (clock::now() - start > std::chrono::seconds(60)) {
            kill(pid, SIGKILL);
            r.output += "\n[killed after 60 s]";
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.seconds = std::chrono::duration<double>(clock::now() - start).count();
    return r;
}

bool has(const child_result& r, const std::string& line) { return r.output.find(line) != std::string::npos; }

}  // namespace

TEST_CASE("shutdown() gives the host pools' cache back, then every pool refuses work") {
    const auto r = run_child("shutdown-host");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "cached before: 1048576"));
    CHECK(has(r, "released: 1048576"));
    CHECK(has(r, "cached after: 0"));
    CHECK(has(r, "allocate after shutdown: usage_error: clpool: host pool used after clpool::shutdown()"));
    CHECK(has(r, "registry after shutdown: usage_error"));
    CHECK(has(r, "release after shutdown cached: 0 freed: 1"));
    CHECK(has(r, "is_shut_down: 1"));
}

TEST_CASE("shutdown() trims every registry made on first use, host and OpenCL, without naming them") {
    const auto r = run_child("shutdown-registries");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    for (const char* name : {"host buffer", "host pinned", "host persistent"})
        CHECK(has(r, std::string(name) + " cached: 1"));
#ifdef CLPOOL_HAS_OPENCL
    for (const char* name : {"buffer", "pinned", "persistent", "mapped pinned"})
        CHECK(has(r, std::string("\n") + name + " cached: 1"));
    CHECK(has(r, "registries: 7"));
#else
    CHECK(has(r, "registries: 3"));
#endif
    CHECK(has(r, "released every cache: 1"));
    CHECK(has(r, "cached after: 0"));
}

TEST_CASE("shutdown() in a fork child trims the child's registries, not the parent's") {
    const auto r = run_child("shutdown-fork");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "child: fresh pool: 1"));
    CHECK(has(r, "child: released its own cache: 1"));
    CHECK(has(r, "child: cached after: 0"));
    CHECK(has(r, "child: parent's pool reports: 0"));  // stats() of a parent's pool in a child: empty
#ifdef CLPOOL_HAS_OPENCL
    CHECK(has(r, "child: OpenCL calls: 0"));
#endif
    CHECK(has(r, "parent: child status 0"));
    CHECK(has(r, "parent: not shut down: 1"));
    CHECK(has(r, "parent: cache kept: 1048576"));
}

TEST_CASE("CLPOOL_DEVICE picks the default device; a value that matches nothing is a config_error listing devices") {
    auto r = run_child("device-env", {"CLPOOL_DEVICE=host"});
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "default device: host"));
    CHECK(has(r, "same again: 1"));

    r = run_child("device-env", {"CLPOOL_DEVICE=no-such-device"});
    CHECK(r.status == 3);
    CHECK(has(r, "config_error: clpool: CLPOOL_DEVICE='no-such-device' matches no device"));
    CHECK(has(r, "host (the host backend"));

    r = run_child("device-env", {"CLPOOL_DEVICE= "});
    CHECK(r.status == 3);
    CHECK(has(r, "CLPOOL_DEVICE=' ' is empty"));  // the value as set

    r = run_child("device-env");
    CHECK(r.status == 0);
#ifdef CLPOOL_HAS_OPENCL
    CHECK(has(r, "default device: opencl"));  // auto: the test machine has an OpenCL device
#else
    CHECK(has(r, "default device: host"));
#endif
}

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
TEST_CASE("the opt-in Ctrl+C handler: first SIGINT sets the flag (idle device: no exit), second exits with 130") {
    const auto r = run_child("interrupt-idle");
    CAPTURE(r.output);
    CHECK(has(r, "installed: 1"));
    CHECK(has(r, "installed again: 0"));
    CHECK(has(r, "still running, interrupt_requested=1"));
    CHECK_FALSE(has(r, "not reached"));
    CHECK(r.status == 130);
}
#endif

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
TEST_CASE("the opt-in Ctrl+C handler: a SIGTERM right after a SIGINT still ends the process by SIGTERM") {
    // The handler must not keep only one signal until its watchdog looks:
    // a SIGTERM that comes in the meantime would be dropped and survived.
    for (int i = 0; i < 10; ++i) {
        const auto r = run_child("interrupt-then-term");
        CAPTURE(i);
        CAPTURE(r.output);
        CHECK_FALSE(has(r, "threads at SCHED_IDLE: 0"));  // the watchdog could not be held back
        CHECK_FALSE(has(r, "survived SIGTERM"));
        CHECK(r.status == 128 + SIGTERM);
    }
}
#endif

#ifdef CLPOOL_HAS_OPENCL
TEST_CASE("exit leaves a registered queue still busy after CLPOOL_EXIT_WAIT_MS, and says so on stderr") {
    // A command waits for a user event nobody sets: a plain clFinish at exit
    // would never return (run_child kills the child after 60 s).
    auto r = run_child("exit-stuck", {"CLPOOL_EXIT_WAIT_MS=300"});
    CAPTURE(r.output);
    CHECK(has(r, "main returns"));
    CHECK(has(r, "clpool: at exit, 1 of 1 registered command queues still busy after 300 ms"));
    CHECK_FALSE(has(r, "[killed after 60 s]"));
    CHECK(r.status == 0);
    // set_exit_wait() overrides the variable.
    r = run_child("exit-stuck-api", {"CLPOOL_EXIT_WAIT_MS=86400000"});
    CAPTURE(r.output);
    CHECK(has(r, "still busy after 200 ms"));
    CHECK(r.status == 0);
    // An invalid value is reported, and the default applies.
    r = run_child("exit-stuck", {"CLPOOL_EXIT_WAIT_MS=soon"});
    CAPTURE(r.output);
    CHECK(has(r, "CLPOOL_EXIT_WAIT_MS='soon' is not a whole number of milliseconds"));
    CHECK(has(r, "still busy after 5000 ms"));
    CHECK(r.status == 0);
}

TEST_CASE("normal exit finishes the registered queues before the driver goes") {
    const auto r = run_child("exit-finish");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "exit-check: marker complete"));
    // The control: the same work on a queue clpool does not know is still
    // running when the program's exit handler looks, so the check above can fail.
    const auto c = run_child("exit-control");
    CAPTURE(c.output);
    CHECK(has(c, "exit-check: marker pending"));
}

TEST_CASE("exit with live handles from registry pools, a static and a program-owned pool ends cleanly") {
    const auto r = run_child("exit-live");
    CAPTURE(r.output);
    CHECK(has(r, "exit-live: holding 4 handles: yes"));
    CHECK(r.status == 0);  // no crash, no abort from a destructor at exit
    CHECK_FALSE(has(r, "ERROR"));  // nothing from a sanitizer in the child
}

// A pool or handle in a static made before the driver was loaded is destroyed
// after clpool's exit handler, possibly after the driver's own teardown: a
// release that the caps do not admit, and a static pool's destructor, must not
// free their buffers (nor the pool its queue and context) through the driver
// there. They leak what they hold once the exit is under way.
TEST_CASE("statics destroyed after clpool's exit handler make no OpenCL call") {
    const auto r = run_child("exit-static");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "exit-static: ready: yes"));
    CHECK(has(r, "exit-static: OpenCL calls from static destructors: 0"));
    CHECK(has(r, "exit-static: allocate: usage_error: clpool: opencl pool used after clpool's exit handler ran"));
    CHECK_FALSE(has(r, "ERROR"));
}

TEST_CASE("shutdown() finishes the queues, empties the OpenCL pools, and everything refuses work afterwards") {
    const auto r = run_child("shutdown");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "marker after shutdown: complete"));
    CHECK(has(r, "failed: 0"));
    CHECK(has(r, "released at least 1 MiB: 1"));
    CHECK(has(r, "cached after: 0"));
    CHECK(has(r, "allocate after shutdown: usage_error: clpool: opencl pool used after clpool::shutdown()"));
    CHECK(has(r, "get_buffer_pool after shutdown: usage_error"));
    CHECK(has(r, "select_device after shutdown: usage_error"));
    CHECK(has(r, "DeviceHandle::buffer_pool after shutdown: usage_error"));
    CHECK(has(r, "release after shutdown cached: 0 freed: 1"));
}

TEST_CASE("fork: the child drops inherited pools without an OpenCL call, builds its own; the parent keeps working") {
    const auto r = run_child("fork");
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(has(r, "child: inherited pool refused: clpool: this opencl pool was created before fork()"));
    CHECK(has(r, "child: trim gave back 0"));
    CHECK(has(r, "child: device usable: 0"));
    CHECK(has(r, "child: parent's device handle refused"));
    CHECK(has(r, "child: inherited host pool refused"));
    CHECK(has(r, "child: new host pool works: 1"));
    CHECK(has(r, "child: fresh registry: 1"));
    CHECK(has(r, "child: OpenCL calls on inherited objects: 0"));
    CHECK(has(r, "parent: child status 0"));  // its exit did not wait on the parent's busy queue
    CHECK(has(r, "parent: keeps working: 1"));
}

#ifdef CLPOOL_HAS_INTERRUPT_HANDLER
TEST_CASE("the opt-in Ctrl+C handler: a device still busy after the grace window ends the process with 130") {
    const auto r = run_child("interrupt-grace");
    CAPTURE(r.output);
    CHECK(has(r, "wait: interrupted"));
    CHECK_FALSE(has(r, "not reached"));
    CHECK(r.status == 130);
    CHECK(r.seconds < 8.0);  // the grace window (0.3 s) ended it, not the 10 s sleep
}
#endif

TEST_CASE("finish_interruptible returns on a stop flag or a timeout while the queue is busy, complete once done") {
    auto& env = clpool::test::OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl::CommandQueue q(clCreateCommandQueue(env.context(), env.device(), 0, &err), false);
    REQUIRE(err == CL_SUCCESS);
    cl_event gate = clCreateUserEvent(env.context(), &err);
    REQUIRE(err == CL_SUCCESS);
    REQUIRE(clEnqueueMarkerWithWaitList(q(), 1, &gate, nullptr) == CL_SUCCESS);

    std::atomic<bool> stop{false};
    clpool::WaitOptions o;
    o.stop = &stop;
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        stop = true;  // what a SIGINT handler of the program's own would do
    });
    CHECK(clpool::finish_interruptible(q, o) == clpool::WaitStatus::interrupted);
    t.join();

    stop = false;
    o.timeout = std::chrono::milliseconds(30);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(clpool::finish_interruptible(q, o) == clpool::WaitStatus::timed_out);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(30));

    o.timeout = std::chrono::nanoseconds::max();
    std::thread opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        clSetUserEventStatus(gate, CL_COMPLETE);
    });
    CHECK(clpool::finish_interruptible(q, o) == clpool::WaitStatus::complete);
    opener.join();
    clReleaseEvent(gate);
    // (A failed command's `failed` status is not tested here: PoCL 3 aborts
    // when a user event is set to an error status.)
}
#endif

#ifdef CLPOOL_HAS_OPENCL
// Only where operator new is the tests' own, which can fail on demand (sanitizers.hpp); that is
// never under TSan, which the fork case below avoids too.
#if CLPOOL_TEST_COUNTS_NEW
// shutdown() and finish_registered_queues() are noexcept. With no queue registry in this process
// yet (a fork child, or a program that never made a queue) there is nothing to finish: they must
// not make one with operator new, whose bad_alloc out of host memory would leave a noexcept
// function and std::terminate the process.
TEST_CASE("shutdown() and finish_registered_queues() with no queue registry survive a failing allocation") {
    using namespace clpool;
    (void)detail::birth_generation();  // the child is a generation of its own: no registry yet
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::size_t failed = 1;
        {
            test::FailNthAllocation fail(1);  // this generation's first: where a queue registry would be made
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

// Not under TSan: these fork a process whose watchdog thread runs, and TSan's
// signal emulation in such a child does not deliver the re-raised SIGTERM
// (as test_fork_locks.cpp, TSan does not support threads in that child).
#if defined(CLPOOL_HAS_INTERRUPT_HANDLER) && !CLPOOL_TEST_TSAN
// The handler stays installed in a fork child, but its watchdog thread does not exist there: a
// SIGTERM sent to the child must still end it, not only set a pending bit and post a semaphore
// nobody waits on.
TEST_CASE("a fork child of a process with the Ctrl+C handler still ends on SIGTERM") {
    const pid_t outer = fork();
    REQUIRE(outer >= 0);
    if (outer == 0) {
        // In a child of the test process, so the test process keeps its own signal dispositions;
        // SIGTERM's default first, as in a program of its own (not doctest's crash handler).
        std::signal(SIGTERM, SIG_DFL);
        clpool::install_interrupt_handler();
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

// A background job of a non-interactive shell, or a program under nohup, inherits SIGINT as
// ignored: install_interrupt_handler must leave such a disposition alone, or a Ctrl+C meant for
// the shell would show as interrupt_requested() and a second one would _exit(130).
TEST_CASE("install_interrupt_handler leaves a SIGINT and SIGTERM the process inherited as ignored alone") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::signal(SIGINT, SIG_IGN);
        std::signal(SIGTERM, SIG_IGN);
        clpool::install_interrupt_handler();
        raise(SIGINT);
        raise(SIGINT);  // a second one: what would _exit(130) if the handler had replaced SIG_IGN
        raise(SIGTERM);
        usleep(200 * 1000);  // the watchdog, had it been woken
        if (clpool::interrupt_requested()) _exit(2);
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
