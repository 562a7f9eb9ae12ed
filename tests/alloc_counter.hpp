// Counting heap allocations made by this thread inside a scope (the replaced
// global operator new lives in test_no_heap_on_hit.cpp; include this header
// in any test that needs it, never define operator new a second time).
#pragma once

#include <cstddef>

namespace clpool::test {

// Heap allocations (operator new) made by the calling thread while a
// CountAllocations is alive on it.
std::size_t& thread_allocations() noexcept;
bool& thread_counting() noexcept;

class CountAllocations {
public:
    CountAllocations() noexcept {
        thread_allocations() = 0;
        thread_counting() = true;
    }
    ~CountAllocations() { thread_counting() = false; }
    std::size_t count() const noexcept { return thread_allocations(); }
};

}  // namespace clpool::test
