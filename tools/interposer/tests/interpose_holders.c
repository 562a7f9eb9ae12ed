/* Who else holds a pooled buffer, and when its destructor callbacks run: images and
 * command-buffer recordings, destructor callbacks, callbacks that call OpenCL, sub-buffers.
 * Links only -lOpenCL; run plain, and with the interposer (CLPOOL_INTERPOSER set,
 * loaded by LD_PRELOAD or OPENCL_LAYERS). Each check is one a plain driver passes. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <sched.h>

#include "interpose_test.h"

static cl_mem make(cl_context ctx, cl_mem_flags flags, size_t n, void* host) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(ctx, flags, n, host, &err);
    CHECK(err == CL_SUCCESS && m != NULL);
    return m;
}
static void fill(cl_command_queue q, cl_mem m, unsigned char byte, size_t n) {
    OK(clEnqueueFillBuffer(q, m, &byte, 1, 0, n, 0, NULL, NULL));
    OK(clFinish(q));
}
static int all_bytes(const unsigned char* p, size_t n, unsigned char byte) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != byte) return 0;
    return 1;
}
/* Waits (bounded, no timing asserted) for a flag a driver thread sets. */
static int wait_flag(volatile int* flag) {
    for (long i = 0; i < 20000000 && !*flag; ++i) sched_yield();
    return *flag;
}

/* An image made from a buffer keeps that buffer alive. Released by the
 * application, the buffer must not go to a new owner while the image exists. */
static void test_image_keeps_its_buffer(cl_context ctx, cl_command_queue q, const char* how) {
    enum { N = 4096 };
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    cl_int err = CL_SUCCESS;
    fill(q, b, 0x11, N);
    cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
    desc.image_width = N / 4;
    desc.buffer = b;
    cl_mem image = strcmp(how, "properties") == 0
                       ? clCreateImageWithProperties(ctx, NULL, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err)
                       : clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err);
    OK(err);
    OK(clReleaseMemObject(b));  /* the image still holds it */
    OK(clFinish(q));
    cl_mem next[4];  /* a new owner asks for the same size, a few times */
    for (int i = 0; i < 4; ++i) {
        next[i] = make(ctx, CL_MEM_READ_WRITE, N, NULL);
        CHECK(next[i] != b);
        fill(q, next[i], 0x22, N);
    }
    static unsigned char out[N];
    size_t origin[3] = {0, 0, 0}, region[3] = {N / 4, 1, 1};
    OK(clEnqueueReadImage(q, image, CL_TRUE, origin, region, 0, 0, out, 0, NULL, NULL));
    if (!all_bytes(out, N, 0x11)) fprintf(stderr, "image (%s): its buffer went to a new owner\n", how);
    CHECK(all_bytes(out, N, 0x11));
    for (int i = 0; i < 4; ++i) OK(clReleaseMemObject(next[i]));
    OK(clReleaseMemObject(image));  /* the last holder: now the bucket may serve again */
    OK(clFinish(q));
    clpool_interpose_counters c0 = counters();
    cl_mem again = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    if (get_counters) CHECK(counters().hits == c0.hits + 1);
    OK(clReleaseMemObject(again));
}

/* A buffer the application released while a sub-buffer of it exists is still a buffer (the
 * sub-buffer keeps it): it can be retained and queried (CL-HPP's getInfo of the sub-buffer's
 * CL_MEM_ASSOCIATED_MEMOBJECT retains it), an image can be made from it, and it must not go
 * to a new owner while the application holds it again, or while such an image exists. */
static void test_sub_buffer_keeps_its_parent(cl_context ctx, cl_command_queue q) {
    enum { N = 4096 };
    cl_int err = CL_SUCCESS;
    static unsigned char out[N];
    const cl_buffer_region r = {0, 1024};
    cl_mem next[4];

    cl_mem b = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    fill(q, b, 0x11, N);
    cl_mem sub = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    OK(clReleaseMemObject(b));  /* the sub-buffer still holds it */
    cl_mem parent = NULL;
    OK(clGetMemObjectInfo(sub, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL));
    CHECK(parent == b);
    OK(clRetainMemObject(b));  /* the application holds it again */
    size_t size = 0;
    OK(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof size, &size, NULL));
    CHECK(size == N);
    OK(clReleaseMemObject(sub));
    OK(clFinish(q));
    for (int i = 0; i < 4; ++i) {
        next[i] = make(ctx, CL_MEM_READ_WRITE, N, NULL);
        CHECK(next[i] != b);
        fill(q, next[i], 0x22, N);
    }
    OK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, N, out, 0, NULL, NULL));
    if (!all_bytes(out, N, 0x11)) fprintf(stderr, "retained parent: its bucket went to a new owner\n");
    CHECK(all_bytes(out, N, 0x11));
    for (int i = 0; i < 4; ++i) OK(clReleaseMemObject(next[i]));
    OK(clReleaseMemObject(b));
    OK(clFinish(q));

    cl_bool images = CL_FALSE;
    cl_device_id dev = NULL;
    OK(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL));
    OK(clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images, NULL));
    if (!images) return;
    b = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    fill(q, b, 0x33, N);
    sub = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    OK(clReleaseMemObject(b));
    cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
    desc.image_width = N / 4;
    desc.buffer = b;
    cl_mem image = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err);
    OK(err);
    OK(clReleaseMemObject(sub));  /* the image still holds it */
    OK(clFinish(q));
    for (int i = 0; i < 4; ++i) {
        next[i] = make(ctx, CL_MEM_READ_WRITE, N, NULL);
        CHECK(next[i] != b);
        fill(q, next[i], 0x44, N);
    }
    if (image) {
        size_t origin[3] = {0, 0, 0}, region[3] = {N / 4, 1, 1};
        OK(clEnqueueReadImage(q, image, CL_TRUE, origin, region, 0, 0, out, 0, NULL, NULL));
        if (!all_bytes(out, N, 0x33)) fprintf(stderr, "image of a released parent: its bucket went to a new owner\n");
        CHECK(all_bytes(out, N, 0x33));
        OK(clReleaseMemObject(image));
    }
    for (int i = 0; i < 4; ++i) OK(clReleaseMemObject(next[i]));
    OK(clFinish(q));
}

