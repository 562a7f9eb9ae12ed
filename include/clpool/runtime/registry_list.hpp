// The list of process-wide pool registries that shutdown() and release_pools() walk, without naming them.
#pragma once

#include <clpool/platform/process_state.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace clpool::detail {

// One registry type (context_registry<P>, host_pool_slot<P>): a static node
// of that type, constant-initialised, never destroyed. Its functions reach
// the registry of the current fork generation only (none made yet: they do
// nothing), so a fork child's walk never touches a parent's pools.
struct registry_node {
    // Gives the cache of every pool of this registry back; the bytes given
    // back. Never throws.
    std::size_t (*trim)() noexcept;
    // Destroys the pools of one cl_context (passed as void*, so this list
    // needs no OpenCL); whether one existed. nullptr where the registry is not
    // per context. May throw what destroying a pool throws.
    bool (*drop)(void* context);

    constexpr registry_node(std::size_t (*trim_fn)() noexcept, bool (*drop_fn)(void*)) noexcept
        : trim(trim_fn), drop(drop_fn) {}
    registry_node(const registry_node&) = delete;
    registry_node& operator=(const registry_node&) = delete;

    // Written once, before the node is published; nodes are never unlinked.
    registry_node* next = nullptr;
    // 0: not enrolled; 1: linked; (generation << 2) | 2: being linked by a
    // thread of that fork generation (see enroll_registry).
    std::atomic<std::uint64_t> state{0};
};

// The head of the list: a trivially destructible global, nothing runs at exit.
inline std::atomic<registry_node*> registry_head{nullptr};

// Adds the node once per process lifetime (a fork child inherits the list
// and the node's `linked` mark). Lock-free, never allocates, never throws.
// Called by a registry when it makes its first instance in a generation.
inline void enroll_registry(registry_node& node) noexcept {
    constexpr std::uint64_t linked = 1;
    const std::uint64_t mine = (std::uint64_t{fork_generation()} << 2) | 2;
    std::uint64_t s = node.state.load(std::memory_order_acquire);
    for (;;) {
        if (s == linked || s == mine) return;  // done, or another thread of this process is linking it
        // Free, or claimed by a thread of a fork parent that never finished
        // (only the forking thread lives on in a child): take it over.
        if (node.state.compare_exchange_weak(s, mine, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    // This thread owns the node's link now. A parent's interrupted enrolment
    // may have linked it already; the list only grows at the head, so a walk
    // from the current head finds it.
    registry_node* head = registry_head.load(std::memory_order_acquire);
    for (const registry_node* n = head; n; n = n->next) {
        if (n == &node) {
            node.state.store(linked, std::memory_order_release);
            return;
        }
    }
    do {
        node.next = head;
    } while (!registry_head.compare_exchange_weak(head, &node, std::memory_order_release, std::memory_order_acquire));
    node.state.store(linked, std::memory_order_release);
}

// shutdown(): every registry of this generation gives its cache back. The
// bytes given back. Never throws.
inline std::size_t trim_registries() noexcept {
    std::size_t freed = 0;
    for (registry_node* n = registry_head.load(std::memory_order_acquire); n; n = n->next) freed += n->trim();
    return freed;
}

// release_pools(): every per-context registry of this generation drops the
// pools of `context` (a cl_context). Throws what a drop throws.
inline void drop_registries(void* context) {
    for (registry_node* n = registry_head.load(std::memory_order_acquire); n; n = n->next)
        if (n->drop) n->drop(context);
}

}  // namespace clpool::detail
