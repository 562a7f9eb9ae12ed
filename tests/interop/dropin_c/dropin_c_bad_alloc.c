/* clpool_create_buffer out of host memory: a std::bad_alloc inside the library comes back as
 * a buffer (served by the driver) or CL_OUT_OF_HOST_MEMORY, never as an exception unwinding
 * into C. This program replaces operator new (it is linked with -rdynamic, so the library's
 * calls land here) and makes the next `fail_next` calls throw. The first allocation of the
 * first call is the pools' own set, made on first use. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <clpool/interop/dropin_c.h>

#include <dlfcn.h>
#include <stdlib.h>

#include "dropin_c_test.h"

/* libstdc++'s own thrower: a C program cannot throw, but may call it. */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((noreturn));

static volatile int fail_next = 0;
static void* (*real_new)(size_t) = NULL;

/* libstdc++'s operator new, found before any driver is loaded (a driver written in C++
 * calls operator new from its constructors inside dlopen). */
__attribute__((constructor)) static void find_real_new(void) {
    real_new = (void* (*)(size_t))dlsym(RTLD_NEXT, "_Znwm");
}

/* operator new(std::size_t); without libstdc++'s, malloc and bad_alloc on failure. */
void* _Znwm(size_t n) {
    if (fail_next > 0) {
        --fail_next;
        _ZSt17__throw_bad_allocv();
    }
    if (real_new) return real_new(n);
    void* p = malloc(n ? n : 1);
    if (!p) _ZSt17__throw_bad_allocv();
    return p;
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_first_device(&plat, &dev, &ctx, &q)) return 1;

    /* The very first call, its first allocation failing. */
    cl_int err = 1;
    fail_next = 1;
    cl_mem first = clpool_create_buffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    const int left = fail_next;
    fail_next = 0;
    CHECK(left == 0); /* the call did allocate */
    CHECK(err == CL_SUCCESS || err == CL_OUT_OF_HOST_MEMORY);
    CHECK((first != NULL) == (err == CL_SUCCESS));
    if (first) {
        CHECK(round_trip(q, first, 4096));
        OK(clpool_release_buffer(first));
    }

    /* Then the pools work: a pooled buffer, and its bucket again after a release. */
    cl_mem a = clpool_create_buffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(a != NULL && bucket_of(a) != NULL);
    const cl_mem bucket = a ? bucket_of(a) : NULL;
    if (a) OK(clpool_release_buffer(a));
    OK(clFinish(q));
    cl_mem b = clpool_create_buffer(ctx, CL_MEM_READ_WRITE, 3000, NULL, &err);
    OK(err);
    CHECK(b != NULL && bucket_of(b) == bucket);
    if (b) {
        CHECK(round_trip(q, b, 3000));
        OK(clpool_release_buffer(b));
    }

    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
    if (failures) fprintf(stderr, "dropin_c_bad_alloc: %d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
