/* What the interposer's C test programs share: CHECK and OK, which count failures and go on,
 * and the interposer's counters, found when CLPOOL_INTERPOSER names the library. */
#ifndef CLPOOL_INTERPOSE_TEST_H
#define CLPOOL_INTERPOSE_TEST_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../clpool_interpose.h"

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)
#define OK(call) CHECK((call) == CL_SUCCESS)

/* NULL when the program runs without the interposer. */
static clpool_interpose_get_counters_fn get_counters = NULL;

/* Finds the interposer's counters when CLPOOL_INTERPOSER is set. Returns 0, or 1 (with a
 * message) when it names a library this process has not loaded: the test was meant to run
 * through the interposer, so passing without it would prove nothing. */
static inline int find_interposer(void) {
    const char* lib = getenv("CLPOOL_INTERPOSER");
    if (!lib || !*lib) return 0;
    void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    get_counters = h ? (clpool_interpose_get_counters_fn)dlsym(h, "clpool_interpose_get_counters") : NULL;
    if (get_counters) return 0;
    fprintf(stderr, "CLPOOL_INTERPOSER=%s but it is not loaded\n", lib);
    return 1;
}

/* The counters now (all zero without the interposer). */
static inline clpool_interpose_counters counters(void) {
    clpool_interpose_counters c;
    memset(&c, 0, sizeof c);
    if (get_counters) get_counters(&c);
    return c;
}

/* The first device of the first platform, then find_interposer(), then a context and an
 * in-order queue on that device. 0 on success; else 1, with the reason on stderr. */
static inline int open_device(cl_platform_id* plat, cl_device_id* dev, cl_context* ctx, cl_command_queue* q) {
    cl_uint n = 0;
    if (clGetPlatformIDs(1, plat, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL platform (install pocl-opencl-icd)\n");
        return 1;
    }
    if (clGetDeviceIDs(*plat, CL_DEVICE_TYPE_ALL, 1, dev, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
    if (find_interposer()) return 1;
    cl_int err = CL_SUCCESS;
    *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &err);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* the 1.2 call: every ICD has it */
    if (err == CL_SUCCESS) *q = clCreateCommandQueue(*ctx, *dev, 0, &err);
#pragma GCC diagnostic pop
    if (err != CL_SUCCESS) {
        fprintf(stderr, "cannot create a context and queue: %d\n", err);
        return 1;
    }
    return 0;
}

#endif
