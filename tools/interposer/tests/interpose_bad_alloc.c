/* The interposer out of host memory: a std::bad_alloc inside it must come back as
 * CL_OUT_OF_HOST_MEMORY (or the call served another way), never as an exception through the
 * C API, with its counts still right. This program replaces
 * operator new (it is linked with -rdynamic, so the interposer's calls land here) and makes
 * it throw while `failing` is set. Run plain, preloaded and as a layer. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <dlfcn.h>
#include <stdlib.h>

#include "interpose_test.h"

/* libstdc++'s own thrower: a C program cannot throw, but may call it. */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((noreturn));

static volatile int failing = 0;
static void* (*real_new)(size_t) = NULL;

/* libstdc++'s operator new, found once at start-up: before any driver is loaded, since a
 * driver written in C++ (NVIDIA's) calls operator new from its constructors inside dlopen. */
__attribute__((constructor)) static void find_real_new(void) {
    real_new = (void* (*)(size_t))dlsym(RTLD_NEXT, "_Znwm");
}

/* operator new(std::size_t). Without libstdc++'s (not found), it allocates as that one does:
 * malloc, and bad_alloc on failure (its operator delete calls free). */
void* _Znwm(size_t n) {
    if (failing) _ZSt17__throw_bad_allocv();
    if (real_new) return real_new(n);
    void* p = malloc(n ? n : 1);
    if (!p) _ZSt17__throw_bad_allocv();
    return p;
}

/* A call made while operator new fails: it succeeds, or says CL_OUT_OF_HOST_MEMORY. */
#define MAY_FAIL(err) CHECK((err) == CL_SUCCESS || (err) == CL_OUT_OF_HOST_MEMORY)

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    cl_int err = CL_SUCCESS;
    /* A pool with one buffer cached, so the next creation of that size is a hit. */
    cl_mem warm = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    OK(clReleaseMemObject(warm));
    OK(clFinish(q));
    const clpool_interpose_counters c0 = counters();
    cl_mem parent = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 16, NULL, &err);  /* pooled */
    OK(err);

    /* Through the interposer, the calls that must record what they made fail cleanly;
     * the others are served. Plain, nothing fails: a driver written in C++ (NVIDIA's) would
     * get the bad_alloc itself, and that is not what is tested here. */
    failing = get_counters != NULL;
    cl_context ctx2 = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    MAY_FAIL(err);
    CHECK((ctx2 != NULL) == (err == CL_SUCCESS));
    if (get_counters) CHECK(err == CL_OUT_OF_HOST_MEMORY);
    cl_command_queue q2 = clCreateCommandQueue(ctx, dev, 0, &err);
    MAY_FAIL(err);
    CHECK((q2 != NULL) == (err == CL_SUCCESS));
    if (get_counters) CHECK(err == CL_OUT_OF_HOST_MEMORY);
    cl_buffer_region r = {0, 1024};
    cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    MAY_FAIL(err);
    CHECK((sub != NULL) == (err == CL_SUCCESS));
    if (get_counters) CHECK(err == CL_OUT_OF_HOST_MEMORY);
    cl_mem hit = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);  /* the cached bucket */
    MAY_FAIL(err);
    cl_mem miss = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);  /* a new bucket */
    MAY_FAIL(err);
    failing = 0;

    /* What was made works and is released; what was not left nothing behind. */
    unsigned char in[1024], out[1024];
    memset(in, 0x6b, sizeof in);
    cl_mem made[] = {hit, miss, parent, sub};
    for (int i = 0; i < 4; ++i)
        if (made[i]) {
            OK(clEnqueueWriteBuffer(q, made[i], CL_TRUE, 0, sizeof in, in, 0, NULL, NULL));
            OK(clEnqueueReadBuffer(q, made[i], CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
            CHECK(memcmp(in, out, sizeof in) == 0);
        }
    for (int i = 3; i >= 0; --i)
        if (made[i]) OK(clReleaseMemObject(made[i]));
    if (q2) OK(clReleaseCommandQueue(q2));
    if (ctx2) OK(clReleaseContext(ctx2));
    OK(clFinish(q));
    if (get_counters) {
        const clpool_interpose_counters c = counters();
        CHECK(c.live_buffers == c0.live_buffers);
        CHECK(c.contexts_open == c0.contexts_open);
    }
    /* Releasing a context whose pools the interposer closes, out of host memory: it is released,
     * and the failure stays inside (the pools' stats are folded into the totals there). */
    cl_context ctx3 = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    for (int i = 0; i < 3; ++i) {  /* three pools, one bucket cached in each */
        const cl_mem_flags access[] = {CL_MEM_READ_WRITE, CL_MEM_READ_ONLY, CL_MEM_WRITE_ONLY};
        cl_mem m3 = clCreateBuffer(ctx3, access[i], 4096, NULL, &err);
        OK(err);
        if (m3) OK(clReleaseMemObject(m3));
    }
    const clpool_interpose_counters before_close = counters();
    failing = get_counters != NULL;
    err = clReleaseContext(ctx3);
    failing = 0;
    OK(err);
    if (get_counters) CHECK(counters().contexts_open + 1 == before_close.contexts_open);

    /* And the interposer still pools: the cached 4 KiB bucket serves again. */
    const clpool_interpose_counters c1 = counters();
    cl_mem again = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    if (get_counters) CHECK(counters().hits == c1.hits + 1);
    OK(clReleaseMemObject(again));
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
