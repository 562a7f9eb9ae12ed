// The Backend concept: what a pool needs from the thing that makes memory.
// docs/BACKENDS.md has the requirements as a table.
#pragma once

#include <clpool/core/memory_kind.hpp>

#include <concepts>
#include <cstddef>
#include <string>

namespace clpool {

enum class alloc_status : unsigned char {
    ok,
    out_of_memory,  // the driver is out of memory: the pool gives its cache back and retries once
    failed,         // any other driver failure: reported as driver_error, no retry
};

// What Backend::allocate returns: the memory (empty unless ok) and the
// driver's own code for the outcome (0 on success).
template <class Memory>
struct allocation {
    Memory memory{};
    alloc_status status = alloc_status::failed;
    int native_code = 0;
};

// Optional members a pool uses when present (pool.hpp): `event_type` with
// `static bool event_complete(const event_type&) noexcept` and
// `static void wait_for(const event_type*, std::size_t) noexcept` (release
// with events), `void abandon() noexcept` (fork child), and
// `static constexpr bool free_waits_for_events` (the pool waits for a
// buffer's pending events before freeing it: MappedPinnedBackend).
template <class B>
concept Backend = std::move_constructible<B> &&
    std::movable<typename B::memory_type> && std::default_initializable<typename B::memory_type> &&
    requires(B& b, const B& cb, std::size_t n, memory_kind k) {
        // The largest single allocation the device accepts (CL_DEVICE_MAX_MEM_ALLOC_SIZE).
        { cb.max_alloc_size() } noexcept -> std::same_as<std::size_t>;
        // True where the device shares host memory (integrated GPU, CPU device).
        { cb.unified_memory() } noexcept -> std::same_as<bool>;
        // Makes n committed bytes of kind k; never throws; callable from many threads at once.
        { b.allocate(n, k) } noexcept -> std::same_as<allocation<typename B::memory_type>>;
        // A short name for messages ("opencl", "host").
        { cb.name() } -> std::convertible_to<std::string>;
    };

}  // namespace clpool
