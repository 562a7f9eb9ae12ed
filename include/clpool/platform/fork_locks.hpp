// fork_locks: gives every process-wide host lock a defined state in a fork child (pthread_atfork, in a fixed order).
#pragma once

#include <atomic>
#include <cstddef>

#if __has_include(<pthread.h>)
#include <pthread.h>
#define CLPOOL_HAS_FORK_LOCKS 1
#endif

namespace clpool::detail {

// A fork copies a lock as it is: one held by another parent thread stays held
// in the child for ever, and the data it guards may be half written. So every
// process-wide lock registers here once (when its singleton is made); around
// each fork() the prepare handler takes them all, outermost first, and the
// parent and child handlers hand them back (the child may also reset what
// belonged to threads the child does not have).
//
// The order is the locks' nesting order, outermost first: a thread may take a
// later one while holding an earlier one, never the other way round.
enum class fork_rank : int {
    interposer_snapshot = 3,  // tools/interposer: the snapshot writer's, taken with no other held
    shape_trie = 5,         // shapes: ShapeTrie::global()'s stripe locks (a free under one may reach any lock below)
    interposer_state = 10,  // tools/interposer: held around pool calls
    interposer_trace = 12,  // tools/interposer: the trace file's, leaf (taken with or without the state lock)
    dropin_pools = 20,      // interop: held while it makes a pool
    copy_workers = 30,      // interop: the staging copy workers' job list
    private_queues = 40,    // backends: a backend's enqueue-and-wait on its own queue
    pinned_ranges = 50,     // backends: a map of host ranges, leaf
    pool_teardown = 55,     // core: held while a pool's destructor orphans its blocks (takes stripe locks)
    epoch = 60,             // shapes: the reclaim mutex
    asymmetric_fence = 70,  // platform: the heavy side's mutex, leaf
};

struct fork_hooks {
    void (*prepare)(void*) noexcept = nullptr;  // take the lock
    void (*parent)(void*) noexcept = nullptr;   // give it back
    void (*child)(void*) noexcept = nullptr;    // give it back, reset other threads' state
    void* arg = nullptr;
};

class fork_locks {
public:
    static constexpr std::size_t capacity = 32;

    // Registers hooks for one lock (call once per lock, never undone; the
    // object must live for ever). Returns false when the table is full or
    // pthread_atfork failed: that lock is then left as before (held in the
    // child if a thread held it at the fork). Thread-safe, never throws.
    static bool add(fork_rank rank, fork_hooks h) noexcept {
#ifdef CLPOOL_HAS_FORK_LOCKS
        static const bool installed = pthread_atfork(&prepare, &parent, &child) == 0;
        if (!installed) return false;
        table& t = get();
        const std::size_t i = t.claimed.fetch_add(1, std::memory_order_relaxed);
        if (i >= capacity) return false;
        t.slots[i].hooks = h;
        t.slots[i].rank = static_cast<int>(rank);
        t.slots[i].ready.store(true, std::memory_order_release);  // a fork before this skips the slot
        return true;
#else
        static_cast<void>(rank);
        static_cast<void>(h);
        return false;
#endif
    }

    // A std::mutex-like lock (lock/unlock): taken before the fork, released after in both processes.
    template <class Lock>
    static bool add_mutex(fork_rank rank, Lock& m) noexcept {
        return add(rank, {[](void* p) noexcept { static_cast<Lock*>(p)->lock(); },
                          [](void* p) noexcept { static_cast<Lock*>(p)->unlock(); },
                          [](void* p) noexcept { static_cast<Lock*>(p)->unlock(); }, &m});
    }

    // Locks registered now (for tests).
    static std::size_t registered() noexcept {
        std::size_t n = 0;
        for (const auto& s : get().slots) n += s.ready.load(std::memory_order_acquire) ? 1 : 0;
        return n;
    }

private:
    struct slot {
        fork_hooks hooks;
        int rank = 0;
        std::atomic<bool> ready{false};
    };
    struct table {
        slot slots[capacity];
        std::atomic<std::size_t> claimed{0};
    };
    // A fork in progress: the slots its prepare handler took, in order. Per
    // thread: glibc runs one fork's handlers at a time, but POSIX does not
    // promise it, and a second fork's prepare must not overwrite the list
    // the first one's parent handler is about to walk.
    struct in_progress {
        std::size_t order[capacity];
        std::size_t taken;
    };

    static table& get() noexcept {
        static constinit table t{};  // trivially destructible: nothing runs at exit
        return t;
    }
    static in_progress& mine() noexcept {
        static constinit thread_local in_progress f{};  // the child's thread is the forking thread's copy
        return f;
    }

    // The slots ready now, by rank (stable: registration order within a rank).
    static void prepare() noexcept {
        table& t = get();
        in_progress& f = mine();
        f.taken = 0;
        for (std::size_t i = 0; i < capacity; ++i) {
            if (!t.slots[i].ready.load(std::memory_order_acquire)) continue;
            std::size_t at = f.taken++;
            for (; at > 0 && t.slots[f.order[at - 1]].rank > t.slots[i].rank; --at) f.order[at] = f.order[at - 1];
            f.order[at] = i;
        }
        for (std::size_t k = 0; k < f.taken; ++k) {
            const auto& h = t.slots[f.order[k]].hooks;
            if (h.prepare) h.prepare(h.arg);
        }
    }
    static void parent() noexcept { release(false); }
    static void child() noexcept { release(true); }
    static void release(bool in_child) noexcept {
        const table& t = get();
        in_progress& f = mine();
        for (std::size_t k = f.taken; k-- > 0;) {
            const auto& h = t.slots[f.order[k]].hooks;
            if (auto* give_back = in_child ? h.child : h.parent) give_back(h.arg);
        }
        f.taken = 0;
    }
};

}  // namespace clpool::detail
