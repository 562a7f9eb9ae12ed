// ThreadCached: per-thread magazines keep the pool's contract, its caps and its statistics.
#include "alloc_counter.hpp"
#include "pool_factory.hpp"
#include "sanitizers.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

using TCPool = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<4>>;
using TCStripedPool = MockPool<PowerOfTwoBuckets, DeviceLocal, Unlimited, ThreadCached<8, Striped<4>>>;
using TCCappedPool = MockPool<FixedSetBuckets, DeviceLocal, Capped, ThreadCached<4>>;

const Ledger& ledger_of(const auto& pool) { return pool.backend().ledger(); }

// bytes_allocated is every byte held from the driver, split exactly three ways.
void check_balanced(const PoolStats& s) {
    CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
    CHECK(s.bytes_in_use >= s.bytes_requested);
    std::uint64_t hits = 0, misses = 0;
    std::size_t cached = 0, in_use = 0;
    for (const auto& b : s.buckets) {
        hits += b.hits;
        misses += b.misses;
        cached += b.cached_buffers * b.bucket_size;
        in_use += b.in_use_buffers * b.bucket_size;
    }
    CHECK(hits == s.hits);
    CHECK(misses == s.misses);
    CHECK(cached == s.bytes_cached);
    CHECK(in_use == s.bytes_in_use);
}

// A mailbox that hands handles to another thread, which releases them.
template <class H>
struct mailbox {
    std::mutex m;
    std::deque<std::pair<H, unsigned>> q;
    void put(H h, unsigned seed) {
        std::lock_guard g(m);
        q.emplace_back(std::move(h), seed);
    }
    bool take(H& h, unsigned& seed) {
        std::lock_guard g(m);
        if (q.empty()) return false;
        h = std::move(q.front().first);
        seed = q.front().second;
        q.pop_front();
        return true;
    }
};

// Threads allocate mixed sizes, write their own pattern, check it before
// releasing; every third handle is released by the next thread instead.
template <class P>
void hammer(P& pool, int threads, int iterations, std::atomic<int>& corrupted) {
    static constexpr std::size_t sizes[] = {1, 200, 1000, 4096, 5000, 65536, 100000};
    std::vector<mailbox<typename P::handle>> boxes(static_cast<std::size_t>(threads));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            std::minstd_rand rng(static_cast<unsigned>(t) + 1);
            std::vector<std::pair<typename P::handle, unsigned>> held;
            auto check_and_release = [&](typename P::handle& h, unsigned seed) {
                if (read_bytes(h.buffer(), h.nbytes()) != pattern(h.nbytes(), seed)) ++corrupted;
                h.release();
            };
            for (int i = 0; i < iterations; ++i) {
                const std::size_t n = sizes[rng() % std::size(sizes)];
                const unsigned seed = static_cast<unsigned>(t * 100000 + i);
                auto h = pool.allocate(n);
                write_bytes(h.buffer(), pattern(n, seed));
                if (i % 3 == 0) {
                    boxes[static_cast<std::size_t>((t + 1) % threads)].put(std::move(h), seed);
                } else {
                    held.emplace_back(std::move(h), seed);
                }
                typename P::handle foreign;
                unsigned fseed = 0;
                while (boxes[static_cast<std::size_t>(t)].take(foreign, fseed)) check_and_release(foreign, fseed);
                if (!held.empty() && (held.size() > 6 || rng() % 2)) {
                    auto& [victim, vseed] = held[rng() % held.size()];
                    check_and_release(victim, vseed);
                    std::erase_if(held, [](const auto& p) { return !p.first; });
                }
            }
            for (auto& [h, seed] : held) check_and_release(h, seed);
        });
    }
    for (auto& t : ts) t.join();
    for (auto& b : boxes) {  // what was posted after its receiver finished
        typename P::handle h;
        unsigned seed = 0;
        while (b.take(h, seed)) {
            if (read_bytes(h.buffer(), h.nbytes()) != pattern(h.nbytes(), seed)) ++corrupted;
            h.release();
        }
    }
}

}  // namespace

TEST_CASE_TEMPLATE("thread-cached pools: a hit is the buffer just released, and stats say so", P, TCPool, TCStripedPool,
                   TCCappedPool) {
    auto pool = make_pool<P>();
    const void* first = nullptr;
    {
        auto h = pool->allocate(3000);
        first = identity(h.buffer());
    }
    auto s = pool->stats();
    CHECK(s.misses == 1);
    CHECK(s.bytes_cached == pool->bucket_size_for(3000));
    CHECK(s.bytes_in_use == 0);
    check_balanced(s);
    for (int i = 0; i < 10; ++i) {
        auto h = pool->allocate(3000);
        CHECK(identity(h.buffer()) == first);
        s = pool->stats();
        CHECK(s.bytes_in_use == h.bucket_size());
        CHECK(s.bytes_requested == 3000);
        CHECK(s.bytes_cached == 0);
        check_balanced(s);
    }
    s = pool->stats();
    CHECK(s.hits == 10);
    CHECK(s.misses == 1);
    CHECK(ledger_of(*pool).live == 1);
}

