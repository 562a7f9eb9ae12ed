/* What OpenCL-CTS found different between a plain run and a run through the interposer
 * (.ci/steps.d/75-cts.sh, docs/CONFORMANCE.md), each as a small program that passes plain.
 * Links only -lOpenCL; run plain, under LD_PRELOAD and as a layer like interpose_semantics. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "interpose_test.h"

static size_t properties_size(cl_mem m) {
    size_t n = 99;
    OK(clGetMemObjectInfo(m, CL_MEM_PROPERTIES, 0, NULL, &n));
    return n;
}

/* OpenCL 3.0: CL_MEM_PROPERTIES returns the list the buffer was created with, so an empty
 * list {0} (not NULL) comes back as one entry, the 0; NULL, clCreateBuffer and sub-buffers
 * give none. CTS test_api buffer_properties_queries. */
static void test_empty_property_list(cl_context ctx) {
    const cl_mem_properties empty[] = {0};
    cl_int err = CL_SUCCESS;
    cl_mem a = clCreateBufferWithProperties(ctx, empty, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(properties_size(a) == sizeof(cl_mem_properties));
    cl_mem_properties got[2] = {7, 7};
    size_t n = 0;
    OK(clGetMemObjectInfo(a, CL_MEM_PROPERTIES, sizeof got, got, &n));
    CHECK(n == sizeof(cl_mem_properties) && got[0] == 0);
    cl_buffer_region r = {0, 1024};
    cl_mem s = clCreateSubBuffer(a, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    CHECK(properties_size(s) == 0);
    OK(clReleaseMemObject(s));
    OK(clReleaseMemObject(a));

    /* The same bucket, now asked for without a list, and with NULL: no properties. */
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(properties_size(b) == 0);
    OK(clReleaseMemObject(b));
    cl_mem c = clCreateBufferWithProperties(ctx, NULL, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(properties_size(c) == 0);
    OK(clReleaseMemObject(c));

    /* And {0} again, after the bucket served a buffer without one. */
    cl_mem d = clCreateBufferWithProperties(ctx, empty, CL_MEM_READ_WRITE, 4096, NULL, &err);
    OK(err);
    CHECK(properties_size(d) == sizeof(cl_mem_properties));
    OK(clReleaseMemObject(d));
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    if (pick_device(&plat, &dev)) return 1;
    if (find_interposer()) return 1;
    cl_int err = CL_SUCCESS;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "cannot create a context: %d\n", err);
        return 1;
    }
    test_empty_property_list(ctx);
    if (get_counters) CHECK(counters().hits > 0);  /* the buffers above went through the pool */
    OK(clReleaseContext(ctx));
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
