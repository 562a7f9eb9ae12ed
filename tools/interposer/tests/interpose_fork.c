/* fork() while another thread is inside the interposer: the child must not find the core's
 * state lock held by a thread it does not have. A parent thread keeps creating, querying and
 * releasing buffers (each call takes the lock) while the program forks children; each child,
 * bounded by alarm(5), asks the size of a buffer made before the fork (answered under the lock,
 * with no driver call) and exits 0. A child killed by its alarm hung on the lock. Links only
 * -lOpenCL; run plain and with the interposer (CLPOOL_INTERPOSER=<path>). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose_test.h"

enum { SIZE = 65536, FORKS = 20 };
static cl_context ctx;
static volatile int stop = 0;

static void* busy(void* arg) {
    (void)arg;
    while (!stop) {
        cl_int err = CL_SUCCESS;
        cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &err);
        if (!m) continue;
        cl_uint refs = 0;
        clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
        clReleaseMemObject(m);
    }
    return NULL;
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || n == 0 ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL platform or device (install pocl-opencl-icd)\n");
        return 1;
    }
    if (find_interposer()) return 1;
    cl_int err = CL_SUCCESS;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    cl_mem before = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &err);
    OK(err);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, busy, NULL) == 0);
    usleep(10000);
    int hung = 0, failed = 0;
    for (int i = 0; i < FORKS; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            size_t size = 0;
            const cl_int rc = clGetMemObjectInfo(before, CL_MEM_SIZE, sizeof size, &size, NULL);
            _exit(rc == CL_SUCCESS && size == SIZE ? 0 : 1);
        }
        CHECK(pid > 0);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) ++hung;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    stop = 1;
    pthread_join(t, NULL);
    CHECK(hung == 0);
    CHECK(failed == 0);
    if (hung || failed) fprintf(stderr, "%d of %d children hung, %d failed\n", hung, FORKS, failed);
    OK(clReleaseMemObject(before));
    OK(clReleaseContext(ctx));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
