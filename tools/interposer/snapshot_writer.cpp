// CLPOOL_SNAPSHOT=path: the process snapshot (clpool.snapshot JSON) written at exit and on SIGUSR1 (docs/DROPIN.md).
#include "state.hpp"

#include <clpool/diagnostics/snapshot_json.hpp>
#include <clpool/platform/fork_locks.hpp>
#include <clpool/pools/process_snapshot.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace clpool::interpose {
namespace {

std::string g_path;           // CLPOOL_SNAPSHOT; set once, before the thread and the handler exist
pid_t g_armed_pid = 0;        // the process that armed it: a fork child writes path.PID
int g_wake[2] = {-1, -1};     // the signal handler's one byte to the writer thread
std::mutex g_write_mu;        // one writer at a time (the thread, or exit)
bool g_written_at_exit = false;  // under g_write_mu: the exit snapshot is the last; g_path may be destroyed after it
std::atomic<bool> g_exiting{false};  // exit began: a snapshot still waiting for State::mu gives up

// The interposer's pools, one entry each, after snapshot_all()'s (the
// interposer's own process-wide pools; the application's are its own copy of
// clpool, not seen here). `wait_for_lock` false (at exit): give up after a
// second rather than hang on a lock another thread holds. true (SIGUSR1):
// wait until exit begins, never longer: exit waits for g_write_mu, held here.
bool take(State& st, ProcessSnapshot& snap, bool wait_for_lock) {
    snap = snapshot_all();
    std::unique_lock lock(st.mu, std::defer_lock);
    for (int i = 0; !lock.try_lock(); ++i) {
        if (wait_for_lock ? g_exiting.load(std::memory_order_acquire) : i == 100) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_for_lock ? 2 : 10));
    }
    for (auto& [c, cs] : st.contexts) {
        for (auto& [flags, pool] : cs->pools) {
            PoolSnapshot p = pool->snapshot();
            char where[96];
            std::snprintf(where, sizeof where, " (context 0x%x, flags 0x%" PRIx64 ")", cs->token,
                          static_cast<std::uint64_t>(flags));
            p.pool = "interposer:" + p.pool + where;
            snap.pools.push_back(std::move(p));
        }
    }
    snap.taken_ns = detail::steady_ns();
    return true;
}

// Writes path (path.PID in a fork child) whole: into path.tmp, then renamed,
// so a reader never sees half a file. `last`: the exit snapshot. Returns false
// once the exit snapshot has been written (nothing is written then). Never throws.
bool write_now(bool wait_for_lock, bool last) noexcept {
    try {
        std::lock_guard one(g_write_mu);
        if (g_written_at_exit) return false;
        g_written_at_exit = last;
        ProcessSnapshot snap;
        if (!take(state(), snap, wait_for_lock)) {
            if (last) std::fprintf(stderr, "clpool: CLPOOL_SNAPSHOT skipped: the interposer was busy at exit\n");
            return true;  // a SIGUSR1 snapshot overtaken by exit: the exit snapshot says how that went
        }
        std::string path = g_path;
        if (getpid() != g_armed_pid) path += "." + std::to_string(getpid());
        const std::string tmp = path + ".tmp";
        if (!write_snapshot(tmp.c_str(), snap) || std::rename(tmp.c_str(), path.c_str()) != 0) {
            std::fprintf(stderr, "clpool: CLPOOL_SNAPSHOT='%s' could not be written\n", path.c_str());
            std::remove(tmp.c_str());
        }
    } catch (...) {
        std::fprintf(stderr, "clpool: CLPOOL_SNAPSHOT: out of host memory; no snapshot\n");
    }
    return true;
}

struct sigaction g_previous{};  // whoever handled SIGUSR1 before (LLVM in PoCL does): called after ours

// The handler does one write(2) (async-signal-safe); the thread does the work.
void on_signal(int sig, siginfo_t* info, void* context) {
    const int saved = errno;
    const char byte = 1;
    [[maybe_unused]] const ssize_t r = write(g_wake[1], &byte, 1);  // full pipe (O_NONBLOCK): a dump is due anyway
    errno = saved;
    if (g_previous.sa_flags & SA_SIGINFO) g_previous.sa_sigaction(sig, info, context);
    else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) g_previous.sa_handler(sig);
}

void writer_thread() {
    pthread_setname_np(pthread_self(), "clpool-snapshot");  // seen in ps, gdb and /proc/PID/task/*/comm
    char buf[64];
    for (;;) {
        const ssize_t n = read(g_wake[0], buf, sizeof buf);  // several signals at once: one snapshot
        if (n > 0) {
            if (!write_now(true, false)) return;  // past the exit snapshot: static destructors may be running
        } else if (n == 0 || errno != EINTR) {
            return;
        }
    }
}

// In a fork child the thread is gone: the handler's byte goes nowhere (the
// child does not answer SIGUSR1), and the parent's thread must not read it.
void child_after_fork() {
    close(g_wake[0]);
    close(g_wake[1]);
    g_wake[0] = g_wake[1] = -1;
}

// The last snapshot; then the thread is woken to stop.
void at_exit() noexcept {
    g_exiting.store(true, std::memory_order_release);
    write_now(false, true);
    const char byte = 1;
    if (g_wake[1] >= 0) {
        [[maybe_unused]] const ssize_t r = write(g_wake[1], &byte, 1);
    }
}

// Ours first, then `previous` (saved for on_signal to call).
void install_handler(const struct sigaction& previous) noexcept {
    g_previous = previous;
    struct sigaction sa{};
    sa.sa_sigaction = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (previous.sa_flags & SA_ONSTACK);
    sigaction(SIGUSR1, &sa, nullptr);
}

}  // namespace

void keep_snapshot_signal() noexcept {
    static std::mutex mu;
    if (g_wake[1] < 0) return;  // not armed, or a fork child
    std::lock_guard lock(mu);
    struct sigaction now{};
    if (sigaction(SIGUSR1, nullptr, &now) != 0) return;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_signal) return;
    install_handler(now);  // a driver took SIGUSR1 over (LLVM in PoCL does): ours again, theirs after
}

void arm_snapshot() {
    const char* path = std::getenv("CLPOOL_SNAPSHOT");
    if (!path || !*path) return;
    g_path = path;
    g_armed_pid = getpid();
    // Taken around fork(): a child whose fork came during a SIGUSR1 snapshot must still write its exit snapshot.
    detail::fork_locks::add_mutex(detail::fork_rank::interposer_snapshot, g_write_mu);
    std::atexit(at_exit);
    // SIGUSR1: ours first, then the handler that was there (none: the default would end the process).
    if (sigaction(SIGUSR1, nullptr, &g_previous) != 0 || pipe2(g_wake, O_CLOEXEC) != 0) return;
    fcntl(g_wake[1], F_SETFL, O_NONBLOCK);
    try {
        std::thread(writer_thread).detach();
    } catch (...) {
        close(g_wake[0]);
        close(g_wake[1]);
        g_wake[0] = g_wake[1] = -1;
        return;
    }
    pthread_atfork(nullptr, nullptr, child_after_fork);
    install_handler(g_previous);
}

}  // namespace clpool::interpose
