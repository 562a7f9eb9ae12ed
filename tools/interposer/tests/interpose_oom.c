/* The interposer's answer to a driver out of memory: give the context's cache back and retry.
 * Runs over fake_oom_layer (FAKE_OOM_BYTES=4194304, 4 MiB); plain, and with the interposer
 * preloaded (CLPOOL_INTERPOSER set), where it also checks the counters. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "interpose_test.h"

#define MiB (1024u * 1024u)

int main(void) {
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || !n || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &n)) {
        fprintf(stderr, "no OpenCL device\n");
        return 1;
    }
    if (find_interposer()) return 1;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    /* 3 MiB cached in the READ_ONLY pool... */
    cl_mem ro[3];
    for (int i = 0; i < 3; ++i) {
        ro[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, MiB, NULL, &err);
        CHECK(err == CL_SUCCESS);
    }
    for (int i = 0; i < 3; ++i) CHECK(clReleaseMemObject(ro[i]) == CL_SUCCESS);
    /* ...then 2 MiB of READ_WRITE: 3 + 2 > 4 MiB unless the cache goes back first. */
    cl_mem rw = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 2 * MiB, NULL, &err);
    CHECK(err == CL_SUCCESS && rw != NULL);
    static unsigned char in[2 * MiB], out[2 * MiB];
    for (size_t i = 0; i < sizeof in; ++i) in[i] = (unsigned char)(i * 31);
    CHECK(clEnqueueWriteBuffer(q, rw, CL_TRUE, 0, sizeof in, in, 0, NULL, NULL) == CL_SUCCESS);
    CHECK(clEnqueueReadBuffer(q, rw, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL) == CL_SUCCESS);
    CHECK(memcmp(in, out, sizeof in) == 0);
    if (get_counters) {
        clpool_interpose_counters c;
        get_counters(&c);
        CHECK(c.oom_retries == 1);
        CHECK(c.fallbacks == 0);
        CHECK(c.bytes_cached == 0);  /* the READ_ONLY buckets went back to the driver */
    }
    /* More than the device has, cache or not: the application gets the driver's own error. */
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 3 * MiB, NULL, &err);
    CHECK(big == NULL);
    CHECK(err == CL_MEM_OBJECT_ALLOCATION_FAILURE);
    CHECK(clReleaseMemObject(rw) == CL_SUCCESS);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
