/* Slicing one long-lived buffer, as an unmodified application does it: create a 256-byte
 * sub-buffer of a 4 KiB buffer and release it, N times. Prints the seconds taken and the
 * peak RSS; run it plain (the baseline) and under the interposer, whose RSS must stay flat
 * (a released sub-buffer is freed while its parent lives).
 * Usage: interpose_slice_bench [times] (default 100000) */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long peak_rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

int main(int argc, char** argv) {
    const int times = argc > 1 ? atoi(argv[1]) : 100000;
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || !n || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &n)) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_mem parent = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    if (!parent) {
        fprintf(stderr, "clCreateBuffer: %d\n", err);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < times; ++i) {
        cl_buffer_region r = {(size_t)(i % 16) * 256, 256};
        cl_mem s = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
        if (!s || clReleaseMemObject(s) != CL_SUCCESS) {
            fprintf(stderr, "sub-buffer %d failed: %d\n", i, err);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("{\"sub_buffers\": %d, \"seconds\": %.3f, \"peak_rss_mib\": %ld}\n", times, s, peak_rss_kib() / 1024);
    clReleaseMemObject(parent);
    clReleaseContext(ctx);
    return 0;
}
