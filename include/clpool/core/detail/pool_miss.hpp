// pool_miss: a pool's miss, a new buffer from its backend, with the out-of-memory retry and the failure it reports.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/core/errors.hpp>
#include <clpool/core/steady_clock.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace clpool::detail {

// Pool's miss path (the pool is a friend). Apart from the hit path so that
// each reads as one job.
struct pool_miss {
    // A new block, in use for nbytes: the node first, then the backend's
    // memory; on out-of-memory the cache goes back and the backend is asked
    // once more. Throws as Pool::allocate documents.
    template <class Pool>
    static typename Pool::block_type* create(Pool& p, std::size_t index, std::size_t bytes, std::size_t nbytes,
                                             const typename Pool::site_type* where) {
        // The node first: if the host is out of memory, no driver call is
        // made, and the miss is a failed allocation (misses == kept driver
        // allocations + failed allocations).
        typename Pool::block_type* b = nullptr;
        try {
            b = new typename Pool::block_type();
        } catch (...) {
            p.lists_.on_failure(index);
            throw;
        }
        std::size_t given_back = 0;  // a sub-allocating pool's obtain() gives the cache back first
        auto result = obtain(p, bytes, given_back);
        if (result.status == AllocStatus::out_of_memory) {
            // The cache may be what is crowding the device: give it back, try once more.
            given_back += p.trim_from(where);
            p.lists_.on_oom_retry(index);
            result = obtain(p, bytes, given_back);
        }
        if (result.status != AllocStatus::ok) {
            delete b;
            fail(p, index, nbytes, bytes, given_back, result, where);
        }
        b->memory = std::move(result.memory);
        b->bucket_bytes = bytes;
        b->bucket = static_cast<std::uint32_t>(index);
        b->owner.store(reinterpret_cast<std::uintptr_t>(&p), std::memory_order_relaxed);  // adopt() publishes it
        b->generation = p.generation_;
        b->made_ns = steady_coarse_ns();
        p.lists_.adopt(*b, nbytes, where);
        return b;
    }

private:
    // A buffer from the backend. A sub-allocating one carves from its
    // segments; only when nothing fits there, even after the cache went back
    // to it (where it coalesces), may it grow by a driver allocation. The
    // bytes of cache given back are added to `given_back` (the out-of-memory
    // report's "given back before the retry").
    template <class Pool>
    static auto obtain(Pool& p, std::size_t bytes, std::size_t& given_back) noexcept {
        if constexpr (backend_traits<typename Pool::backend_type>::sub_allocates) {
            auto held = p.backend_.allocate_held(bytes, p.kind_);
            if (held.status == AllocStatus::ok) return held;
            given_back += p.template give_cache_back<false>();  // never waits on a pending buffer's events
            held = p.backend_.allocate_held(bytes, p.kind_);
            if (held.status == AllocStatus::ok) return held;
        } else {
            (void)given_back;
        }
        return p.backend_.allocate(bytes, p.kind_);
    }

    // A miss that failed for good: counted, then thrown (out_of_memory with
    // the diagnostics' report, if any). Out of line and cold, so that
    // allocate(), with create() inlined, stays as small as it is.
    template <class Pool, class Result>
    [[noreturn, gnu::cold, gnu::noinline]] static void fail(Pool& p, std::size_t index, std::size_t nbytes,
                                                            std::size_t bytes, std::size_t given_back,
                                                            const Result& result,
                                                            const typename Pool::site_type* where) {
        const std::size_t held = p.lists_.on_failure(index);
        if (result.status != AllocStatus::out_of_memory)
            throw driver_error(std::string(p.backend_.name()) + " allocation of " + std::to_string(bytes) + " bytes",
                               result.native_code);
        std::string details;
        if constexpr (Pool::diagnostics::enabled) {
            p.lists_.note_oom(index, nbytes, where);
            details = Pool::diagnostics::oom_details(p, nbytes, bytes, given_back, result.native_code);
        } else {
            (void)where, (void)given_back;
        }
        throw out_of_memory(nbytes, held, result.native_code, p.backend_.name(), details);
    }
};

}  // namespace clpool::detail
