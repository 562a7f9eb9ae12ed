/* fork() while another thread is inside the interposer: the child must not find the core's
 * state lock held by a thread it does not have. A parent thread keeps creating, querying and
 * releasing buffers (each call takes the lock) while the program forks children; each child,
 * bounded by alarm(5), asks the size of a buffer made before the fork (answered under the lock,
 * with no driver call), releases it through the interposer (which writes its trace line and
 * keeps the bucket, again with no driver call: a driver lock a parent thread held at the fork
 * may be held in the child, PoCL's are) and exits 0. A child killed by its alarm hung on a
 * lock. The same with the interposer's
 * writers on: CLPOOL_TRACE (the thread also makes buffers the driver serves, whose trace lines
 * are written outside the core's lock) and CLPOOL_SNAPSHOT (another thread keeps asking for
 * snapshots with SIGUSR1, and each child ends with exit(), which writes path.PID). Links only
 * -lOpenCL; run plain and with the interposer (CLPOOL_INTERPOSER=<path>). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose_test.h"

enum { SIZE = 65536, FORKS = 20 };
static cl_context ctx;
static volatile int stop = 0;

static char host[4096];

static void* busy(void* arg) {
    (void)arg;
    while (!stop) {
        cl_int err = CL_SUCCESS;
        cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &err);
        if (!m) continue;
        cl_uint refs = 0;
        clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
        clReleaseMemObject(m);
        cl_mem own = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR, sizeof host, host, &err);  /* the driver's */
        if (own) clReleaseMemObject(own);
    }
    return NULL;
}

static void* ask_snapshots(void* arg) {
    (void)arg;
    while (!stop) {
        kill(getpid(), SIGUSR1);
        usleep(500);
    }
    return NULL;
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    if (pick_device(&plat, &dev)) return 1;
    if (find_interposer()) return 1;
    cl_int err = CL_SUCCESS;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    cl_mem before = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &err);
    OK(err);
    const char* snapshot = get_counters ? getenv("CLPOOL_SNAPSHOT") : NULL;  /* SIGUSR1 would end a plain run */
    if (snapshot && !*snapshot) snapshot = NULL;
    pthread_t t, asker;
    CHECK(pthread_create(&t, NULL, busy, NULL) == 0);
    if (snapshot) CHECK(pthread_create(&asker, NULL, ask_snapshots, NULL) == 0);
    usleep(10000);
    int hung = 0, failed = 0, unwritten = 0;
    for (int i = 0; i < FORKS; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            size_t size = 0;
            const cl_int rc = clGetMemObjectInfo(before, CL_MEM_SIZE, sizeof size, &size, NULL);
            const int released = !get_counters || clReleaseMemObject(before) == CL_SUCCESS;
            const int code = rc == CL_SUCCESS && size == SIZE && released ? 0 : 1;
            if (snapshot) exit(code);  /* the exit snapshot: path.PID */
            _exit(code);
        }
        CHECK(pid > 0);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) ++hung;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
        if (snapshot && pid > 0) {
            char path[4096];
            struct stat sb;
            snprintf(path, sizeof path, "%s.%ld", snapshot, (long)pid);
            if (stat(path, &sb) != 0) ++unwritten;
            remove(path);
        }
    }
    stop = 1;
    pthread_join(t, NULL);
    if (snapshot) pthread_join(asker, NULL);
    CHECK(hung == 0);
    CHECK(failed == 0);
    CHECK(unwritten == 0);
    if (hung || failed || unwritten)
        fprintf(stderr, "%d of %d children hung, %d failed, %d wrote no snapshot\n", hung, FORKS, failed, unwritten);
    OK(clReleaseMemObject(before));
    OK(clReleaseContext(ctx));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
