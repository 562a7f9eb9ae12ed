/* CLPOOL_SNAPSHOT at exit while another thread holds the interposer's lock and a SIGUSR1
 * snapshot is waiting for that lock: the exit snapshot gives up (about a second, "busy at
 * exit") and the process ends. Thread T holds the lock inside its pool's out-of-memory trim
 * (fake_oom_layer's release hook never returns); the snapshot thread is woken by SIGUSR1 and
 * waits for the lock; then main returns. A hang ends in SIGALRM (alarm below), a failure.
 * Runs preloaded, over fake_oom_layer (FAKE_OOM_BYTES=4194304), with CLPOOL_SNAPSHOT set. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "interpose_test.h"

#define MiB (1024u * 1024u)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int t_holds_lock;
static cl_context ctx;

/* The pool's trim, under the interposer's lock: T stays there. */
static void hold_forever(void) {
    pthread_mutex_lock(&mu);
    t_holds_lock = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (;;) pause();
}

static void* thread_t(void* unused) {
    (void)unused;
    cl_int err;
    clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4 * MiB, NULL, &err); /* 1 + 4 MiB: out of memory, trim */
    fprintf(stderr, "the out-of-memory trim did not reach the release hook\n");
    return NULL;
}

/* The snapshot thread's id (named clpool-snapshot), or 0. */
static long snapshot_thread(void) {
    DIR* d = opendir("/proc/self/task");
    if (!d) return 0;
    long tid = 0;
    for (struct dirent* e; !tid && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char name[300], comm[32] = {0};
        snprintf(name, sizeof name, "/proc/self/task/%s/comm", e->d_name);
        FILE* f = fopen(name, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && strcmp(comm, "clpool-snapshot\n") == 0) tid = atol(e->d_name);
        fclose(f);
    }
    closedir(d);
    return tid;
}

/* Whether thread tid waits for a lock: blocked in futex(2), or asleep between tries of one (not
 * in read(2), where the snapshot thread waits for SIGUSR1), per /proc/self/task/TID/syscall. */
static int waits_for_lock(long tid) {
    char name[64];
    snprintf(name, sizeof name, "/proc/self/task/%ld/syscall", tid);
    FILE* f = fopen(name, "r");
    if (!f) return 0;
    long nr = -1;
    const int got = fscanf(f, "%ld", &nr);
    fclose(f);
    return got == 1 && (nr == SYS_futex || nr == SYS_nanosleep || nr == SYS_clock_nanosleep);
}

static struct timespec exit_began;
/* Registered before the first OpenCL call, so it runs after the interposer's exit handler. */
static void after_interposer_exit(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double s = (double)(now.tv_sec - exit_began.tv_sec) + (double)(now.tv_nsec - exit_began.tv_nsec) / 1e9;
    fprintf(stderr, "the interposer's exit handler took %.2f s\n", s);
    if (s > 5) _exit(1);
}

int main(void) {
    alarm(20); /* a hang at exit is a failure, not a stuck test */
    atexit(after_interposer_exit);
    cl_platform_id plat;
    cl_device_id dev;
    cl_command_queue q;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    if (!get_counters) {
        fprintf(stderr, "run with the interposer (CLPOOL_INTERPOSER)\n");
        return 1;
    }
    const char* layer = getenv("OPENCL_LAYERS");
    void* h = layer ? dlopen(layer, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void (*set_release_hook)(void (*)(void)) =
        h ? (void (*)(void (*)(void)))dlsym(h, "fake_oom_set_release_hook") : NULL;
    if (!set_release_hook) {
        fprintf(stderr, "run over fake_oom_layer (OPENCL_LAYERS)\n");
        return 1;
    }
    cl_int err;
    cl_mem cached = clCreateBuffer(ctx, CL_MEM_READ_WRITE, MiB, NULL, &err);
    CHECK(err == CL_SUCCESS);
    OK(clReleaseMemObject(cached)); /* its bucket is what the trim gives back */

    set_release_hook(hold_forever);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_t, NULL) == 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (!t_holds_lock)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) break;
    const int held = t_holds_lock;
    pthread_mutex_unlock(&mu);
    CHECK(held);

    const long writer = snapshot_thread();
    CHECK(writer != 0);
    kill(getpid(), SIGUSR1);
    int waits = 0; /* consecutive looks that found it waiting */
    for (int i = 0; i < 1000 && writer && waits < 5; ++i) {
        const struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
        waits = waits_for_lock(writer) ? waits + 1 : 0;
    }
    CHECK(waits == 5); /* the SIGUSR1 snapshot waits for the lock T holds */
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        _exit(1); /* not through the exit path this test is about */
    }
    fprintf(stderr, "exiting, the lock held and a snapshot waiting for it\n");
    clock_gettime(CLOCK_MONOTONIC, &exit_began);
    return 0;
}
