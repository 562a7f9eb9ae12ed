// guard: scoped locking of one lock or of every lock stripe, for any BasicLockable, without <mutex>.
#pragma once

#include <cstddef>

namespace clpool::detail {

// Holds m locked for its scope (std::lock_guard's job, without <mutex>, whose
// <chrono> every user of the core would compile).
template <class M>
class guard {
public:
    explicit guard(M& m) noexcept : m_(m) { m_.lock(); }
    ~guard() { m_.unlock(); }
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;

private:
    M& m_;
};

// N locks, taken in index order and let go in reverse: the one order every
// path that holds more than one stripe takes them in.
template <class M, std::size_t N>
class guard_all {
public:
    template <class Get>
    explicit guard_all(const Get& get) noexcept {
        for (std::size_t i = 0; i < N; ++i) {
            locks_[i] = &get(i);
            locks_[i]->lock();
        }
    }
    ~guard_all() {
        for (std::size_t i = N; i-- > 0;) locks_[i]->unlock();
    }
    guard_all(const guard_all&) = delete;
    guard_all& operator=(const guard_all&) = delete;

private:
    M* locks_[N];
};

}  // namespace clpool::detail