TEST_CASE_TEMPLATE("thread-cached pools: many threads, every owner's bytes survive", P, TCPool, TCStripedPool,
                   TCCappedPool) {
    auto pool = make_pool<P>();
    std::atomic<int> corrupted{0};
    hammer(*pool, 8, 3000, corrupted);
    CHECK(corrupted == 0);
    // Every thread has exited: its magazine went back to the shared lists.
    auto s = pool->stats();
    check_balanced(s);
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_requested == 0);
    CHECK(s.hits + s.misses == 8u * 3000u);
    CHECK(ledger_of(*pool).live == static_cast<long>(s.bytes_allocated ? s.misses - s.driver_frees : 0));
    pool->trim();
    CHECK(pool->stats().bytes_allocated == 0);
    CHECK(ledger_of(*pool).live == 0);
}

TEST_CASE("thread-cached pools: caps hold with magazines, in every snapshot") {
    // 3 idle buffers per bucket and 256 KiB of idle bytes at most, across all threads' magazines.
    const Capped caps{256 * 1024, 3};
    auto pool = make_pool<TCCappedPool>(caps);
    std::atomic<bool> done{false};
    std::atomic<int> violations{0}, snapshots{0};
    std::thread watcher([&] {
        while (!done) {
            const auto s = pool->stats();
            ++snapshots;
            if (s.bytes_cached + s.bytes_pending > caps.max_bytes) ++violations;
            for (const auto& b : s.buckets)
                if (b.cached_buffers + b.pending_buffers > caps.max_per_bucket) ++violations;
            if (s.bytes_allocated != s.bytes_in_use + s.bytes_cached + s.bytes_pending) ++violations;
        }
    });
    std::atomic<int> corrupted{0};
    hammer(*pool, 6, 3000, corrupted);
    done = true;
    watcher.join();
    CHECK(corrupted == 0);
    CHECK(violations == 0);
    CHECK(snapshots > 0);
    const auto s = pool->stats();
    CHECK(s.evictions > 0);  // the caps did bite
    CHECK(s.bytes_cached <= caps.max_bytes);
    check_balanced(s);
    CHECK(ledger_of(*pool).live == static_cast<long>(s.bytes_allocated ? s.misses - s.driver_frees : 0));
}

TEST_CASE("thread-cached pools: trim reaches a live thread's magazine; thread exit returns it") {
    auto pool = make_pool<TCPool>();
    std::mutex m;
    std::condition_variable cv;
    int stage = 0;
    const void* id = nullptr;
    std::thread worker([&] {
        {
            auto h = pool->allocate(10000);
            id = identity(h.buffer());
        }  // into this thread's magazine
        std::unique_lock l(m);
        stage = 1;
        cv.notify_all();
        cv.wait(l, [&] { return stage == 2; });
        auto h = pool->allocate(20000);  // refill after trim: a miss
        h.release();
    });
    {
        std::unique_lock l(m);
        cv.wait(l, [&] { return stage == 1; });
    }
    auto s = pool->stats();
    CHECK(s.bytes_cached == pool->bucket_size_for(10000));
    CHECK(pool->trim() == pool->bucket_size_for(10000));
    CHECK(ledger_of(*pool).live == 0);
    CHECK(pool->stats().bytes_allocated == 0);
    {
        std::lock_guard l(m);
        stage = 2;
    }
    cv.notify_all();
    worker.join();
    // The worker exited with a 32 KiB buffer in its magazine: it is in the shared lists now.
    s = pool->stats();
    CHECK(s.bytes_cached == pool->bucket_size_for(20000));
    check_balanced(s);
    auto h = pool->allocate(20000);
    CHECK(pool->stats().hits == 1);  // this thread's hit on the buffer the worker left behind
    CHECK(pool->stats().misses == 2);
    CHECK(id != nullptr);
}

