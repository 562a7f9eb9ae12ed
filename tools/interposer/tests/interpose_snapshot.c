/* CLPOOL_SNAPSHOT: the program holds five buffers and sends itself SIGUSR1; the interposer's
 * thread writes the snapshot (the program waits for the file, at most 10 s, and moves it to
 * PATH.signal); then it releases two and exits holding three, and the interposer writes PATH
 * at exit. Past that exit snapshot, a SIGUSR1 must start no other one (static destructors run
 * then): the writer thread stops (snapshot_after_exit). snapshot_check.py reads both files.
 * Links only -lOpenCL; run with the interposer. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "interpose_test.h"

static const size_t sizes[5] = {1000, 5000, 70000, 300000, 1u << 20};
static const char* snapshot_path = NULL;

/* Whether the interposer's snapshot thread (named clpool-snapshot) is running. */
static int snapshot_thread_runs(void) {
    DIR* d = opendir("/proc/self/task");
    if (!d) return 0;
    int found = 0;
    for (struct dirent* e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char name[300], comm[32] = {0};
        snprintf(name, sizeof name, "/proc/self/task/%s/comm", e->d_name);
        FILE* f = fopen(name, "r");
        if (!f) continue;
        found = fgets(comm, sizeof comm, f) && strcmp(comm, "clpool-snapshot\n") == 0;
        fclose(f);
    }
    closedir(d);
    return found;
}

/* Registered before the first OpenCL call, so it runs after the interposer's exit handler
 * (atexit runs handlers in reverse): PATH is the exit snapshot. Sets it aside, sends SIGUSR1,
 * and waits (at most 10 s) until either a snapshot appears (the thread took one after the exit
 * snapshot: a failure) or the thread has stopped. */
static void snapshot_after_exit(void) {
    char kept[4096];
    snprintf(kept, sizeof kept, "%s.exit", snapshot_path);
    if (rename(snapshot_path, kept) != 0) {
        fprintf(stderr, "no snapshot at exit\n");
        _exit(1);
    }
    raise(SIGUSR1);
    int late = 0, runs = 1;
    for (int i = 0; i < 1000 && !late && runs; ++i) {
        late = access(snapshot_path, F_OK) == 0;
        runs = snapshot_thread_runs();
        if (!late && runs) {
            const struct timespec ten_ms = {0, 10000000};
            nanosleep(&ten_ms, NULL);
        }
    }
    rename(kept, snapshot_path); /* what snapshot_check.py reads */
    if (late || runs) {
        fprintf(stderr, "after the exit snapshot: %s\n",
                late ? "SIGUSR1 made another snapshot" : "the snapshot thread still runs after 10 s");
        _exit(1);
    }
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    const char* path = getenv("CLPOOL_SNAPSHOT");
    if (!path || !*path) {
        fprintf(stderr, "set CLPOOL_SNAPSHOT\n");
        return 1;
    }
    snapshot_path = path;
    atexit(snapshot_after_exit);
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
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
    CHECK(snapshot_thread_runs());
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.signal", path);
    CHECK(found && rename(path, moved) == 0);
    OK(clReleaseMemObject(bufs[0]));
    OK(clReleaseMemObject(bufs[3]));
    OK(clFinish(q));
    return failures ? 1 : 0; /* bufs 1, 2 and 4 still held: the exit snapshot lists them */
}
