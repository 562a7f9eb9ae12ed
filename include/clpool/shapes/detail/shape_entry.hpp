// shape_entry: one interned shape (refcount, owner, device attachments, then the canonical words).
#pragma once

#include <clpool/shapes/detail/epoch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace clpool::detail {

// Something kept alongside a shape for as long as the shape lives (the device
// mirror's pooled buffer). Entries own a singly linked list of these, pushed
// with a CAS and destroyed with the entry; `key` tells their makers apart.
struct shape_attachment {
    virtual ~shape_attachment() = default;
    shape_attachment* next = nullptr;
    std::uint64_t key = 0;
};

// A process-wide unique key for a maker of attachments (never 0).
inline std::uint64_t next_attachment_key() noexcept {
    static std::atomic<std::uint64_t> n{0};
    return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

// One block per interned shape: this header, then `words` int64 values (the
// canonical buffer, docs/SHAPES.md has the layout). The block is immutable
// after construction except for refs, owner, the attachment list and the
// writers' tombstone flag. Readers reach it without locks, so it is never
// deleted directly once published: it is retired (epoch_retired) and freed,
// attachments and all, when no reader can hold it.
struct shape_entry : epoch_retired {
    // Handles sharing this entry. A lookup takes a reference only while the
    // count is above zero (a CAS); the release that takes it to zero owns
    // the entry and calls on_last_release.
    std::atomic<std::size_t> refs{1};
    // Called by the release that took refs to zero: unlinks (if the owner is
    // still alive) and destroys. Set by the owner; never throws.
    void (*on_last_release)(shape_entry*) noexcept = nullptr;
    // The stripes of the trie that holds this entry; nullptr once that trie
    // is destroyed, or once a new entry replaced this dying one (the entry is
    // then only retired by its last release). Cleared under the stripe's lock.
    std::atomic<void*> owner{nullptr};
    std::atomic<shape_attachment*> attachments{nullptr};
    std::uint32_t words = 0;   // length of the canonical buffer
    std::uint32_t stripe = 0;  // the owner's stripe holding this entry
    // Set (under the stripe's lock) when its unlink could not allocate the
    // smaller branch node: the dead entry stays linked, found by lookups but
    // never revived, until an intern of the same shape replaces and retires it.
    bool tombstone = false;
    // The strides are the dense ones for the order (set before publication):
    // a dense lookup then needs to compare only extents, type and order.
    bool dense = false;

    std::int64_t* data() noexcept { return reinterpret_cast<std::int64_t*>(this + 1); }
    const std::int64_t* data() const noexcept { return reinterpret_cast<const std::int64_t*>(this + 1); }

    // One allocation for header and words. Throws std::bad_alloc.
    static shape_entry* create(std::uint32_t words, void* owner, std::uint32_t stripe,
                               void (*on_last)(shape_entry*) noexcept) {
        void* p = ::operator new(sizeof(shape_entry) + std::size_t{words} * sizeof(std::int64_t));
        auto* e = new (p) shape_entry;
        e->words = words;
        e->stripe = stripe;
        e->owner.store(owner, std::memory_order_relaxed);
        e->on_last_release = on_last;
        live_count().fetch_add(1, std::memory_order_relaxed);
        return e;
    }

    // Destroys the attachments (a mirror's buffer goes back to its pool), then the block.
    static void destroy(shape_entry* e) noexcept {
        for (auto* a = e->attachments.load(std::memory_order_acquire); a;) {
            auto* next = a->next;
            delete a;
            a = next;
        }
        e->~shape_entry();
        ::operator delete(static_cast<void*>(e));
        live_count().fetch_sub(1, std::memory_order_relaxed);
    }
    static void destroy_retired(epoch_retired* p) noexcept { destroy(static_cast<shape_entry*>(p)); }

    // Entries allocated and not yet freed, in every trie of the process
    // (retired ones included until reclaimed; tests check it returns to zero).
    static std::atomic<std::int64_t>& live_count() noexcept {
        static constinit std::atomic<std::int64_t> n{0};
        return n;
    }
};

static_assert(sizeof(shape_entry) % alignof(std::int64_t) == 0, "the words must follow the header aligned");

}  // namespace clpool::detail