TEST_CASE("thread-cached pools: a pool destroyed before a thread that used it") {
    auto ledger = std::make_shared<Ledger>();
    auto pool = std::make_unique<TCPool>(MockBackend(ledger));
    std::mutex m;
    std::condition_variable cv;
    int stage = 0;
    std::thread worker([&] {
        pool->allocate(5000).release();  // into the magazine
        auto kept = pool->allocate(70000);
        std::unique_lock l(m);
        stage = 1;
        cv.notify_all();
        cv.wait(l, [&] { return stage == 2; });
        kept.release();  // an orphan now: frees itself
    });
    {
        std::unique_lock l(m);
        cv.wait(l, [&] { return stage == 1; });
    }
    pool.reset();  // the magazine's buffer is freed with the pool; the thread still holds the magazine
    CHECK(ledger->live == 1);
    {
        std::lock_guard l(m);
        stage = 2;
    }
    cv.notify_all();
    worker.join();
    CHECK(ledger->live == 0);
    // A new pool, possibly at the same address, gets fresh magazines.
    auto again = std::make_unique<TCPool>(MockBackend(ledger));
    again->allocate(5000).release();
    CHECK(again->stats().misses == 1);
    CHECK(again->stats().hits == 0);
}

#if __has_include(<sys/wait.h>)
#include <sys/wait.h>
#include <unistd.h>

namespace {
// The fork child's exit code. The child leaves through std::exit, so this
// thread's thread_local destructor runs (the path under test); then this
// handler, registered last and so run first among the exit handlers, ends the
// process before static and library destructors run. Those belong to the
// parent's state (the OpenCL runtime's threads do not exist in the child), and
// running them there crashed a CI run once.
// Exit code 4: the thread's magazine list was not destroyed.
int fork_child_code = 0;
void end_fork_child_now() { _exit(clpool::detail::thread_magazines_gone ? fork_child_code : 4); }
}  // namespace

TEST_CASE("thread-cached pools: a fork child exits cleanly with the parent's magazines") {
    auto pool = make_pool<TCPool>();
    pool->allocate(5000).release();  // this thread's magazine exists
    pool->trim();                    // and is empty, so the snooper's trims below free nothing
    auto kept = pool->allocate(5000);
    // The snooper locks the registry and every magazine over and over (trim
    // flushes each magazine under its lock), so one may be held at the fork.
    // It must not call malloc: clang 14's ASan and TSan allocators take no
    // locks around fork (LLVM added that in 18), so a child that allocates
    // while a parent thread was inside malloc deadlocks in the sanitizer.
    std::atomic<bool> stop{false}, snooping{false};
    std::thread snooper([&] {
        while (!stop) {
            (void)pool->trim();
            snooping.store(true, std::memory_order_release);
        }
    });
    while (!snooping.load(std::memory_order_acquire)) std::this_thread::yield();
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);  // a hang in the child shows as SIGALRM
        auto fresh = make_pool<TCPool>();  // the child's own pool works
        fresh->allocate(5000).release();
        const bool ok = fresh->stats().bytes_cached == fresh->bucket_size_for(5000);
        fresh.reset();
        fork_child_code = ok ? 0 : 3;
        std::atexit(&end_fork_child_now);
        std::exit(fork_child_code);  // runs this thread's thread_local destructor first
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    stop = true;
    snooper.join();
    INFO("child killed by signal ", (WIFSIGNALED(status) ? WTERMSIG(status) : 0), " (14 = SIGALRM: a hang)");
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 3: the child's pool failed; 4: its thread_local destructor did not run
    kept.release();  // the parent keeps working
    CHECK(pool->stats().bytes_cached == pool->bucket_size_for(5000));
}
#endif

namespace {

// An engine-like batch loop: each step allocates 1-16 buffers of 1 B-64 KiB
// (buckets up to 64 KiB), then releases them all. Seeded per thread, so each
// thread's request sequence is the same in every run; returns the pool's hit
// rate in percent, from stats().
template <class P>
double batch_loop_hit_rate(const Capped& caps, int threads) {
    auto pool = make_pool<P>(caps);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&pool, t] {
            std::minstd_rand rng(static_cast<unsigned>(t) + 7);
            std::vector<typename P::handle> live;
            for (int step = 0; step < 1500; ++step) {
                const auto n = 1 + rng() % 16;
                for (unsigned j = 0; j < n; ++j) live.push_back(pool->allocate(1 + rng() % 65536));
                live.clear();
            }
        });
    }
    for (auto& t : ts) t.join();
    const auto s = pool->stats();
    check_balanced(s);
    return 100.0 * static_cast<double>(s.hits) / static_cast<double>(s.hits + s.misses);
}

using SMCappedPool = MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, SingleMutex>;
using TCCapped8Pool = MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, ThreadCached<8>>;
using TCStripedCappedPool = MockPool<PowerOfTwoBuckets, DeviceLocal, Capped, ThreadCached<8, Striped<4>>>;

}  // namespace

