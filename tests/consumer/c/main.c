/* A C program on the drop-in pair: data goes in and comes back, and a released buffer's
   memory is handed out again (both buffers are views of the same pooled bucket). */
#define CL_TARGET_OPENCL_VERSION 120
#include <clpool/interop/dropin_c.h>

#include <stdio.h>
#include <string.h>

static int fail(const char* what, cl_int err) {
    fprintf(stderr, "c_consumer: %s failed (%d)\n", what, (int)err);
    return 1;
}

static cl_mem parent_of(cl_mem m) {
    cl_mem parent = NULL;
    if (clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) != CL_SUCCESS) return NULL;
    return parent;
}

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err = clGetPlatformIDs(1, &platform, NULL);
    if (err != CL_SUCCESS) return fail("clGetPlatformIDs", err);
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    if (err != CL_SUCCESS) return fail("clGetDeviceIDs", err);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (!context) return fail("clCreateContext", err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (!queue) return fail("clCreateCommandQueue", err);

    char in[1000], out[1000];
    for (int i = 0; i < 1000; ++i) in[i] = (char)(i * 7);
    cl_mem a = clpool_create_buffer(context, CL_MEM_READ_WRITE, sizeof in, NULL, &err);
    if (!a) return fail("clpool_create_buffer", err);
    /* Written on this queue, not with CL_MEM_COPY_HOST_PTR (which goes to the driver unpooled). */
    err = clEnqueueWriteBuffer(queue, a, CL_FALSE, 0, sizeof in, in, 0, NULL, NULL);
    if (err != CL_SUCCESS) return fail("clEnqueueWriteBuffer", err);
    err = clEnqueueReadBuffer(queue, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    if (err != CL_SUCCESS) return fail("clEnqueueReadBuffer", err);
    size_t size = 0;
    clGetMemObjectInfo(a, CL_MEM_SIZE, sizeof size, &size, NULL);
    const cl_mem bucket = parent_of(a);
    err = clpool_release_buffer(a);
    if (err != CL_SUCCESS) return fail("clpool_release_buffer", err);

    cl_mem b = clpool_create_buffer(context, CL_MEM_READ_WRITE, 900, NULL, &err);
    if (!b) return fail("clpool_create_buffer (second)", err);
    const int reused = bucket != NULL && parent_of(b) == bucket;
    clpool_release_buffer(b);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);

    const int data_ok = memcmp(in, out, sizeof in) == 0;
    printf("c_consumer: data %s, size %zu, bucket %s\n", data_ok ? "ok" : "WRONG", size,
           reused ? "reused" : "NOT reused");
    return data_ok && size == sizeof in && reused ? 0 : 1;
}
