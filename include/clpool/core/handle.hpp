// Handle: the move-only RAII owner of one pooled buffer.
#pragma once

#include <cstddef>
#include <utility>

namespace clpool {

// Returned by Pool::allocate. Owns one buffer until release() or destruction,
// which hand it back to the pool that made it (or free it if that pool is gone).
// Move-only: a copy could hand one buffer to two owners.
// Not thread-safe itself; distinct handles may be used from any threads.
template <class Pool>
class Handle {
public:
    using memory_type = typename Pool::memory_type;

    Handle() noexcept = default;
    Handle(Handle&& other) noexcept
        : block_(std::exchange(other.block_, nullptr)), nbytes_(std::exchange(other.nbytes_, 0)) {}
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            release();
            block_ = std::exchange(other.block_, nullptr);
            nbytes_ = std::exchange(other.nbytes_, 0);
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { release(); }

    // The pooled memory (a cl::Buffer for the OpenCL backend). Valid while the
    // handle holds it; the buffer's size is bucket_size(), of which the first
    // nbytes() are the caller's.
    const memory_type& buffer() const noexcept { return block_->memory; }
    // The size that was asked for.
    std::size_t nbytes() const noexcept { return nbytes_; }
    // The size of the buffer actually held (>= nbytes()).
    std::size_t bucket_size() const noexcept { return block_ ? block_->bucket_bytes : 0; }
    explicit operator bool() const noexcept { return block_ != nullptr; }

    // Hands the buffer back now. Idempotent; never throws.
    void release() noexcept {
        if (block_) Pool::recycle(std::exchange(block_, nullptr), nbytes_, nullptr, 0);
        nbytes_ = 0;
    }

    // Hands the buffer back, to be reused only once every event has completed
    // (commands enqueued before the release that still use the buffer).
    // Never throws; if the events cannot be recorded it waits for them first.
    void release_after(const typename Pool::event_type* events, std::size_t count) noexcept {
        if (block_) Pool::recycle(std::exchange(block_, nullptr), nbytes_, events, count);
        nbytes_ = 0;
    }

    // Names the holder in snapshots (Pool::snapshot, the out-of-memory
    // report) until the buffer is handed back. `tag` must outlive the pool: a
    // string literal or other static string. Not copied: a snapshot shows an
    // idle buffer's last tag, and the history keeps the tags of releases and
    // evictions, after the buffer itself has gone back to the driver.
    void set_tag(const char* tag) noexcept {
        if (block_) block_->set_tag(tag);
    }
    const char* tag() const noexcept { return block_ ? block_->current_tag() : nullptr; }

    // The pool that made this handle; nullptr for an empty handle or one whose
    // pool has been destroyed.
    Pool* pool() const noexcept { return block_ ? Pool::owner_of(block_) : nullptr; }

private:
    friend Pool;
    using block_type = typename Pool::block_type;
    Handle(block_type* b, std::size_t n) noexcept : block_(b), nbytes_(n) {}

    block_type* block_ = nullptr;
    std::size_t nbytes_ = 0;
};

}  // namespace clpool
