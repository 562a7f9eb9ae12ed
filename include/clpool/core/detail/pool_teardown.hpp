// pool_teardown: how a handle's release and its pool's destructor agree on who owns a block in use.
#pragma once

#include <clpool/platform/asymmetric_fence.hpp>
#include <clpool/platform/nap.hpp>
#include <clpool/platform/fork_locks.hpp>

#include <cstddef>
#include <cstdint>

#if __has_include(<pthread.h>)
#include <pthread.h>
#else
#include <mutex>
#endif

namespace clpool::detail {

// A release and ~Pool race for a block in use. The release
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
        if (!asymmetric_fence::heavy()) nap_us(10000);  // no barrier could be had (never seen): let marks land
    }

    // The release's side: marks b `releasing` and returns its pool's address,
    // or 0 if ~Pool orphaned it. A plain store, a compiler barrier and a load
    // of the same cache line, not a read-modify-write: ~Pool pays for the rest.
    template <class Block>
    [[gnu::always_inline]] static std::uintptr_t claim(Block& b) noexcept {
        const std::uintptr_t word = b.owner.load(std::memory_order_acquire);
        if (word == 0) return 0;
        b.owner.store(word | Block::releasing, std::memory_order_relaxed);
        asymmetric_fence::light();
        if (b.pool_going.load(std::memory_order_relaxed)) [[unlikely]] {
            if (!kept(b)) return 0;
        }
        return word;
    }

    // A sleeping lock (a release waits here only while ~Pool decides):
    // pthread's where there is one, so that the core does not read <mutex>.
#if __has_include(<pthread.h>)
    class lock_type {
    public:
        void lock() noexcept { pthread_mutex_lock(&m_); }
        void unlock() noexcept { pthread_mutex_unlock(&m_); }

    private:
        pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
    };
#else
    using lock_type = std::mutex;
#endif

    // A release that found its block orphaned (its handle outlived its
    // pool): the release frees the buffer itself.
    template <class Traits, class Block>
    [[gnu::cold, gnu::noinline]] static void free_orphan(Block* b, const typename Traits::event_type* events,
                                                         std::size_t count) noexcept {
        if constexpr (Traits::free_waits_for_events) Traits::wait_for(events, count);
        delete b;
    }

    // ~Pool decides under it; a release that saw pool_going asks under it.
    static lock_type& mutex() noexcept { return state().mutex; }

    // The release's slow path: false if ~Pool orphaned the block (the release
    // frees it and must not enter the pool).
    template <class Block>
    [[gnu::cold, gnu::noinline]] static bool kept(const Block& b) noexcept {
        mutex().lock();
        const bool kept = !b.orphaned;
        mutex().unlock();
        return kept;
    }

    // A short sleep while ~Pool waits for a release under way (not a yield:
    // a waiter of higher priority must let the thread it waits for run on its core).
    static void nap() noexcept { nap_us(50); }

    // With the first pool: the fence's registration and the fork hooks come
    // before any release can need them.
    static void prepare() noexcept {
        state();
        asymmetric_fence::cheap();
    }

private:
    struct shared {
        lock_type mutex;
        shared() noexcept { fork_locks::add_mutex(fork_rank::pool_teardown, mutex); }
    };
    static shared& state() noexcept {
        static shared* s = new shared();  // never destroyed: pools may die in static destructors
        return *s;
    }
};

}  // namespace clpool::detail
