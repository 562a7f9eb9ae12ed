/* What the interposer's C test programs share: tests/c_test.h's CHECK, OK and device, and the
 * interposer's counters, found when CLPOOL_INTERPOSER names the library. */
#ifndef CLPOOL_INTERPOSE_TEST_H
#define CLPOOL_INTERPOSE_TEST_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../clpool_interpose.h"
#include "../../../tests/c_test.h"

/* NULL when the program runs without the interposer. */
static clpool_interpose_get_counters_fn get_counters = NULL;
static clpool_interpose_get_svm_counters_fn get_svm_counters = NULL;

/* Finds the interposer's counters when CLPOOL_INTERPOSER is set. Returns 0, or 1 (with a
 * message) when it names a library this process has not loaded: the test was meant to run
 * through the interposer, so passing without it would prove nothing. */
static inline int find_interposer(void) {
    const char* lib = getenv("CLPOOL_INTERPOSER");
    if (!lib || !*lib) return 0;
    void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    get_counters = h ? (clpool_interpose_get_counters_fn)dlsym(h, "clpool_interpose_get_counters") : NULL;
    get_svm_counters = h ? (clpool_interpose_get_svm_counters_fn)dlsym(h, "clpool_interpose_get_svm_counters") : NULL;
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

/* The SVM counters now (all zero without the interposer). */
static inline clpool_interpose_svm_counters svm_counters(void) {
    clpool_interpose_svm_counters c;
    memset(&c, 0, sizeof c);
    if (get_svm_counters) get_svm_counters(&c);
    return c;
}

/* open_first_device(), then find_interposer() (the platform call has loaded a layer by then).
 * 0 on success; else 1, with the reason on stderr. */
static inline int open_device(cl_platform_id* plat, cl_device_id* dev, cl_context* ctx, cl_command_queue* q) {
    if (open_first_device(plat, dev, ctx, q)) return 1;
    return find_interposer();
}

#endif
