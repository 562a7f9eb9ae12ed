/* What the C test programs share (the interposer's, the drop-in C pair's): CHECK and OK, which
 * count failures and go on, and a context and in-order queue on the first GPU, else the first device.
 * Include <CL/cl.h> first, with the program's CL_TARGET_OPENCL_VERSION. */
#ifndef CLPOOL_C_TEST_H
#define CLPOOL_C_TEST_H

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

/* The first GPU of any platform, else the first device of the first platform that has one (a GPU
 * machine often lists a CPU platform, PoCL, first). 0 on success; else 1, with the reason on stderr. */
static inline int pick_device(cl_platform_id* plat, cl_device_id* dev) {
    cl_platform_id plats[16];
    cl_uint np = 0, n = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) {
        fprintf(stderr, "no OpenCL platform (install pocl-opencl-icd)\n");
        return 1;
    }
    if (np > 16) np = 16;
    for (cl_uint pass = 0; pass < 2; ++pass)
        for (cl_uint p = 0; p < np; ++p)
            if (clGetDeviceIDs(plats[p], pass == 0 ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL, 1, dev, &n) ==
                    CL_SUCCESS &&
                n > 0) {
                *plat = plats[p];
                return 0;
            }
    fprintf(stderr, "no OpenCL device\n");
    return 1;
}

/* pick_device(), and a context and an in-order queue on it. 0 on success; else 1, with the reason on stderr. */
static inline int open_first_device(cl_platform_id* plat, cl_device_id* dev, cl_context* ctx, cl_command_queue* q) {
    if (pick_device(plat, dev)) return 1;
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
