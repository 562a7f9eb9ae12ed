// pool_counters: a lock stripe's statistics and its buckets' figures, changed only through on_* events.
#pragma once

#include <cstddef>
#include <cstdint>

namespace clpool::detail {

// One bucket's figures; guarded by the bucket's stripe. cached and in_use come
// first: a hit moves both, as one 16-byte pair, which at a 16-byte aligned
// offset never straddles two cache lines.
struct bucket_counts {
    std::size_t cached = 0, in_use = 0, pending = 0;
    std::uint64_t hits = 0, misses = 0, evictions = 0;
};

// One lock stripe's statistics (what stats() sums), guarded by its lock. Each
// change of a buffer's state is one event, applied to the stripe and to the
// buffer's bucket together, so the two never disagree.
//
// bytes_in_use and bytes_requested are neighbours and every event moves them
// together, in that order: the compiler then writes them as one 16-byte pair
// on a hit and reads them as one on the release, and the store forwards to
// the load (two 8-byte stores read back as one 16-byte load stall the hit pair).
struct stripe_counters {
    std::uint64_t hits = 0, misses = 0, evictions = 0, driver_frees = 0, oom_retries = 0, failed = 0;
    std::size_t bytes_cached = 0, bytes_pending = 0, bytes_in_use = 0, bytes_requested = 0, peak_in_use = 0;
    // Hits a front served from its own cache, folded in: apart from `hits`,
    // because hits + misses is the stripe's logical hand-out clock
    // (block::handout_seq), which a front's hand-outs do not move.
    std::uint64_t front_hits = 0;

    // A cached buffer handed to a caller who asked for nbytes.
    void on_hit(bucket_counts& b, std::size_t bytes, std::size_t nbytes) noexcept {
        ++hits;
        ++b.hits;
        --b.cached;
        ++b.in_use;
        bytes_cached -= bytes;
        add_in_use(bytes, nbytes);
    }
    void on_miss(bucket_counts& b) noexcept {
        ++misses;
        ++b.misses;
    }
    // A new buffer from the driver, handed to a caller who asked for nbytes.
    void on_create(bucket_counts& b, std::size_t bytes, std::size_t nbytes) noexcept {
        ++b.in_use;
        add_in_use(bytes, nbytes);
    }
    // Cached to in use with no request of its own: lent to a front.
    void on_lend(bucket_counts& b, std::size_t bytes) noexcept {
        --b.cached;
        ++b.in_use;
        bytes_cached -= bytes;
        add_in_use(bytes, 0);
    }
    // In use no more; on_cached, on_pending or on_evict says where it went.
    void on_release(bucket_counts& b, std::size_t bytes, std::size_t nbytes) noexcept {
        --b.in_use;
        bytes_in_use -= bytes;
        bytes_requested -= nbytes;
    }
    void on_cached(bucket_counts& b, std::size_t bytes) noexcept {
        ++b.cached;
        bytes_cached += bytes;
    }
    void on_pending(bucket_counts& b, std::size_t bytes) noexcept {
        ++b.pending;
        bytes_pending += bytes;
    }
    // Its events completed: pending to cached.
    void on_reaped(bucket_counts& b, std::size_t bytes) noexcept {
        --b.pending;
        bytes_pending -= bytes;
        on_cached(b, bytes);
    }
    // A released buffer the caps refused, given back to the driver.
    void on_evict(bucket_counts& b) noexcept {
        ++evictions;
        ++b.evictions;
        ++driver_frees;
    }
    // A released exact-size block given back to a sub-allocating backend
    // (no cap refused it: not an eviction).
    void on_return(bucket_counts&) noexcept { ++driver_frees; }
    // Every cached and pending buffer of the bucket given back to the driver
    // (their bytes leave with drop_idle_bytes, once per stripe).
    void on_trim(bucket_counts& b) noexcept {
        driver_frees += b.cached + b.pending;
        b.cached = 0;
        b.pending = 0;
    }
    // The bucket's cached buffers only given back (its pending ones stay).
    void on_trim_cached(bucket_counts& b) noexcept {
        driver_frees += b.cached;
        b.cached = 0;
    }
    // The stripe's cached bytes, now zero (its pending bytes stay).
    std::size_t drop_cached_bytes() noexcept {
        const std::size_t idle = bytes_cached;
        bytes_cached = 0;
        return idle;
    }
    // The stripe's cached and pending bytes, now zero.
    std::size_t drop_idle_bytes() noexcept {
        const std::size_t idle = bytes_cached + bytes_pending;
        bytes_cached = 0;
        bytes_pending = 0;
        return idle;
    }
    // Hits a front served from its own cache, folded in.
    void on_front_hits(bucket_counts& b, std::uint64_t n) noexcept {
        front_hits += n;
        b.hits += n;
    }
    void on_oom_retry() noexcept { ++oom_retries; }
    void on_failure() noexcept { ++failed; }

private:
    void add_in_use(std::size_t bytes, std::size_t nbytes) noexcept {
        bytes_in_use += bytes;
        bytes_requested += nbytes;
        if (bytes_in_use > peak_in_use) peak_in_use = bytes_in_use;
    }
};

}  // namespace clpool::detail
