/* The interposer's answer to a driver out of memory: give the context's cache back and retry.
 * Runs over fake_oom_layer (FAKE_OOM_BYTES=4194304, 4 MiB); plain, and with the interposer
 * preloaded (CLPOOL_INTERPOSER set), where it also checks the counters. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <pthread.h>

#include "interpose_test.h"

#define MiB (1024u * 1024u)

/* Tombstones after the pool's own out-of-memory retry (issue 14, "suspected"). The pool
 * gives its cache back and retries the driver; the fake layer runs this hook at the retry,
 * and another application thread releases a buffer of the same pool meanwhile, whose
 * commands are still queued. Its record (with what its reuse must wait for) must survive:
 * the interposer once dropped every tombstone of the pool after the retry, this new one
 * included, and then handed its bucket to a new owner with no fence. */
static cl_mem released_elsewhere;
static int hook_ran;
static void* release_it(void* m) {
    CHECK(clReleaseMemObject((cl_mem)m) == CL_SUCCESS);
    return NULL;
}
static void at_retry(void) {
    hook_ran = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, release_it, released_elsewhere) == 0) pthread_join(t, NULL);
    else CHECK(!"pthread_create");
}
static void set_retry_hook(void) {
    const char* layer = getenv("OPENCL_LAYERS");
    void* h = layer ? dlopen(layer, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void (*set)(void (*)(void)) = h ? (void (*)(void (*)(void)))dlsym(h, "fake_oom_set_hook") : NULL;
    CHECK(set != NULL);
    if (set) set(at_retry);
}

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
    CHECK(clReleaseMemObject(rw) == CL_SUCCESS);  /* 2 MiB cached in READ_WRITE */

    /* WRITE_ONLY: 1 MiB cached, and a 256 KiB buffer x whose write waits on a user event. */
    cl_device_id d2 = dev;
    cl_mem cached[2];
    for (int i = 0; i < 2; ++i) {
        cached[i] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, MiB / 2, NULL, &err);
        CHECK(err == CL_SUCCESS);
    }
    for (int i = 0; i < 2; ++i) CHECK(clReleaseMemObject(cached[i]) == CL_SUCCESS);
    enum { X = 256 * 1024 };
    static unsigned char old_data[X], new_data[X], back[X];
    memset(old_data, 0xaa, X);
    memset(new_data, 0x55, X);
    cl_event gate = clCreateUserEvent(ctx, &err);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, X, NULL, &err);
    CHECK(err == CL_SUCCESS);
    CHECK(clEnqueueWriteBuffer(q, x, CL_FALSE, 0, X, old_data, 1, &gate, NULL) == CL_SUCCESS);
    CHECK(clFlush(q) == CL_SUCCESS);
    /* 1 MiB more WRITE_ONLY: 2 + 1 + 0.25 + 1 > 4 MiB, so the pool gives its cache back
     * and retries; x is released by another thread at that moment. */
    released_elsewhere = x;
    set_retry_hook();
    cl_mem more = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, MiB, NULL, &err);
    CHECK(err == CL_SUCCESS && more != NULL);
    CHECK(hook_ran);
    /* A second queue: x's bucket, released behind the lone queue with no fence, must now
     * wait for the write still gated there before anyone else may have it. */
    cl_command_queue q2 = clCreateCommandQueue(ctx, d2, 0, &err);
    CHECK(err == CL_SUCCESS);
    cl_mem y = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, X, NULL, &err);
    CHECK(err == CL_SUCCESS);
    CHECK(clEnqueueWriteBuffer(q2, y, CL_TRUE, 0, X, new_data, 0, NULL, NULL) == CL_SUCCESS);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE) == CL_SUCCESS);
    CHECK(clFinish(q) == CL_SUCCESS);
    CHECK(clEnqueueReadBuffer(q2, y, CL_TRUE, 0, X, back, 0, NULL, NULL) == CL_SUCCESS);
    if (memcmp(back, new_data, X) != 0) fprintf(stderr, "y got x's bucket while x's write was still queued\n");
    CHECK(memcmp(back, new_data, X) == 0);
    CHECK(clReleaseMemObject(y) == CL_SUCCESS);
    if (more) CHECK(clReleaseMemObject(more) == CL_SUCCESS);
    clReleaseEvent(gate);
    clReleaseCommandQueue(q2);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
