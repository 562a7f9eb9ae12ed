// sanitizers: which sanitizer runtime a test is built with (g++ and clang spell it differently).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define CLPOOL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLPOOL_TEST_TSAN 1
#endif
#endif
#ifndef CLPOOL_TEST_TSAN
#define CLPOOL_TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CLPOOL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLPOOL_TEST_ASAN 1
#endif
#endif
#ifndef CLPOOL_TEST_ASAN
#define CLPOOL_TEST_ASAN 0
#endif

// Sanitizer runtimes bring their own operator new: tests that count allocations
// by replacing it (test_no_heap_on_hit.cpp) count nothing there.
#define CLPOOL_TEST_COUNTS_NEW (!CLPOOL_TEST_TSAN && !CLPOOL_TEST_ASAN)
