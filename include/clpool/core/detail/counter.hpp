// counter: a byte counter that is a plain integer under one lock, atomic across stripes.
#pragma once

#include <atomic>
#include <cstddef>

namespace clpool::detail {

template <bool Shared>
class counter;

// Guarded by the pool's single lock: plain arithmetic, nothing shared.
template <>
class counter<false> {
public:
    std::size_t add(std::size_t n) noexcept { return value_ += n; }
    void sub(std::size_t n) noexcept { value_ -= n; }
    std::size_t load() const noexcept { return value_; }
    void max(std::size_t v) noexcept {
        if (v > value_) value_ = v;
    }
    // Adds n if admit(value before) says yes.
    template <class Admit>
    bool try_reserve(std::size_t n, Admit admit) noexcept {
        if (!admit(value_)) return false;
        value_ += n;
        return true;
    }

private:
    std::size_t value_ = 0;
};

// Updated under different stripes' locks: atomic. try_reserve adds only what
// its admit() saw room for (a compare-exchange): concurrent releases never
// overshoot a cap, and none is refused for bytes that another's refusal
// would have rolled back.
template <>
class counter<true> {
public:
    std::size_t add(std::size_t n) noexcept { return value_.fetch_add(n, std::memory_order_relaxed) + n; }
    void sub(std::size_t n) noexcept { value_.fetch_sub(n, std::memory_order_relaxed); }
    std::size_t load() const noexcept { return value_.load(std::memory_order_relaxed); }
    void max(std::size_t v) noexcept {
        auto cur = value_.load(std::memory_order_relaxed);
        while (v > cur && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {}
    }
    template <class Admit>
    bool try_reserve(std::size_t n, Admit admit) noexcept {
        auto before = value_.load(std::memory_order_relaxed);
        do {
            if (!admit(before)) return false;
        } while (!value_.compare_exchange_weak(before, before + n, std::memory_order_relaxed));
        return true;
    }

private:
    alignas(64) std::atomic<std::size_t> value_{0};
};

// For pools with no byte cap: counts nothing, admits everything to the policy.
class null_counter {
public:
    void add(std::size_t) noexcept {}
    void sub(std::size_t) noexcept {}
    template <class Admit>
    bool try_reserve(std::size_t, Admit admit) noexcept {
        return admit(0);
    }
};

}  // namespace clpool::detail
