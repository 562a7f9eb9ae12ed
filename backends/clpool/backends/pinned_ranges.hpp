// pinned_ranges: the host address ranges clpool has mapped from pinned buffers, for "is this pointer pinned?".
#pragma once

#include <clpool/platform/fork_locks.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace clpool::detail {

// Filled by PinnedAllocator (and anyone who maps a pinned buffer for a long
// time); asked by upload/download to send pinned sources straight to the
// driver. Never destroyed (new-ed singleton). Thread-safe; each call takes one
// mutex and costs O(log ranges).
class pinned_ranges {
public:
    static pinned_ranges& instance() {
        static auto* r = new pinned_ranges;  // intentionally never deleted
        return *r;
    }

    // Throws std::bad_alloc if the entry cannot be stored.
    void add(const void* p, std::size_t n) {
        std::lock_guard lock(mutex_);
        ranges_[addr(p)] = n;
    }
    void remove(const void* p) noexcept {
        std::lock_guard lock(mutex_);
        ranges_.erase(addr(p));
    }
    // True if [p, p+n) lies inside one registered range.
    bool contains(const void* p, std::size_t n) const noexcept {
        const auto a = addr(p);
        std::lock_guard lock(mutex_);
        auto it = ranges_.upper_bound(a);
        if (it == ranges_.begin()) return false;
        it = std::prev(it);
        return a - it->first <= it->second && n <= it->second - (a - it->first);
    }

private:
    static std::uintptr_t addr(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }
    // Taken around fork(): the child never starts with it held or the map half written.
    pinned_ranges() noexcept { fork_locks::add_mutex(fork_rank::pinned_ranges, mutex_); }
    mutable std::mutex mutex_;
    std::map<std::uintptr_t, std::size_t> ranges_;
};

}  // namespace clpool::detail
