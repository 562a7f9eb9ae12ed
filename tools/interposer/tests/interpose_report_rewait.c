/* A bucket taken from the cache and sent back to wait for its fence (a rewait) is no reuse:
 * the exit report's per-pool hits leave it out, as its total does. The old owner's write is
 * held by a user event; a second queue then makes the cached bucket need a fence; the next
 * creation takes it, sends it back and misses. The context stays open, so the exit report
 * (CLPOOL_REPORT=1) has its pool's line; report_rewait.sh checks that the pools' hits add up
 * to the total. Links only -lOpenCL; run plain (no report) and with the interposer. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "interpose_test.h"

enum { N = 32768 };
static unsigned char A[N];

int main(void) {
    cl_platform_id plat;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q1;
    if (open_device(&plat, &dev, &ctx, &q1)) return 1;
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(ctx, &err);
    CHECK(err == CL_SUCCESS);
    /* The old owner: a write held back by the gate, then the release. */
    cl_mem old = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N, NULL, &err);
    CHECK(err == CL_SUCCESS);
    OK(clEnqueueWriteBuffer(q1, old, CL_FALSE, 0, N, A, 1, &gate, NULL));
    OK(clFlush(q1));
    OK(clReleaseMemObject(old));
    cl_command_queue q2 = clCreateCommandQueue(ctx, dev, 0, &err);  /* the release now needs a fence */
    CHECK(err == CL_SUCCESS);
    clpool_interpose_counters c0 = counters();
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N, NULL, &err);
    CHECK(err == CL_SUCCESS);
    if (get_counters) {
        CHECK(counters().misses == c0.misses + 1);
        CHECK(counters().hits == c0.hits);  /* taken, sent back to its fence: no hit */
    }
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q1));
    OK(clReleaseMemObject(m));
    OK(clFinish(q2));
    cl_mem again = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N, NULL, &err);  /* a hit, once fenced */
    CHECK(err == CL_SUCCESS);
    OK(clReleaseMemObject(again));
    OK(clReleaseEvent(gate));
    /* q1, q2 and the context stay open: the exit report lists the context's pool. */
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return failures != 0;
}
