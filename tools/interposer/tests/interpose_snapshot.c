/* CLPOOL_SNAPSHOT: the program holds five buffers and sends itself SIGUSR1; the interposer's
 * thread writes the snapshot (the program waits for the file, at most 10 s, and moves it to
 * PATH.signal); then it releases two and exits holding three, and the interposer writes PATH
 * at exit. snapshot_check.py reads both. Links only -lOpenCL; run with the interposer. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "interpose_test.h"

static const size_t sizes[5] = {1000, 5000, 70000, 300000, 1u << 20};

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    const char* path = getenv("CLPOOL_SNAPSHOT");
    if (!path || !*path) {
        fprintf(stderr, "set CLPOOL_SNAPSHOT\n");
        return 1;
    }
    cl_mem bufs[5];
    for (int i = 0; i < 5; ++i) {
        cl_int err = CL_SUCCESS;
        bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizes[i], NULL, &err);
        OK(err);
    }
    CHECK(raise(SIGUSR1) == 0); /* without the interposer's handler this would end the program */
    int found = 0;
    for (int i = 0; i < 1000 && !found; ++i) {
        found = access(path, F_OK) == 0;
        if (!found) {
            const struct timespec ten_ms = {0, 10000000};
            nanosleep(&ten_ms, NULL);
        }
    }
    CHECK(found);
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.signal", path);
    CHECK(found && rename(path, moved) == 0);
    OK(clReleaseMemObject(bufs[0]));
    OK(clReleaseMemObject(bufs[3]));
    OK(clFinish(q));
    return failures ? 1 : 0; /* bufs 1, 2 and 4 still held: the exit snapshot lists them */
}
