// The biased locks: ThreadCached's magazine lock (biased_lock) and SingleMutex's BiasedSpinMutex; an owner and other threads never hold one at once.
#include <clpool/policies/biased_spin_mutex.hpp>
#include <clpool/policies/detail/biased_lock.hpp>

#include "sanitizers.hpp"
#include "thread_state.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using clpool::detail::biased_lock;

namespace {

// Guarded by `lock` alone: the owner moves one unit from a to b and back; a
// reader under the lock must always see a + b == total and `inside` false.
struct guarded;
bool torn_view(const guarded& x);

struct guarded {
    biased_lock lock;
    long a = 1000, b = 0;  // deliberately not atomic
    bool inside = false;
    long owner_rounds = 0;
};

// The owner's section: moves units from a to b and back, every step a store
// of its own, with `inside` set throughout.
void move_and_restore(guarded& x) {
    auto& v = const_cast<volatile guarded&>(x);
    v.inside = true;
    for (int step = 0; step < 4; ++step) {
        v.a = v.a - 1;
        v.b = v.b + 1;
    }
    for (int step = 0; step < 4; ++step) {
        v.b = v.b - 1;
        v.a = v.a + 1;
    }
    v.inside = false;
}

// Looks a while (an owner that ignored the lock would move meanwhile).
bool torn_view(const guarded& x) {
    bool torn = false;
    for (int i = 0; i < 200; ++i) {
        const auto& v = const_cast<const volatile guarded&>(x);
        torn |= v.inside || v.a + v.b != 1000 || v.b != 0;
    }
    return torn;
}

}  // namespace

TEST_CASE("biased_lock: other threads never see the owner's section half done") {
    constexpr int owners = 4, readers = 3;
    std::array<guarded, owners> g;
    std::atomic<bool> stop{false};
    std::atomic<long> torn{0}, reads{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < owners; ++i)
        threads.emplace_back([&, i] {
            auto& x = g[i];
            for (long round = 0; !stop.load(std::memory_order_relaxed); ++round) {
                if (round % 16 == 0) std::this_thread::yield();  // lets readers in between sections
                biased_lock::owner_guard lock(x.lock);
                move_and_restore(x);
                ++x.owner_rounds;
            }
        });
    for (int r = 0; r < readers; ++r)
        threads.emplace_back([&, r] {
            for (int k = 0; k < 3000; ++k) {
                if ((k + r) % 3 == 0) {  // all at once, as stats() takes them
                    biased_lock::lock_all(g, [](guarded& x) -> biased_lock& { return x.lock; });
                    for (auto& x : g)
                        if (torn_view(x)) torn.fetch_add(1);
                    for (auto& x : g) x.lock.unlock();
                } else {
                    auto& x = g[(k + r) % owners];
                    std::lock_guard lock(x.lock);
                    if (torn_view(x)) torn.fetch_add(1);
                }
                reads.fetch_add(1);
            }
        });
    for (int r = 0; r < readers; ++r) threads[owners + r].join();
    stop = true;
    for (int i = 0; i < owners; ++i) threads[i].join();
    CHECK(torn.load() == 0);
    CHECK(reads.load() == readers * 3000);
    for (auto& x : g) CHECK(x.owner_rounds > 0);  // the owners ran while being read
}

