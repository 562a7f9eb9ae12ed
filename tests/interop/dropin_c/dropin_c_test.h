/* What the drop-in C pair's test programs share: CHECK and OK, which count failures and go
 * on, and a context and in-order queue on the first device. */
#ifndef CLPOOL_DROPIN_C_TEST_H
#define CLPOOL_DROPIN_C_TEST_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)
#define OK(call) CHECK((call) == CL_SUCCESS)

/* 0 on success; else 1, with the reason on stderr. */
static inline int open_device(cl_device_id* dev, cl_context* ctx, cl_command_queue* q) {
    cl_platform_id plat = NULL;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL platform (install pocl-opencl-icd)\n");
        return 1;
    }
    if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, dev, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
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

/* The bucket a pooled buffer is a view of; NULL for a buffer of the driver's own. */
static inline cl_mem bucket_of(cl_mem m) {
    cl_mem parent = NULL;
    if (clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) != CL_SUCCESS) return NULL;
    return parent;
}

/* Writes `n` bytes to `m` on `q` and reads them back: 1 if they came back. */
static inline int round_trip(cl_command_queue q, cl_mem m, size_t n) {
    unsigned char in[256], out[256];
    if (n > sizeof in) n = sizeof in;
    for (size_t i = 0; i < n; ++i) in[i] = (unsigned char)(i * 7 + 1);
    if (clEnqueueWriteBuffer(q, m, CL_TRUE, 0, n, in, 0, NULL, NULL) != CL_SUCCESS) return 0;
    if (clEnqueueReadBuffer(q, m, CL_TRUE, 0, n, out, 0, NULL, NULL) != CL_SUCCESS) return 0;
    for (size_t i = 0; i < n; ++i)
        if (in[i] != out[i]) return 0;
    return 1;
}

#endif
