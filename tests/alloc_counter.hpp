// Counting heap allocations made by this thread inside a scope, failing one
// on demand, or running a hook in one (the replaced
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

// The calling thread's n-th operator new from now throws bad_alloc (0: none).
std::size_t& thread_fail_countdown() noexcept;

// Run once by the calling thread's next operator new, before it allocates:
// a point where that thread is inside whatever allocates (nullptr: none).
struct alloc_hook {
    void (*fn)(void*) = nullptr;
    void* arg = nullptr;
};
alloc_hook& thread_alloc_hook() noexcept;

// While alive, the calling thread's n-th operator new (counting from 1) throws bad_alloc.
class FailNthAllocation {
public:
    explicit FailNthAllocation(std::size_t n) noexcept { thread_fail_countdown() = n; }
    ~FailNthAllocation() { thread_fail_countdown() = 0; }
    FailNthAllocation(const FailNthAllocation&) = delete;
    FailNthAllocation& operator=(const FailNthAllocation&) = delete;
};

}  // namespace clpool::test