/* A cl_khr_command_buffer recording of a buffer keeps it alive (PoCL's
 * recordings retain it). Released by the application, the buffer must not go to a new
 * owner that the recording would then overwrite. */
static void test_command_buffer_keeps_its_buffer(cl_platform_id plat, cl_device_id dev, cl_context ctx,
                                                 cl_command_queue q) {
    enum { N = 4096 };
    char ext[8192] = "";
    OK(clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL));
    if (!strstr(ext, "cl_khr_command_buffer")) {  /* PoCL 3.1 has it (CI runs this part there) */
        printf("the device has no cl_khr_command_buffer: its part did not run\n");
        return;
    }
    clCreateCommandBufferKHR_fn create_cb =
        (clCreateCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clCreateCommandBufferKHR");
    clCommandFillBufferKHR_fn fill_cb =
        (clCommandFillBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clCommandFillBufferKHR");
    clFinalizeCommandBufferKHR_fn finalize_cb =
        (clFinalizeCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clFinalizeCommandBufferKHR");
    clEnqueueCommandBufferKHR_fn enqueue_cb =
        (clEnqueueCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clEnqueueCommandBufferKHR");
    clReleaseCommandBufferKHR_fn release_cb =
        (clReleaseCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clReleaseCommandBufferKHR");
    CHECK(create_cb && fill_cb && finalize_cb && enqueue_cb && release_cb);
    if (!(create_cb && fill_cb && finalize_cb && enqueue_cb && release_cb)) return;
    cl_int err = CL_SUCCESS;
    cl_command_buffer_khr cb = create_cb(1, &q, NULL, &err);
    OK(err);
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    const unsigned char rec = 0x11;
    OK(fill_cb(cb, NULL, b, &rec, 1, 0, N, 0, NULL, NULL, NULL));
    OK(finalize_cb(cb));
    OK(clReleaseMemObject(b));  /* the recording still holds it */
    OK(clFinish(q));
    cl_mem next[4];
    for (int i = 0; i < 4; ++i) {
        next[i] = make(ctx, CL_MEM_READ_WRITE, N, NULL);
        CHECK(next[i] != b);
        fill(q, next[i], 0x22, N);
    }
    OK(enqueue_cb(1, &q, cb, 0, NULL, NULL));  /* writes 0x11 into b's storage, wherever it is */
    OK(clFinish(q));
    static unsigned char out[N];
    for (int i = 0; i < 4; ++i) {
        OK(clEnqueueReadBuffer(q, next[i], CL_TRUE, 0, N, out, 0, NULL, NULL));
        if (!all_bytes(out, N, 0x22)) fprintf(stderr, "command buffer: its buffer went to a new owner\n");
        CHECK(all_bytes(out, N, 0x22));
        OK(clReleaseMemObject(next[i]));
    }
    OK(release_cb(cb));  /* the last holder */
    OK(clFinish(q));
    clpool_interpose_counters c0 = counters();
    cl_mem again = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    if (get_counters) CHECK(counters().hits == c0.hits + 1);
    OK(clReleaseMemObject(again));
}

/* The driver runs a destructor callback once the buffer is deleted,
 * after its queued commands have finished. An application may then reuse the
 * host memory a non-blocking write still reads. */
static unsigned char* host_data;
static volatile int host_recycled = 0;
static cl_event pending_write;
static cl_int write_status_at_callback = -100;
static void CL_CALLBACK recycle_host(cl_mem m, void* user) {
    (void)m;
    (void)user;
    clGetEventInfo(pending_write, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof write_status_at_callback,
                   &write_status_at_callback, NULL);
    memset(host_data, 0xee, 1u << 20);  /* the application's next use of its memory */
    host_recycled = 1;
}
static void test_callback_after_commands(cl_context ctx, cl_command_queue q) {
    enum { N = 1 << 20 };
    cl_int err = CL_SUCCESS;
    host_data = (unsigned char*)malloc(N);
    memset(host_data, 0x5a, N);
    cl_event gate = clCreateUserEvent(ctx, &err);
    OK(err);
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    cl_mem keep = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    OK(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, N, host_data, 1, &gate, &pending_write));
    OK(clEnqueueCopyBuffer(q, b, keep, 0, 0, N, 0, NULL, NULL));
    OK(clFlush(q));
    host_recycled = 0;
    OK(clSetMemObjectDestructorCallback(b, recycle_host, NULL));
    OK(clReleaseMemObject(b));
    CHECK(!host_recycled);  /* the write has not even started */
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q));
    CHECK(wait_flag(&host_recycled));
    CHECK(write_status_at_callback == CL_COMPLETE);
    unsigned char* out = (unsigned char*)malloc(N);
    OK(clEnqueueReadBuffer(q, keep, CL_TRUE, 0, N, out, 0, NULL, NULL));
    if (!all_bytes(out, N, 0x5a)) fprintf(stderr, "the callback ran before the write read the host memory\n");
    CHECK(all_bytes(out, N, 0x5a));
    free(out);
    OK(clReleaseMemObject(keep));
    OK(clReleaseEvent(pending_write));
    OK(clReleaseEvent(gate));
    free(host_data);
}

/* An application callback running inside a passed-through
 * clReleaseMemObject drops one of two references to a pooled buffer, which the
 * application keeps using. */
static cl_mem shared_buffer;
static volatile int dropped = 0;
static void CL_CALLBACK drop_one(cl_mem m, void* user) {
    (void)m;
    (void)user;
    OK(clReleaseMemObject(shared_buffer));
    dropped = 1;
}
static void test_callback_calls_back(cl_context ctx, cl_command_queue q) {
    enum { N = 8192 };
    static char host[4096];
    shared_buffer = make(ctx, CL_MEM_READ_WRITE, N, NULL);
    OK(clRetainMemObject(shared_buffer));
    cl_mem unpooled = make(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof host, host);
    dropped = 0;
    OK(clSetMemObjectDestructorCallback(unpooled, drop_one, NULL));
    OK(clReleaseMemObject(unpooled));
    OK(clFinish(q));
    CHECK(wait_flag(&dropped));
    cl_uint refs = 0;
    OK(clGetMemObjectInfo(shared_buffer, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL));
    CHECK(refs == 1);
    static unsigned char in[N], out[N];
    for (int i = 0; i < N; ++i) in[i] = (unsigned char)(i * 5 + 1);
    OK(clEnqueueWriteBuffer(q, shared_buffer, CL_TRUE, 0, N, in, 0, NULL, NULL));
    cl_mem other = make(ctx, CL_MEM_READ_WRITE, N, NULL);  /* must not be the buffer still in use */
    CHECK(other != shared_buffer);
    fill(q, other, 0x33, N);
    OK(clEnqueueReadBuffer(q, shared_buffer, CL_TRUE, 0, N, out, 0, NULL, NULL));
    CHECK(memcmp(in, out, N) == 0);
    OK(clReleaseMemObject(other));
    OK(clReleaseMemObject(shared_buffer));
}

/* Sub-buffers the application released are freed while their parent
 * lives: slicing one long-lived buffer must not grow the process. */
static long rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}
static void slice(cl_mem parent, int times) {
    for (int i = 0; i < times; ++i) {
        cl_buffer_region r = {(size_t)(i % 16) * 256, 256};
        cl_int err = CL_SUCCESS;
        cl_mem s = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
        if (err != CL_SUCCESS || !s) {
            CHECK(err == CL_SUCCESS && s != NULL);
            return;
        }
        if (clReleaseMemObject(s) != CL_SUCCESS) {
            CHECK(!"sub-buffer release failed");
            return;
        }
    }
}
static void test_sub_buffers_freed_promptly(cl_context ctx) {
    cl_mem parent = make(ctx, CL_MEM_READ_WRITE, 4096, NULL);
    slice(parent, 20000);  /* the process's steady state */
    const long before = rss_kib();
    slice(parent, 100000);
    const long after = rss_kib();
    printf("RSS over 100000 sub-buffers: %ld -> %ld KiB\n", before, after);
    /* Kept until the parent is recycled, each costs the driver's object and a
     * record (about 640 bytes on PoCL: 64 MiB here); freed, nothing grows. */
    CHECK(before > 0 && after - before < 16 * 1024);
    OK(clReleaseMemObject(parent));
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    test_image_keeps_its_buffer(ctx, q, "buffer");
    test_image_keeps_its_buffer(ctx, q, "properties");
    test_command_buffer_keeps_its_buffer(plat, dev, ctx, q);
    test_sub_buffer_keeps_its_parent(ctx, q);
    test_sub_buffers_freed_promptly(ctx);
    test_callback_after_commands(ctx, q);
    test_callback_calls_back(ctx, q);  /* last: a wrong answer aborts the process */
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
