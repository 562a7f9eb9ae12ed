/* Allocation churn as an unmodified application does it: create a buffer, write it, run nothing,
 * release it; sizes cycle over 4 KiB .. 4 MiB. Prints the mean microseconds per create+write+release
 * and, when interposed (CLPOOL_INTERPOSER), the hit rate. Run it plain and under the interposer:
 * the plain run is the baseline. It takes a GPU before any other device. Usage: interpose_bench [iterations] */
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

/* The first device of the given type on any platform (a GPU machine often lists a CPU platform, PoCL, first). */
static int first_device(cl_device_type type, cl_device_id* out) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return 0;
    for (cl_uint p = 0; p < np && p < 16; ++p) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], type, 1, out, &nd) == CL_SUCCESS && nd) return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    cl_device_id dev;
    if (!first_device(CL_DEVICE_TYPE_GPU, &dev) && !first_device(CL_DEVICE_TYPE_ALL, &dev)) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
    char name[128] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    for (char* c = name; *c; ++c)
        if (*c == '"' || *c == '\\') *c = ' ';
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
    printf("{\"mode\": \"%s\", \"device\": \"%s\", \"iterations\": %d, \"us_per_create_write_release\": %.2f",
           get ? "interposed" : "plain", name, iters, per);
    if (get) {
        clpool_interpose_counters c;
        get(&c);
        printf(", \"hits\": %llu, \"misses\": %llu", (unsigned long long)c.hits, (unsigned long long)c.misses);
    }
    printf("}\n");
    return 0;
}
