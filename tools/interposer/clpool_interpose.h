/* The interposer's C query: counters a test or tool reads through dlsym (libclpool_interpose.so). */
#ifndef CLPOOL_INTERPOSE_H
#define CLPOOL_INTERPOSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A snapshot over every pool the interposer has had (open and closed ones). */
typedef struct clpool_interpose_counters {
    uint64_t hits;              /* pooled creations served from a cached buffer */
    uint64_t misses;            /* pooled creations that asked the driver */
    uint64_t evictions;         /* released buffers the cache caps sent back to the driver */
    uint64_t passthrough;       /* clCreateBuffer calls handed to the driver unpooled */
    uint64_t fallbacks;         /* poolable calls the pool could not serve (then passed through) */
    uint64_t sub_buffers;       /* application sub-buffers of pooled buffers */
    uint64_t oom_retries;       /* driver allocation failures answered by giving a context's cache back */
    uint64_t contexts_open;     /* contexts the application still holds */
    uint64_t pools_open;        /* (context, flags) pools alive */
    uint64_t live_buffers;      /* pooled buffers the application holds */
    uint64_t bytes_cached;      /* idle bytes ready for reuse */
    uint64_t bytes_pending;     /* released bytes waiting for their commands to finish */
    uint64_t bytes_held;        /* bytes held from the driver by the open pools */
} clpool_interpose_counters;

/* Fills *out; returns 0. Thread-safe; makes no OpenCL call. */
int clpool_interpose_get_counters(clpool_interpose_counters* out);
typedef int (*clpool_interpose_get_counters_fn)(clpool_interpose_counters* out);

/* Shared virtual memory: clSVMAlloc, clSVMFree and clEnqueueSVMFree (open and closed pools). */
typedef struct clpool_interpose_svm_counters {
    uint64_t pooled;        /* clSVMAlloc calls served by a pool */
    uint64_t passthrough;   /* clSVMAlloc calls the driver served: fine-grained, large alignment, size 0, ... */
    uint64_t fallbacks;     /* poolable clSVMAlloc calls the pool could not serve (then passed through) */
    uint64_t driver_frees;  /* pointers freed by the driver: not the interposer's (clSVMFree, clEnqueueSVMFree) */
    uint64_t hits;          /* pooled allocations served from a cached one */
    uint64_t misses;        /* pooled allocations that asked the driver */
    uint64_t live;          /* pooled SVM pointers the application holds */
    uint64_t bytes_held;    /* bytes held from the driver by the open SVM pools */
    uint64_t bytes_cached;  /* idle bytes ready for reuse */
    uint64_t bytes_pending; /* freed bytes waiting for their clEnqueueSVMFree to run */
} clpool_interpose_svm_counters;

/* Fills *out; returns 0 (1 out of host memory). Thread-safe; makes no OpenCL call. */
int clpool_interpose_get_svm_counters(clpool_interpose_svm_counters* out);
typedef int (*clpool_interpose_get_svm_counters_fn)(clpool_interpose_svm_counters* out);

#ifdef __cplusplus
}
#endif

#endif
