// Epoch reclamation: collect() against other threads' reclaim rounds, and at the edges of a thread's and a
// process's life: thread exit, fork, membarrier refused later, trie destruction.
#include "rerun_self.hpp"
#include "sanitizers.hpp"

#include <clpool/shapes/detail/epoch.hpp>
#include <clpool/shapes/shape_trie.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__linux__)
#include <cerrno>
#include <csignal>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using namespace clpool;
using i64 = std::int64_t;

namespace {

// Interns and drops 2n distinct shapes, then collects; true when every entry
// made is freed again and nothing retired is left pending.
bool churn_frees_everything(ShapeTrie& trie, i64 n) {
    ShapeTrie::collect();  // what was retired before is not counted
    const auto base = ShapeTrie::live_entries();
    for (i64 i = 1; i <= n; ++i) {
        Shape s = trie.intern({i, 3, 5}, ElementType::f32);
        Shape t = trie.intern({7, i}, ElementType::i32);
    }
    ShapeTrie::collect();
    return ShapeTrie::live_entries() == base && detail::epoch_domain::instance().pending() == 0;
}

// An attachment whose destruction (the entry being freed) says so on `entered`
// and then waits for `go`: holds a reclaim round inside its frees.
struct slow_attachment : detail::shape_attachment {
    std::atomic<bool>* entered;
    std::atomic<bool>* go;
    slow_attachment(std::atomic<bool>* e, std::atomic<bool>* g) : entered(e), go(g) {}
    ~slow_attachment() override {
        entered->store(true);
        while (!go->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
};

// Destroyed with its entry: counts itself in, waits until `want` attachments
// are being destroyed at once (on other threads' rounds), then collects, as a
// reclaim function that drops more shapes may.
struct collecting_attachment : detail::shape_attachment {
    std::atomic<int>* inside;
    int want;
    collecting_attachment(std::atomic<int>* n, int w) : inside(n), want(w) {}
    ~collecting_attachment() override {
        inside->fetch_add(1);
        while (inside->load() < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ShapeTrie::collect();
    }
};

}  // namespace

// "collect() frees everything retired before the call" (docs/SHAPES.md) holds also while a round
// on another thread is still freeing: a reclaim round frees its dead objects after dropping the
// reclaim mutex, and a pool checked empty right after collect() must not miss a mirror buffer
// whose attachment is being destroyed, possibly slowly (a pool gone means waiting for the
// buffer's events).
TEST_CASE("collect() returns only after a concurrent round has freed what it took") {
    ShapeTrie::collect();
    ShapeTrie::collect();
    const i64 base = ShapeTrie::live_entries();
    ShapeTrie trie;
    std::atomic<bool> entered{false}, go{false};
    std::thread freer([&] {
        Shape s = trie.intern({3, 1, 4, 1, 5}, ElementType::f64);
        s.entry()->attachments.store(new slow_attachment(&entered, &go));
        s.reset();               // retired
        ShapeTrie::collect();    // frees it: blocks in the attachment's destructor
    });
    while (!entered.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // The entry was retired before this call: collect must not return before it is freed.
    std::thread waker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        go.store(true);
    });
    ShapeTrie::collect();
    CHECK(ShapeTrie::live_entries() == base);
    go.store(true);
    waker.join();
    freer.join();
    CHECK(ShapeTrie::live_entries() == base);
}

// collect() waits for every other thread's round still freeing, but not when it is called from
// inside a round (a reclaim function): two rounds on two threads whose reclaim functions both
// collect would wait for each other for ever. Run in a child process, which an alarm ends if it
// hangs.
TEST_CASE("shape child: collect() from reclaim functions on two threads at once returns" * doctest::skip()) {
    alarm(20);
    ShapeTrie::collect();
    const i64 base = ShapeTrie::live_entries();
    ShapeTrie trie;
    std::atomic<int> inside{0};
    auto drop_and_collect = [&](Shape s) {
        s.entry()->attachments.store(new collecting_attachment(&inside, 2));
        s.reset();             // retired
        ShapeTrie::collect();  // frees it: its attachment collects inside this round
    };
    std::thread a([&] { drop_and_collect(trie.intern({2, 4, 6}, ElementType::f32)); });
    // The second round starts while the first is inside its attachment's destructor.
    while (inside.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread b([&] { drop_and_collect(trie.intern({3, 5, 7}, ElementType::f32)); });
    a.join();
    b.join();
    alarm(0);
    CHECK(ShapeTrie::live_entries() == base);
}

TEST_CASE("collect() called by reclaim functions on two threads at once does not deadlock") {
    const int status = test::rerun_self("CLPOOL_TEST_SHAPE_CHILD=1", "shape child: collect() from reclaim functions*");
    INFO("child exit status " << status << " (142: SIGALRM, the two collects waited for each other)");
    CHECK(status == 0);
}

TEST_CASE("threads that drop thread_local Shapes at exit leave no epoch record behind") {
    ShapeTrie trie;
    auto& domain = detail::epoch_domain::instance();
    const auto base_entries = ShapeTrie::live_entries();
    // The holder is made before the thread's first pin, so it is destroyed
    // after the thread's epoch record was given back: its Shapes die on a
    // thread past its thread_local destructors' start.
    auto worker = [&trie](i64 i) {
        thread_local std::vector<Shape> held;
        held.push_back(trie.intern({i, 11, 13}, ElementType::f32));
    };
    std::thread(worker, 0).join();  // one record for these threads, made now
    const std::size_t records = domain.records();
    const std::size_t in_use = domain.records_in_use();
    constexpr int threads = 64;
    for (int i = 1; i <= threads; ++i) std::thread(worker, i).join();
    INFO("records before " << records << ", after " << domain.records() << " (" << threads << " threads)");
    CHECK(domain.records() <= records + 1);
    CHECK(domain.records_in_use() <= in_use);
    ShapeTrie::collect();
    CHECK(ShapeTrie::live_entries() == base_entries);  // their dying Shapes were retired and freed
}

#if defined(__linux__)
namespace {

// Runs f in a fork child bounded by an alarm; the child's exit status is
// f's result (0 good), 128 + signal if it died (SIGALRM: it hung).
template <class F>
int in_child(F f, unsigned seconds = 20) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(seconds);
        _exit(f());
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

// A seccomp filter that answers membarrier with EPERM, as a sandbox installed
// after start-up would. True if installed.
bool refuse_membarrier() {
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace

TEST_CASE("retired shapes are still freed after membarrier starts failing") {
    auto& domain = detail::epoch_domain::instance();
    ShapeTrie::collect();
#if !CLPOOL_EPOCH_TSAN
    REQUIRE(domain.uses_membarrier());  // else this test shows nothing: the kernel here has it
#endif
    const int rc = in_child([&] {
        if (!refuse_membarrier()) return 2;
        ShapeTrie trie;
        if (!churn_frees_everything(trie, 2000)) return 3;
        if (domain.uses_membarrier()) return 4;  // pins must have moved to fences
        // And again: the rounds after the switch free too.
        return churn_frees_everything(trie, 500) ? 0 : 5;
    });
    CHECK(rc == 0);  // 2: no seccomp; 3, 5: nothing freed once membarrier failed; 4: pins still cheap
}

TEST_CASE("a fork child frees what it retires although a parent thread was inside a read section") {
    ShapeTrie trie;
    Shape keep = trie.intern({4, 4}, ElementType::f32);
    std::atomic<int> phase{0};
    std::thread pinned([&] {
        ShapeTrie::reader r(trie);  // open across the fork
        phase = 1;
        while (phase.load() != 2) std::this_thread::yield();
    });
    while (phase.load() != 1) std::this_thread::yield();
    int failed = 0;
    for (int i = 0; i < 4; ++i) failed += in_child([&] { return churn_frees_everything(trie, 300) ? 0 : 1; }) != 0;
    phase = 2;
    pinned.join();
    CHECK(failed == 0);
    CHECK(churn_frees_everything(trie, 10));  // the parent is unaffected
}

TEST_CASE("a fork child does not hang on the epoch mutex held by a parent thread at the fork") {
    std::atomic<bool> stop{false};
    std::thread collector([&] {
        while (!stop.load()) ShapeTrie::collect();  // holds the reclaim mutex most of the time
    });
    int hung = 0, failed = 0;
    for (int i = 0; i < 10; ++i) {
        const int rc = in_child(
            [] {
                ShapeTrie trie;
                const auto base = ShapeTrie::live_entries();
                if (!churn_frees_everything(trie, 50)) return 10 + (ShapeTrie::live_entries() != base);
                return 0;
            },
            5);
        hung += rc == 128 + SIGALRM;
        failed += rc != 0;
        if (rc != 0) MESSAGE("child " << i << " exit status " << rc);
    }
    stop = true;
    collector.join();
    CHECK(hung == 0);
    CHECK(failed == 0);
}

#if !CLPOOL_TEST_TSAN  // TSan cannot fork a process with running threads
// The stripe locks of ShapeTrie::global() (a process-wide, never-destroyed singleton) are
// registered with fork_locks, as every other process-wide lock is (docs/RELIABILITY.md, promise
// 8): a parent thread holding one at the fork must not leave it held in the child for ever, where
// the child's first intern of a new shape in that stripe would hang. Here the parent thread is
// held inside the lock deterministically: its last release unlinks under the stripe's lock, and
// the retire that makes up its 128th runs a reclaim round there that frees an entry whose
// attachment waits on `go`.
TEST_CASE("a fork child can intern into a global trie stripe a parent thread held at the fork") {
    ShapeTrie& trie = ShapeTrie::global();
    const i64 ext[] = {5, 7, 11, 13, 17};
    std::atomic<bool> entered{false}, go{false};
    std::thread holder([&] {
        ShapeTrie::collect();
        Shape s1 = trie.intern(ext, ElementType::f32);
        Shape s2 = trie.intern(ext, ElementType::i32);  // same stripe: a branch node on the type word
        Shape x = trie.intern({3, 1, 4, 1, 5, 9}, ElementType::f64);
        x.entry()->attachments.store(new slow_attachment(&entered, &go));
        auto* rec = detail::epoch_tls_record;
        REQUIRE(rec);
        rec->since_reclaim = 0;
        x.reset();  // retired
        Shape y = trie.intern({2, 7, 1, 8, 2, 8}, ElementType::u8);
        rec->since_reclaim = detail::epoch_domain::reclaim_every - 1;
        y.reset();  // its retire runs a round: x tagged, the epoch advances
        rec->since_reclaim = detail::epoch_domain::reclaim_every - 1;
        s2.reset();  // unlink under the stripe's lock retires the branch: a round frees x, which waits on `go`
    });
    while (!entered.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread waker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        go.store(true);
    });
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(5);
        Shape s = ShapeTrie::global().intern(ext, ElementType::f64);  // a miss in the held stripe
        _exit(s ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    go.store(true);
    waker.join();
    holder.join();
    INFO("child wait status " << status << " (SIGALRM, 14: it hung on the stripe lock)");
    CHECK(status == 0);
}
#endif
#endif  // __linux__

TEST_CASE("a trie destroyed while another thread drops its last handles: no use after free") {
    // Under ASan, a release that touches the trie after its destruction is a heap-use-after-free in unlink.
    ShapeTrie::collect();  // what earlier cases retired is not counted
    const auto base = ShapeTrie::live_entries();
    for (int round = 0; round < 20; ++round) {
        auto* trie = new ShapeTrie(1);  // one stripe: every release takes the same lock
        std::vector<Shape> shapes;
        for (i64 i = 1; i <= 2000; ++i) shapes.push_back(trie->intern({i, round}, ElementType::f32));
        std::atomic<int> dropped{0};
        std::thread dropper([&] {
            for (auto& s : shapes) {
                s.reset();
                dropped.fetch_add(1);
            }
        });
        while (dropped.load() < 100) std::this_thread::yield();  // the trie dies mid-drop
        delete trie;
        dropper.join();
    }
    ShapeTrie::collect();
    CHECK(ShapeTrie::live_entries() == base);
}