// With a byte cap, an empty magazine slot must not keep its reservation (an
// in-use buffer counted as idle): the cap would fill with phantom bytes and
// releases would be evicted (35% hits against 55% for SingleMutex at one
// thread, 16% at eight). Target: within 5 points of SingleMutex for a cap of at
// least 4x the largest bucket in use.
TEST_CASE_TEMPLATE("thread-cached pools: a byte cap keeps the hit rate of one shared list", P, TCCapped8Pool,
                   TCStripedCappedPool) {
    for (const std::size_t cap : {std::size_t{256} << 10, std::size_t{1} << 20}) {
        for (const int threads : {1, 8}) {
            const Capped caps{cap, Capped::default_per_bucket};
            const double shared = batch_loop_hit_rate<SMCappedPool>(caps, threads);
            const double cached = batch_loop_hit_rate<P>(caps, threads);
            INFO("cap " << cap << " B, " << threads << " threads: SingleMutex " << shared << "%, ThreadCached "
                        << cached << "%");
            CHECK(cached >= shared - 5.0);
        }
    }
}

#if CLPOOL_TEST_COUNTS_NEW  // fails host allocations through the replaced operator new (alloc_counter.hpp)
// record_history() allocates every ring it needs before it replaces any: if
// the shared lists' allocation threw after the magazines' rings were replaced,
// the magazines would keep new (empty) rings and the lists their previous
// ones, and the events the magazines recorded would be lost.
TEST_CASE("thread-cached pools: record_history that runs out of host memory leaves the history as it was") {
    auto pool = make_pool<TCStripedPool>();
    pool->record_history(64);
    for (int i = 0; i < 4; ++i) pool->allocate(5000).release();  // a miss, then hits from this thread's magazine
    const auto before = pool->snapshot().history;
    REQUIRE(before);
    REQUIRE(before->recorded == 8);
    std::size_t failures = 0;
    for (std::size_t nth = 1;; ++nth) {
        bool failed = false;
        {
            FailNthAllocation fail(nth);
            try {
                pool->record_history(128);
            } catch (const std::bad_alloc&) {
                failed = true;
            }
        }
        if (!failed) break;
        ++failures;
        const auto after = pool->snapshot().history;
        INFO("operator new #" << nth << " failed");
        REQUIRE(after);
        CHECK(after->capacity == 64);
        CHECK(after->recorded == before->recorded);
        CHECK(after->events.size() == before->events.size());
        pool->allocate(5000).release();  // both parts still record, in the same history
        const auto more = pool->snapshot().history;
        REQUIRE(more);
        CHECK(more->recorded == before->recorded + 2);
        pool->record_history(64);  // the next round starts from the same state
        for (int i = 0; i < 4; ++i) pool->allocate(5000).release();
    }
    CHECK(failures > 1);  // the magazines' part and the shared lists' part each failed at least once
    const auto fresh = pool->snapshot().history;
    REQUIRE(fresh);
    CHECK(fresh->capacity == 128);
    CHECK(fresh->recorded == 0);
}
#endif

#if CLPOOL_TEST_COUNTS_NEW && __has_include(<sys/wait.h>)  // a hook in operator new; shutdown in a fork child
namespace {
void tc_shutdown_and_trim(void* pool) {
    // What shutdown() does first, then the program trims its own pool (shutdown() trims only registry pools).
    clpool::detail::mark_shut_down();
    static_cast<TCPool*>(pool)->trim();
}
}  // namespace

// A release checked for shutdown() before it locked its magazine: one that
// passed the check, then waited while shutdown() and a trim() ran, cached its
// buffer after both had returned.
TEST_CASE("thread-cached pools: a release overtaken by shutdown() and trim() frees its buffer") {
    const pid_t pid = fork();  // shutdown cannot be undone: in a child of its own
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);
        int code = 0;
        {
            auto pool = make_pool<TCPool>();
            auto h = pool->allocate(5000);
            std::thread releaser([&] {
                // This thread's first release to the pool makes its magazine (an
                // allocation) after the check, before the magazine's lock:
                // shutdown() and trim() run there, as from another thread.
                thread_alloc_hook() = {&tc_shutdown_and_trim, pool.get()};
                h.release();
            });
            releaser.join();  // its magazine went back to the shared lists at its exit
            const auto s = pool->stats();
            code = s.bytes_cached != 0 ? 3 : s.evictions != 1 ? 4 : 0;
        }
        _exit(code);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO("child killed by signal ", (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 3: the buffer stayed cached; 4: it was not freed
}
#endif
