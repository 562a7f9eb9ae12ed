// pool_teardown: how a handle's release and its pool's destructor agree on who owns a block in use.
#pragma once

#include <clpool/platform/asymmetric_fence.hpp>
#include <clpool/platform/fork_locks.hpp>

#include <mutex>

#if defined(__unix__)
#include <time.h>
#else
#include <chrono>
#include <thread>
#endif

namespace clpool::detail {

// A release and ~Pool race for a block in use (issue 14, item 4). The release
// (Pool::claim) reads the block's owner, marks it `releasing` with a plain
// store, then reads the block's `pool_going` flag. ~Pool
// (shared_lists::close) first sets `pool_going` on every block in use, then
// calls barrier(), then, under mutex(), orphans each unmarked block and waits
// for the marked ones. An atomic read-modify-write on the mark would settle
// the race on every release and costs as much as the rest of a hit pair;
// this costs the release a compiler barrier (asymmetric_fence::light()) and a
// load from the block's own cache line, and puts the fence on ~Pool's side.
//
// Either ~Pool's scan sees the release's mark (and waits for it), or the
// release sees `pool_going` and asks kept() under the mutex ~Pool decides
// under: a block orphaned before the mark landed (the mark's plain store may
// even overwrite the orphan's 0) is the release's to free, and the release
// never enters the pool.
struct pool_teardown {
    // ~Pool, between setting pool_going and scanning the marks.
    static void barrier() noexcept {
        if (!asymmetric_fence::heavy()) nap_ms(10);  // no barrier could be had (never seen): let marks land
    }

    // ~Pool decides under it; a release that saw pool_going asks under it.
    static std::mutex& mutex() noexcept { return state().mutex; }

    // The release's slow path: false if ~Pool orphaned the block (the release
    // frees it and must not enter the pool).
    template <class Block>
    [[gnu::cold, gnu::noinline]] static bool kept(const Block& b) noexcept {
        std::lock_guard lock(mutex());
        return !b.orphaned;
    }

    // With the first pool: the fence's registration and the fork hooks come
    // before any release can need them.
    static void prepare() noexcept {
        state();
        asymmetric_fence::cheap();
    }

private:
    struct shared {
        std::mutex mutex;
        shared() noexcept { fork_locks::add_mutex(fork_rank::pool_teardown, mutex); }
    };
    static shared& state() noexcept {
        static shared* s = new shared();  // never destroyed: pools may die in static destructors
        return *s;
    }
    static void nap_ms(long ms) noexcept {
#if defined(__unix__)
        const timespec t{0, ms * 1000000L};
        nanosleep(&t, nullptr);
#else
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
#endif
    }
};

}  // namespace clpool::detail
