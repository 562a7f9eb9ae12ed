// ThreadCached: a lock policy that puts a per-thread magazine of idle buffers in front of the shared lists.
#pragma once

#include <clpool/policies/locks.hpp>
#include <clpool/policies/detail/magazines.hpp>

#include <cstddef>
#include <type_traits>

namespace clpool {

// Each thread that uses the pool gets, per bucket, a magazine of up to K idle
// buffers. A hit pops from the calling thread's magazine and a release pushes
// to it, under a lock only that thread takes on the hot path, so threads do
// not share cache lines; magazines refill and drain K/2 buffers at a time
// from the shared lists, which `Shared` guards (SingleMutex or Striped<N>).
//
// What it costs (docs/POLICIES.md has the whole trade-off):
// - Buffers in one thread's magazine are not seen by another thread's
//   allocation until they drain (at most K per bucket per thread), so a pool
//   may hold up to K idle buffers per bucket per thread beyond what one list
//   would keep.
// - Caps hold: a magazine counts a slot against the limit policy before it may
//   keep a buffer there, and keeps that slot's reservation until it drains.
//   In a capped pool a refused release first takes back every magazine's
//   empty slots, and a miss first looks in other threads' magazines, so the
//   hit rate stays that of one shared list.
// - stats() locks every magazine and is a consistent snapshot; trim() empties
//   every magazine; a thread's magazine goes back to the shared lists when the
//   thread exits, and is freed with the pool when the pool goes first.
// - peak_bytes_in_use is an upper bound: buffers in magazines count as in use
//   for the peak.
// Exact-size buffers (above the largest bucket) and buffers released with
// pending events always use the shared lists.
template <std::size_t K = 8, LockPolicy Shared = SingleMutex>
struct ThreadCached {
    static_assert(K >= 2 && K <= 256, "ThreadCached<K>: K must be between 2 and 256");
    static_assert(!std::is_same_v<typename Shared::mutex_type, NullMutex>,
                  "ThreadCached<K, Shared>: Shared must lock (SingleMutex or Striped<N>); threads share the lists");
    using mutex_type = typename Shared::mutex_type;
    static constexpr std::size_t stripes = Shared::stripes;
    static constexpr std::size_t magazine_size = K;
    using shared_policy = Shared;
    // The pool's front: this thread's magazines (detail/magazines.hpp).
    template <class SharedLists>
    using front = detail::magazines<SharedLists, K>;
};

static_assert(LockPolicy<ThreadCached<>>);

}  // namespace clpool