TEST_CASE("biased_lock: an owner waits while another thread holds the lock, then goes on") {
    guarded x;
    x.lock.lock();  // another thread's hold (here: this thread, outside an owner section)
    std::atomic<bool> entered{false};
    std::thread owner([&] {
        biased_lock::owner_guard lock(x.lock);
        entered = true;
        ++x.owner_rounds;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(entered.load());  // held out by the other thread's lock
    x.lock.unlock();
    owner.join();
    CHECK(entered.load());
    CHECK(x.owner_rounds == 1);
    // And the owner's fast path works again afterwards, as do other threads' locks.
    {
        biased_lock::owner_guard lock(x.lock);
        ++x.owner_rounds;
    }
    std::thread([&] { std::lock_guard lock(x.lock); }).join();
    CHECK(x.owner_rounds == 2);
}

TEST_CASE("BiasedSpinMutex: one thread's locks bias it; another thread's lock revokes the bias for good") {
    clpool::BiasedSpinMutex m;
    for (int i = 0; i < clpool::BiasedSpinMutex::bias_after - 1; ++i) {
        std::lock_guard g(m);
    }
    CHECK_FALSE(m.is_biased());
    { std::lock_guard g(m); }
    CHECK(m.is_biased());
    std::thread([&] { std::lock_guard g(m); }).join();
    CHECK_FALSE(m.is_biased());
    for (int i = 0; i < 4 * clpool::BiasedSpinMutex::bias_after; ++i) {
        std::lock_guard g(m);
    }
    CHECK_FALSE(m.is_biased());  // revoked, never biased again
}

TEST_CASE("BiasedSpinMutex: a revoking thread never sees the owner's section half done") {
    // Each round: a fresh mutex, biased to an owner that then loops in its
    // section; another thread revokes while it runs and looks at the data.
    long torn = 0, rounds_biased = 0;
    for (int round = 0; round < 200; ++round) {
        clpool::BiasedSpinMutex m;
        guarded x;
        std::atomic<bool> biased{false}, running{false}, stop{false};
        std::thread owner([&] {
            for (long k = 0; !stop.load(std::memory_order_relaxed); ++k) {
                std::lock_guard g(m);
                move_and_restore(x);
                if (k == clpool::BiasedSpinMutex::bias_after) {
                    biased = m.is_biased();
                    running = true;
                }
            }
        });
        while (!running.load()) std::this_thread::yield();
        {
            std::lock_guard g(m);  // revokes while the owner loops
            if (torn_view(x)) ++torn;
        }
        for (int k = 0; k < 20; ++k) {
            std::lock_guard g(m);  // the owner now takes the mutex too
            if (torn_view(x)) ++torn;
        }
        stop = true;
        owner.join();
        rounds_biased += biased.load();
    }
    CHECK(torn == 0);
    CHECK(rounds_biased == 200);  // every round revoked a live bias
}

#if defined(__linux__)
TEST_CASE("BiasedSpinMutex: a thread that revokes waits for the owner asleep, not spinning") {
    // The owner is inside its biased section (preempted there, say): the
    // revoking thread must let it run, on its own core too, so it naps.
    clpool::BiasedSpinMutex m;
    std::atomic<bool> owner_inside{false}, leave{false}, got_it{false};
    std::atomic<pid_t> waiter_tid{0};
    std::thread owner([&] {
        for (int i = 0; i < clpool::BiasedSpinMutex::bias_after; ++i) {
            std::lock_guard g(m);
        }
        std::lock_guard g(m);  // biased: the section stays open until told
        owner_inside = true;
        while (!leave.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!owner_inside.load()) std::this_thread::yield();
    REQUIRE(m.is_biased());
    std::thread waiter([&] {
        waiter_tid = gettid();
        std::lock_guard g(m);
        got_it = true;
    });
    while (waiter_tid.load() == 0) std::this_thread::yield();
    int asleep_in_a_row = 0;  // seen asleep twice in a row, a millisecond apart
    for (int i = 0; i < 20000 && asleep_in_a_row < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        asleep_in_a_row = clpool::test::thread_state(waiter_tid) == 'S' ? asleep_in_a_row + 1 : 0;
    }
    CHECK(asleep_in_a_row == 2);
    CHECK_FALSE(got_it.load());  // the owner is still inside
    leave = true;
    owner.join();
    waiter.join();
    CHECK(got_it.load());
    CHECK_FALSE(m.is_biased());
}
#endif

#if defined(__GLIBC__)
#if !CLPOOL_TEST_TSAN  // TSan does not support threads in a multithreaded process's fork child
TEST_CASE("BiasedSpinMutex: in a fork child, a new thread on the owner's thread pointer stays out of its section") {
    // glibc gives the child's new threads the stacks, and so the thread
    // pointers, of the parent's threads that the child does not have. A lock
    // the owner held biased at the fork must stay held in the child, as any
    // mutex held at a fork does: a thread on the owner's pointer must not
    // enter the section the owner left half done.
    clpool::BiasedSpinMutex m;
    std::atomic<bool> inside{false}, leave{false};
    std::atomic<const void*> owner_pointer{nullptr};
    std::thread owner([&] {
        owner_pointer = __builtin_thread_pointer();
        for (int i = 0; i < clpool::BiasedSpinMutex::bias_after; ++i) {
            std::lock_guard g(m);
        }
        std::lock_guard g(m);  // biased, and held across the fork
        inside = true;
        while (!leave.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!inside.load()) std::this_thread::yield();
    REQUIRE(m.is_biased());
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(5);
        // Threads that stay alive, so that each takes a stack of its own,
        // until one runs on the owner's; that one tries the lock.
        std::atomic<bool> reused{false}, entered{false};
        for (int i = 0; i < 256 && !reused.load(); ++i) {
            std::atomic<bool> started{false};
            std::thread([&] {
                const bool mine = __builtin_thread_pointer() == owner_pointer.load();
                if (mine) reused = true;
                started = true;
                if (!mine) {
                    pause();  // keeps its stack
                    return;
                }
                m.lock();
                entered = true;
            }).detach();
            while (!started.load()) std::this_thread::yield();
        }
        if (!reused.load()) _exit(2);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        _exit(entered.load() ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    leave = true;
    owner.join();
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 2);  // no new thread got the owner's pointer: nothing was tested
    CHECK(WEXITSTATUS(status) == 0);  // 1: it entered the section the owner held
}
#endif
#endif

#if defined(__linux__)
namespace held_up {

// The thread counting toward a bias (x), held up inside lock() by a signal
// while another thread (y) takes the same mutex bias_after times, so that
// the bias is y's, and stays inside.
// y_inside: the mutex y is inside of.
std::atomic<clpool::BiasedSpinMutex*> current{nullptr}, request{nullptr}, in_round{nullptr}, y_inside{nullptr};

void hold_up(int) {
    clpool::BiasedSpinMutex* m = current.load();
    if (!m) return;
    in_round = m;
    request = m;
    // At most 300 us: x may hold the mutex here, and then y waits for it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
    while (y_inside.load() != m && std::chrono::steady_clock::now() < until) {}
}

}  // namespace held_up

TEST_CASE("BiasedSpinMutex: a thread held up in lock() while another gains the bias does not enter with it") {
    // x takes each of many fresh mutexes bias_after - 16 times (never its
    // bias). Signals stop it at random points of lock(); in the handler y
    // takes x's current mutex until biased and stays inside a while. x,
    // stopped after it read itself as the counting thread, must not then
    // take y's bias as its own.
    using held_up::current, held_up::request, held_up::in_round, held_up::y_inside;
    constexpr std::size_t count = std::size_t{1} << 16;
    std::unique_ptr<clpool::BiasedSpinMutex[]> ms(new clpool::BiasedSpinMutex[count]);
    struct sigaction action{}, old{};
    action.sa_handler = &held_up::hold_up;
    sigemptyset(&action.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &action, &old) == 0);
    std::atomic<bool> stop{false};
    std::atomic<clpool::BiasedSpinMutex*> x_inside{nullptr};
    std::atomic<long> overlaps{0}, y_biased{0}, signals{0};
    std::atomic<pthread_t> x_handle{};
    std::thread y([&] {
        while (!stop.load()) {
            clpool::BiasedSpinMutex* m = request.exchange(nullptr);
            if (!m) {
                std::this_thread::yield();
                continue;
            }
            for (int i = 0; i < clpool::BiasedSpinMutex::bias_after; ++i) {
                std::lock_guard g(*m);
            }
            std::lock_guard g(*m);
            y_biased += m->is_biased();
            y_inside = m;
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(150);
            while (std::chrono::steady_clock::now() < until)
                if (x_inside.load() == m) ++overlaps;
            y_inside = nullptr;
            in_round = nullptr;
        }
    });
    std::atomic<bool> x_started{false};
    std::thread x([&] {
        x_handle = pthread_self();
        x_started = true;
        for (std::size_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
            clpool::BiasedSpinMutex* m = &ms[n % count];
            while (in_round.load() == m) std::this_thread::yield();
            std::destroy_at(m);  // a fresh mutex each time round
            std::construct_at(m);
            current = m;
            for (int i = 0; i < clpool::BiasedSpinMutex::bias_after - 16; ++i) {
                std::lock_guard g(*m);
                x_inside = m;
                if (y_inside.load() == m) ++overlaps;
                x_inside = nullptr;
            }
        }
        current = nullptr;
    });
    while (!x_started.load()) std::this_thread::yield();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (signals.load() < 6000 && std::chrono::steady_clock::now() < until) {
        pthread_kill(x_handle.load(), SIGUSR1);
        ++signals;
        std::this_thread::sleep_for(std::chrono::microseconds(400));
    }
    stop = true;
    x.join();
    y.join();
    sigaction(SIGUSR1, &old, nullptr);
    MESSAGE("signals " << signals.load() << ", y biased " << y_biased.load() << ", overlaps " << overlaps.load());
    CHECK(y_biased.load() > 0);  // the handler's rounds ran
    CHECK(overlaps.load() == 0);
}
#endif
