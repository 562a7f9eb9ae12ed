// hot_path: CLPOOL_HOT_INLINE, for the few small functions of the hit pair.
#pragma once

// The hit pair (allocate + release of a cached buffer) is a few dozen
// instructions spread over small functions in several headers. GCC stops
// inlining some of them once the pool's functions grow (the recording paths,
// the teardown handshake), and each call it leaves costs a call, a return and
// register spills: about a quarter of the pair's instructions (docs/BENCHMARKS.md,
// "What the hit pair is made of"). Functions on that path say so with this.
#if defined(__GNUC__) || defined(__clang__)
#define CLPOOL_HOT_INLINE [[gnu::always_inline]] inline
#else
#define CLPOOL_HOT_INLINE inline
#endif
