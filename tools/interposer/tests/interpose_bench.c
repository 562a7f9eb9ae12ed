/* Allocation churn as an unmodified application does it: create a buffer, write it, run nothing,
 * release it; sizes cycle over 4 KiB .. 4 MiB. Prints the mean microseconds per create+write+release
 * and, when interposed (CLPOOL_INTERPOSER), the hit rate. Run it plain and under the interposer:
 * the plain run is the baseline. Usage: interpose_bench [iterations] */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../clpool_interpose.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || !n || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &n)) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    static const size_t sizes[] = {4096, 65536, 1 << 20, 4 << 20, 100000, 3000000};
    static unsigned char data[4 << 20];
    double t0 = 0;
    for (int i = -100; i < iters; ++i) {  /* 100 warm-up rounds */
        if (i == 0) {
            clFinish(q);
            t0 = now_us();
        }
        size_t size = sizes[(i + 600) % 6];
        cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &err);
        if (!m) {
            fprintf(stderr, "clCreateBuffer: %d\n", err);
            return 1;
        }
        clEnqueueWriteBuffer(q, m, CL_FALSE, 0, 256, data, 0, NULL, NULL);
        clReleaseMemObject(m);
    }
    clFinish(q);
    const double per = (now_us() - t0) / iters;
    const char* lib = getenv("CLPOOL_INTERPOSER");
    clpool_interpose_get_counters_fn get = NULL;
    if (lib && *lib) {
        void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
        if (h) get = (clpool_interpose_get_counters_fn)dlsym(h, "clpool_interpose_get_counters");
    }
    printf("{\"mode\": \"%s\", \"iterations\": %d, \"us_per_create_write_release\": %.2f", get ? "interposed" : "plain",
           iters, per);
    if (get) {
        clpool_interpose_counters c;
        get(&c);
        printf(", \"hits\": %llu, \"misses\": %llu", (unsigned long long)c.hits, (unsigned long long)c.misses);
    }
    printf("}\n");
    return 0;
}
