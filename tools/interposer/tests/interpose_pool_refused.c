/* A pool the interposer cannot make (here: CLPOOL_MAX_CACHED_GB is invalid, as the test sets it;
 * the driver refusing the pool's queue goes the same way): each creation is the driver's, and
 * nothing of the failed pool stays behind for the counters, the out-of-memory give-back or
 * clReleaseContext to trip over. Run plain, preloaded and as a layer. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "interpose_test.h"

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    const clpool_interpose_counters c0 = counters();
    cl_int err = CL_SUCCESS;
    unsigned char in[4096], out[4096];
    memset(in, 0x3c, sizeof in);
    for (int i = 0; i < 2; ++i) {  /* twice: the second creation must not find a half-made pool */
        cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof in, NULL, &err);
        OK(err);
        if (!m) continue;
        OK(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, sizeof in, in, 0, NULL, NULL));
        OK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        CHECK(memcmp(in, out, sizeof in) == 0);
        OK(clReleaseMemObject(m));
    }
    if (get_counters) {
        const clpool_interpose_counters c = counters();  /* walks every context's pools */
        CHECK(c.fallbacks == c0.fallbacks + 2);
        CHECK(c.pools_open == 0);
    }
    /* A second context: its creations go to the driver too, and out of device memory the
     * give-back walks its pools. */
    cl_context ctx2 = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    cl_mem m2 = clCreateBuffer(ctx2, CL_MEM_READ_WRITE, 1024, NULL, &err);
    OK(err);
    if (m2) OK(clReleaseMemObject(m2));
    OK(clReleaseContext(ctx2));
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
