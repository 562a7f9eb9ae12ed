/* Shared-virtual-memory churn as an unmodified OpenCL 2.0 application does it: clSVMAlloc, write a
 * pattern that depends on the iteration with a blocking clEnqueueSVMMemcpy, read it back the same
 * way, clSVMFree; sizes cycle over 4 KiB .. 64 MiB. Prints the mean microseconds per
 * alloc+write+read+free and, of those, the microseconds inside clSVMAlloc and clSVMFree; a checksum
 * of everything read back (a plain and an interposed run must print the same one); and, when
 * interposed (CLPOOL_INTERPOSER), the SVM pools' counters. Needs a device with coarse-grained SVM.
 * Usage: interpose_svm_bench [iterations] */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../clpool_interpose.h"

enum { warmup = 100, pattern_words = 64 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The first device with coarse-grained SVM buffers, a GPU's before any other (a GPU machine often
 * lists a CPU platform, PoCL, first). */
static int find_svm_device_of(cl_device_type type, cl_device_id* out) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return 0;
    for (cl_uint p = 0; p < np && p < 16; ++p) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], type, 16, devs, &nd) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd && d < 16; ++d) {
            cl_device_svm_capabilities caps = 0;
            if (clGetDeviceInfo(devs[d], CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) == CL_SUCCESS &&
                (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)) {
                *out = devs[d];
                return 1;
            }
        }
    }
    return 0;
}
static int find_svm_device(cl_device_id* out) {
    return find_svm_device_of(CL_DEVICE_TYPE_GPU, out) || find_svm_device_of(CL_DEVICE_TYPE_ALL, out);
}

/* FNV-1a over bytes. */
static uint64_t fold(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char** argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters <= 0) {
        fprintf(stderr, "usage: interpose_svm_bench [iterations > 0]\n");
        return 1;
    }
    cl_device_id dev;
    if (!find_svm_device(&dev)) {
        fprintf(stderr, "interpose_svm_bench: no OpenCL device with CL_DEVICE_SVM_COARSE_GRAIN_BUFFER\n");
        return 1;
    }
    char name[128] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    for (char* c = name; *c; ++c)
        if (*c == '"' || *c == '\\') *c = ' ';
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (!ctx) {
        fprintf(stderr, "clCreateContext: %d\n", err);
        return 1;
    }
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
    if (!q) {
        fprintf(stderr, "clCreateCommandQueueWithProperties: %d\n", err);
        return 1;
    }
    static const size_t sizes[] = {4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 100000, 3000000};
    enum { nsizes = sizeof sizes / sizeof sizes[0] };
    uint32_t pattern[pattern_words], back[pattern_words];
    uint64_t sum = 14695981039346656037ull;
    double t0 = 0, in_alloc_free = 0;
    for (int i = -warmup; i < iters; ++i) {
        if (i == 0) {
            clFinish(q);
            t0 = now_us();
        }
        const size_t size = sizes[(i + warmup) % nsizes];
        const double a0 = now_us();
        void* p = clSVMAlloc(ctx, CL_MEM_READ_WRITE, size, 0);
        const double a1 = now_us();
        if (!p) {
            fprintf(stderr, "clSVMAlloc(%zu) failed at iteration %d\n", size, i);
            return 1;
        }
        /* Where and what to write both depend on the iteration, so a stale or shared pointer shows. */
        const size_t off = ((size_t)(i + warmup) * 4160u) % (size - sizeof pattern);
        for (uint32_t j = 0; j < pattern_words; ++j) pattern[j] = ((uint32_t)(i + warmup) * 2654435761u) ^ (j * 40503u);
        memset(back, 0, sizeof back);
        if ((err = clEnqueueSVMMemcpy(q, CL_TRUE, (char*)p + off, pattern, sizeof pattern, 0, NULL, NULL)) ||
            (err = clEnqueueSVMMemcpy(q, CL_TRUE, back, (char*)p + off, sizeof back, 0, NULL, NULL))) {
            fprintf(stderr, "clEnqueueSVMMemcpy: %d at iteration %d\n", err, i);
            return 1;
        }
        sum = fold(sum, back, sizeof back);
        const double f0 = now_us();
        clSVMFree(ctx, p);
        if (i >= 0) in_alloc_free += (a1 - a0) + (now_us() - f0);
    }
    clFinish(q);
    const double per = (now_us() - t0) / iters;
    const char* lib = getenv("CLPOOL_INTERPOSER");
    clpool_interpose_get_svm_counters_fn get = NULL;
    if (lib && *lib) {
        void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
        if (h) get = (clpool_interpose_get_svm_counters_fn)dlsym(h, "clpool_interpose_get_svm_counters");
    }
    printf(
        "{\"mode\": \"%s\", \"device\": \"%s\", \"iterations\": %d, \"us_per_alloc_write_free\": %.2f, "
        "\"us_in_alloc_free\": %.2f, \"checksum\": \"%016llx\"",
        get ? "interposed" : "plain", name, iters, per, in_alloc_free / iters, (unsigned long long)sum);
    if (get) {
        clpool_interpose_svm_counters c;
        get(&c);
        printf(
            ", \"svm_hits\": %llu, \"svm_misses\": %llu, \"svm_pooled\": %llu, \"svm_passthrough\": %llu, "
            "\"svm_fallbacks\": %llu",
            (unsigned long long)c.hits, (unsigned long long)c.misses, (unsigned long long)c.pooled,
            (unsigned long long)c.passthrough, (unsigned long long)c.fallbacks);
    }
    printf("}\n");
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
