/* A plug-in loads libclpool_dropin with dlopen, makes a buffer, and is unloaded while the
 * buffer lives on: releasing that buffer afterwards runs the library's destructor callback,
 * so the library must still be there. argv[1] is the shared library. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>

#include "dropin_c_test.h"

typedef cl_mem (*create_fn)(cl_context, cl_mem_flags, size_t, void*, cl_int*);

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dropin_c_unload path/to/libclpool_dropin.so\n");
        return 2;
    }
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_first_device(&plat, &dev, &ctx, &q)) return 1;

    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    create_fn create = (create_fn)dlsym(lib, "clpool_create_buffer");
    CHECK(create != NULL);
    if (!create) return 1;
    cl_int err = 1;
    cl_mem kept = create(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(kept != NULL && bucket_of(kept) != NULL); /* pooled */
    CHECK(dlclose(lib) == 0);

    /* The buffer still works, and its release (the driver calls the library back) too. */
    if (kept) {
        CHECK(round_trip(q, kept, 4096));
        OK(clReleaseMemObject(kept));
    }
    /* Loaded again, the library still pools. */
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (lib) {
        create = (create_fn)dlsym(lib, "clpool_create_buffer");
        cl_mem again = create ? create(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err) : NULL;
        CHECK(again != NULL && bucket_of(again) != NULL);
        if (again) OK(clReleaseMemObject(again));
        dlclose(lib);
    }
    OK(clFinish(q));
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
    if (failures) fprintf(stderr, "dropin_c_unload: %d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
