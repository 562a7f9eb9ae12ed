/* clpool 0.1's docs/DROPIN.md, "The C pair": a C file that pools its buffers. */
#include <clpool/dropin_c.h>

#include <stdio.h>

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err = clGetPlatformIDs(1, &platform, NULL);
    if (err == CL_SUCCESS) err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    if (err != CL_SUCCESS) return 1;
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS) return 1;
    cl_mem buf = clpool_create_buffer(context, CL_MEM_READ_WRITE, 4096, NULL, &err); /* was clCreateBuffer */
    if (err != CL_SUCCESS || buf == NULL) return 2;
    clpool_release_buffer(buf); /* was clReleaseMemObject */
    clReleaseContext(context);
    puts("dropin_c: ok");
    return 0;
}
