/* The interposer's answer to a driver out of memory: give the context's cache back and retry.
 * Runs over fake_oom_layer (FAKE_OOM_BYTES=4194304, 4 MiB); plain, and with the interposer
 * preloaded (CLPOOL_INTERPOSER set), where it also checks the counters. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <pthread.h>
#include <time.h>

#include "interpose_test.h"

#define MiB (1024u * 1024u)

/* Tombstones after the pool's own out-of-memory retry. The pool gives its cache back and
 * retries the driver; the fake layer runs this hook at the retry, and another application
 * thread releases a buffer of the same pool meanwhile, whose commands are still queued. Its
 * record (with what its reuse must wait for) must survive the retry's trim: without it, the
 * bucket would go to a new owner with no fence, under the old owner's queued commands. */
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

/* A bucket in another thread's hands while the context's cache is given back. Thread B asks
 * for a WRITE_ONLY buffer; its pool holds x's bucket (cached, its reuse fenced: x's write still
 * waits on a user event) and w's (pending). B is paused inside the pool, at the completion test
 * of w's bucket, until the main thread's out-of-memory give-back has dropped the context's
 * tombstones; B then takes x's bucket before the give-back reaches its pool, and only then
 * reaches the core's lock. x's fence must survive that: else B gets x's bucket while x's write
 * is still queued. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int b_at_gate, b_done, gate_open;
static __thread int pause_here; /* B's next completion test pauses */

/* Waits (gate_mu held) until *flag or *other, at most 10 s; 0 on timeout. */
static int wait_for_flag(const int* flag, const int* other) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    while (!*flag && !*other)
        if (pthread_cond_timedwait(&gate_cv, &gate_mu, &until) != 0) break;
    return *flag || *other;
}
static void raise_flag(int* flag) {
    pthread_mutex_lock(&gate_mu);
    *flag = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}
static void at_event_info(void) {
    if (!pause_here) return;
    pause_here = 0;
    pthread_mutex_lock(&gate_mu);
    b_at_gate = 1;
    pthread_cond_broadcast(&gate_cv);
    CHECK(wait_for_flag(&gate_open, &gate_open));
    pthread_mutex_unlock(&gate_mu);
}
static void at_give_back(void) { raise_flag(&gate_open); }

static cl_context b_ctx;
static cl_mem b_made;
static void* thread_b(void* unused) {
    (void)unused;
    cl_int err;
    pause_here = 1;
    b_made = clCreateBuffer(b_ctx, CL_MEM_WRITE_ONLY, 256 * 1024, NULL, &err);
    pause_here = 0;
    CHECK(err == CL_SUCCESS);
    raise_flag(&b_done);
    return NULL;
}

static void* layer_hook(const char* name) {
    const char* layer = getenv("OPENCL_LAYERS");
    void* h = layer ? dlopen(layer, RTLD_NOW | RTLD_NOLOAD) : NULL;
    return h ? dlsym(h, name) : NULL;
}

static void bucket_held_during_give_back(cl_device_id dev) {
    void (*set_release_hook)(void (*)(void)) = (void (*)(void (*)(void)))layer_hook("fake_oom_set_release_hook");
    void (*set_event_hook)(void (*)(void)) = (void (*)(void (*)(void)))layer_hook("fake_oom_set_event_hook");
    CHECK(set_release_hook && set_event_hook);
    if (!set_release_hook || !set_event_hook) return;
    enum { X = 256 * 1024 };
    static unsigned char old_data[X], new_data[X], back[X];
    memset(old_data, 0xaa, X);
    memset(new_data, 0x55, X);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q1 = clCreateCommandQueue(ctx, dev, 0, &err);
    /* The pools, in the order the give-back walks them (by flags): READ_WRITE holds one bucket
     * (its trim is the moment B goes on), then WRITE_ONLY (B's), then READ_ONLY (the main
     * thread's, nothing cached: its own trim must not release anything). */
    cl_mem rw = clCreateBuffer(ctx, CL_MEM_READ_WRITE, X, NULL, &err);
    CHECK(err == CL_SUCCESS);
    cl_mem ro = clCreateBuffer(ctx, CL_MEM_READ_ONLY, 4096, NULL, &err);
    CHECK(err == CL_SUCCESS);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, X, NULL, &err);
    CHECK(err == CL_SUCCESS);
    cl_mem w = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, X, NULL, &err);
    CHECK(err == CL_SUCCESS);
    cl_event gate = clCreateUserEvent(ctx, &err);
    OK(clEnqueueWriteBuffer(q1, x, CL_FALSE, 0, X, old_data, 1, &gate, NULL));
    OK(clFlush(q1));
    OK(clReleaseMemObject(rw));
    OK(clReleaseMemObject(x)); /* behind the lone queue: no fence yet */
    cl_command_queue q2 = clCreateCommandQueue(ctx, dev, 0, &err); /* x's bucket: fenced now */
    CHECK(err == CL_SUCCESS);
    OK(clReleaseMemObject(w)); /* pending behind markers on both queues */

    b_ctx = ctx;
    set_event_hook(at_event_info);
    pthread_t b;
    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
    pthread_mutex_lock(&gate_mu);
    wait_for_flag(&b_at_gate, &b_done);
    const int paused = b_at_gate;
    pthread_mutex_unlock(&gate_mu);
    if (get_counters) CHECK(paused); /* plain: the driver makes B's buffer, no pool to pause in */
    set_release_hook(at_give_back);
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_ONLY, 8 * MiB, NULL, &err); /* more than the device has */
    CHECK(big == NULL && err == CL_MEM_OBJECT_ALLOCATION_FAILURE);
    set_release_hook(NULL);
    if (get_counters) CHECK(gate_open); /* the give-back's trim let B go on */
    raise_flag(&gate_open);
    pthread_join(b, NULL);
    set_event_hook(NULL);

    cl_mem y = b_made;
    if (y == x) fprintf(stderr, "B got x's bucket while x's write was still queued\n");
    OK(clEnqueueWriteBuffer(q2, y, CL_TRUE, 0, X, new_data, 0, NULL, NULL));
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q1));
    OK(clEnqueueReadBuffer(q2, y, CL_TRUE, 0, X, back, 0, NULL, NULL));
    CHECK(memcmp(back, new_data, X) == 0);
    OK(clReleaseMemObject(y));
    OK(clReleaseMemObject(ro));
    clReleaseEvent(gate);
    clReleaseCommandQueue(q2);
    clReleaseCommandQueue(q1);
    clReleaseContext(ctx);
}

int main(void) {
    cl_platform_id plat;
    cl_device_id dev;
    if (pick_device(&plat, &dev)) return 1;
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
    bucket_held_during_give_back(dev);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
