/* The OpenCL promises the interposer keeps, checked from an unmodified C application.
 * Links only -lOpenCL. Run plain (the checks any driver passes), and with the interposer
 * (CLPOOL_INTERPOSER=<path of libclpool_interpose.so>, loaded by LD_PRELOAD or
 * OPENCL_LAYERS): then it also checks pooling through the interposer's counters. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <sched.h>

#include "interpose_test.h"

static cl_uint mem_refs(cl_mem m) {
    cl_uint n = 0;
    OK(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL));
    return n;
}
static size_t mem_size(cl_mem m) {
    size_t n = 0;
    OK(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof n, &n, NULL));
    return n;
}
static cl_mem make(cl_context ctx, cl_mem_flags flags, size_t n, void* host) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(ctx, flags, n, host, &err);
    CHECK(err == CL_SUCCESS && m != NULL);
    return m;
}

static int order[4];
static volatile int fired = 0;
/* Destructor callbacks run once the driver would delete the buffer, which may be on
 * another thread after the release returns: wait for them (bounded; no timing asserted). */
static int wait_fired(int n) {
    for (long i = 0; i < 20000000 && fired < n; ++i) sched_yield();
    return fired;
}
static void CL_CALLBACK on_free(cl_mem m, void* tag) {
    (void)m;
    if (fired < 4) order[fired] = (int)(size_t)tag;
    ++fired;
}

static void test_counts_and_queries(cl_context ctx) {
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, 1000, NULL);
    CHECK(mem_size(b) == 1000);
    CHECK(mem_refs(b) == 1);
    cl_mem_flags f = 0;
    OK(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof f, &f, NULL));
    CHECK(f == CL_MEM_READ_WRITE);
    void* hp = (void*)1;
    OK(clGetMemObjectInfo(b, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    CHECK(hp == NULL);
    cl_mem assoc = (cl_mem)1;
    OK(clGetMemObjectInfo(b, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    CHECK(assoc == NULL);
    size_t offset = 7;
    OK(clGetMemObjectInfo(b, CL_MEM_OFFSET, sizeof offset, &offset, NULL));
    CHECK(offset == 0);
    cl_context c = NULL;
    OK(clGetMemObjectInfo(b, CL_MEM_CONTEXT, sizeof c, &c, NULL));
    CHECK(c == ctx);
    cl_uint too_small = 0;  /* room for 4 bytes, the answer needs 8 */
    CHECK(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof too_small, &too_small, NULL) == CL_INVALID_VALUE);

    OK(clRetainMemObject(b));
    CHECK(mem_refs(b) == 2);
    fired = 0;
    OK(clSetMemObjectDestructorCallback(b, on_free, (void*)1));
    OK(clSetMemObjectDestructorCallback(b, on_free, (void*)2));
    OK(clReleaseMemObject(b));
    CHECK(mem_refs(b) == 1);
    CHECK(fired == 0);
    OK(clReleaseMemObject(b));
    CHECK(wait_fired(2) == 2);  /* last registered first */
    CHECK(order[0] == 2 && order[1] == 1);
    if (get_counters) {  /* the driver would be handed freed memory: only the interposer can answer */
        CHECK(clReleaseMemObject(b) == CL_INVALID_MEM_OBJECT);
        CHECK(clRetainMemObject(b) == CL_INVALID_MEM_OBJECT);
        size_t n = 0;
        CHECK(clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof n, &n, NULL) == CL_INVALID_MEM_OBJECT);
        CHECK(clSetMemObjectDestructorCallback(b, on_free, NULL) == CL_INVALID_MEM_OBJECT);
    }
}

static void test_reuse_and_data(cl_context ctx, cl_command_queue q) {
    clpool_interpose_counters c0 = counters();
    cl_mem a = make(ctx, CL_MEM_READ_WRITE, 3000, NULL);
    OK(clReleaseMemObject(a));
    /* A released buffer waits for a marker on each queue of its context;
     * finishing the queue runs it. (Without this a reuse right away may miss.) */
    OK(clFinish(q));
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, 2500, NULL);  /* same bucket, smaller */
    CHECK(mem_size(b) == 2500);
    clpool_interpose_counters c1 = counters();
    if (get_counters) {
        CHECK(c1.misses == c0.misses + 1);
        CHECK(c1.hits == c0.hits + 1);
        CHECK(c1.live_buffers == c0.live_buffers + 1);
    }
    /* The size is the driver's to enforce: past 2500 is out of bounds. */
    char tail[16];
    CHECK(clEnqueueReadBuffer(q, b, CL_TRUE, 2496, sizeof tail, tail, 0, NULL, NULL) == CL_INVALID_VALUE);
    cl_buffer_region r = {2048, 1024};
    cl_int err = CL_SUCCESS;
    CHECK(clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err) == NULL);
    CHECK(err == CL_INVALID_VALUE);
    OK(clReleaseMemObject(b));

    /* COPY_HOST_PTR: pooled, with the data written. */
    unsigned char data[4000], back[4000];
    for (int i = 0; i < 4000; ++i) data[i] = (unsigned char)(i * 7 + 3);
    cl_mem d = make(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4000, data);
    cl_mem_flags f = 0;
    OK(clGetMemObjectInfo(d, CL_MEM_FLAGS, sizeof f, &f, NULL));
    CHECK(f == (CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR));
    memset(back, 0, sizeof back);
    OK(clEnqueueReadBuffer(q, d, CL_TRUE, 0, sizeof back, back, 0, NULL, NULL));
    CHECK(memcmp(data, back, sizeof back) == 0);
    OK(clReleaseMemObject(d));
    OK(clFinish(q));
    /* Again from the cache (the same bucket as before): still the new data. */
    for (int i = 0; i < 4000; ++i) data[i] = (unsigned char)(i * 13 + 1);
    clpool_interpose_counters c2 = counters();
    d = make(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4000, data);
    if (get_counters) CHECK(counters().hits == c2.hits + 1);
    OK(clEnqueueReadBuffer(q, d, CL_TRUE, 0, sizeof back, back, 0, NULL, NULL));
    CHECK(memcmp(data, back, sizeof back) == 0);
    OK(clReleaseMemObject(d));
}

static void test_flags_are_separate_pools(cl_context ctx, cl_command_queue q) {
    cl_mem a = make(ctx, CL_MEM_READ_WRITE, 5000, NULL);
    OK(clReleaseMemObject(a));
    OK(clFinish(q));
    clpool_interpose_counters c0 = counters();
    cl_mem b = make(ctx, CL_MEM_READ_ONLY, 5000, NULL);  /* another pool: a miss */
    cl_mem_flags f = 0;
    OK(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof f, &f, NULL));
    CHECK(f == CL_MEM_READ_ONLY);
    if (get_counters) CHECK(counters().misses == c0.misses + 1);
    OK(clReleaseMemObject(b));
}

static cl_mem_flags flags_of(cl_mem m) {
    cl_mem_flags f = 0;
    OK(clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof f, &f, NULL));
    return f;
}

/* CL_MEM_FLAGS is the flags the buffer was made with, as the driver reports them: COPY_HOST_PTR
 * with no access flag is that alone, not the default access of the bucket behind it; a
 * sub-buffer made with no flags has its parent's, one made with an access flag adds it to the
 * parent's host-pointer flag. */
static void test_flags_are_as_asked(cl_context ctx) {
    unsigned char data[3000];
    memset(data, 0x11, sizeof data);
    cl_mem b = make(ctx, CL_MEM_COPY_HOST_PTR, sizeof data, data);
    CHECK(flags_of(b) == CL_MEM_COPY_HOST_PTR);
    cl_buffer_region r = {0, 1024};
    cl_int err = CL_SUCCESS;
    cl_mem inherits = clCreateSubBuffer(b, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    CHECK(flags_of(inherits) == CL_MEM_COPY_HOST_PTR);
    cl_mem read_only = clCreateSubBuffer(b, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    CHECK(flags_of(read_only) == (CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR));
    OK(clReleaseMemObject(read_only));
    OK(clReleaseMemObject(inherits));
    OK(clReleaseMemObject(b));
    /* No flags at all: the sub-buffer's are its parent's, whatever the driver reports for those. */
    cl_mem plain = make(ctx, 0, sizeof data, NULL);
    cl_mem sub = clCreateSubBuffer(plain, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    CHECK(flags_of(sub) == flags_of(plain));
    OK(clReleaseMemObject(sub));
    OK(clReleaseMemObject(plain));
}

/* Copies between an image and a pooled buffer are checked against the size the application
 * asked for, as buffer transfers are: the bucket behind it is larger. */
static void test_image_copies_stop_at_asked_size(cl_context ctx, cl_device_id dev, cl_command_queue q) {
    cl_bool images = CL_FALSE;
    OK(clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images, NULL));
    if (!images) return;
    enum { W = 32, H = 32, ASKED = 2500 };  /* the image is 4096 bytes, the bucket 4096 */
    cl_int err = CL_SUCCESS;
    cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = W;
    desc.image_height = H;
    cl_mem image = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err);
    OK(err);
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, ASKED, NULL);
    const size_t origin[3] = {0, 0, 0}, whole[3] = {W, H, 1}, rows[3] = {W, 4, 1};  /* 4096 and 512 bytes */
    CHECK(clEnqueueCopyImageToBuffer(q, image, b, origin, whole, 0, 0, NULL, NULL) == CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBufferToImage(q, b, image, 0, origin, whole, 0, NULL, NULL) == CL_INVALID_VALUE);
    /* Past the end only by the offset. */
    CHECK(clEnqueueCopyImageToBuffer(q, image, b, origin, rows, ASKED - 256, 0, NULL, NULL) == CL_INVALID_VALUE);
    CHECK(clEnqueueCopyBufferToImage(q, b, image, ASKED - 256, origin, rows, 0, NULL, NULL) == CL_INVALID_VALUE);
    /* Inside: served. */
    OK(clEnqueueCopyImageToBuffer(q, image, b, origin, rows, ASKED - 512, 0, NULL, NULL));
    OK(clEnqueueCopyBufferToImage(q, b, image, ASKED - 512, origin, rows, 0, NULL, NULL));
    OK(clFinish(q));
    OK(clReleaseMemObject(b));
    OK(clReleaseMemObject(image));
}

/* A buffer is reused only once every command enqueued before its release, on
 * any queue of its context, has completed. A user event holds a write back. */
static void test_reuse_waits_for_commands(cl_context ctx, cl_device_id dev, cl_command_queue q1) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q2 = clCreateCommandQueue(ctx, dev, 0, &err);
    OK(err);
    cl_event gate = clCreateUserEvent(ctx, &err);
    OK(err);
    static unsigned char pattern[8192];
    memset(pattern, 0x5a, sizeof pattern);
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, 8192, NULL);
    cl_event write_done = NULL;
    OK(clEnqueueWriteBuffer(q2, b, CL_FALSE, 0, sizeof pattern, pattern, 1, &gate, &write_done));
    OK(clFlush(q2));
    OK(clReleaseMemObject(b));  /* released with a write still waiting on q2 */
    OK(clFinish(q1));  /* q1's marker has run: only q2's pending write holds b */
    clpool_interpose_counters c0 = counters();
    cl_mem b2 = make(ctx, CL_MEM_READ_WRITE, 8192, NULL);
    if (get_counters) {
        CHECK(counters().misses == c0.misses + 1);  /* not the busy buffer */
        CHECK(counters().hits == c0.hits);
        CHECK(counters().bytes_pending >= 8192);
    }
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &write_done));
    OK(clFinish(q1));
    OK(clReleaseMemObject(b2));
    OK(clFinish(q1));
    OK(clFinish(q2));
    clpool_interpose_counters c1 = counters();
    cl_mem b3 = make(ctx, CL_MEM_READ_WRITE, 8192, NULL);
    if (get_counters) CHECK(counters().hits == c1.hits + 1);
    OK(clReleaseMemObject(b3));
    OK(clReleaseEvent(write_done));
    OK(clReleaseEvent(gate));
    OK(clReleaseCommandQueue(q2));
}

/* The same when the queue was released by the application before the buffer. */
static void test_reuse_waits_for_released_queue(cl_context ctx, cl_device_id dev, cl_command_queue q) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q3 = clCreateCommandQueue(ctx, dev, 0, &err);
    OK(err);
    cl_event gate = clCreateUserEvent(ctx, &err);
    OK(err);
    static unsigned char pattern[16384];
    cl_mem b = make(ctx, CL_MEM_READ_WRITE, 16384, NULL);
    cl_event write_done = NULL;
    OK(clEnqueueWriteBuffer(q3, b, CL_FALSE, 0, sizeof pattern, pattern, 1, &gate, &write_done));
    OK(clReleaseCommandQueue(q3));  /* the application is done with the queue; the write still waits */
    OK(clReleaseMemObject(b));
    OK(clFinish(q));  /* the live queue's marker has run: only the released queue's work holds b */
    clpool_interpose_counters c0 = counters();
    cl_mem b2 = make(ctx, CL_MEM_READ_WRITE, 16384, NULL);
    if (get_counters) {
        CHECK(counters().misses == c0.misses + 1);  /* not the busy buffer */
        CHECK(counters().hits == c0.hits);
    }
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &write_done));
    OK(clReleaseMemObject(b2));
    OK(clReleaseEvent(write_done));
    OK(clReleaseEvent(gate));
}

static void test_sub_buffers(cl_context ctx, cl_command_queue q) {
    cl_mem p = make(ctx, CL_MEM_READ_WRITE, 65536, NULL);
    cl_buffer_region r = {0, 1024};
    cl_int err = CL_SUCCESS;
    cl_mem s = clCreateSubBuffer(p, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    OK(err);
    CHECK(mem_size(s) == 1024);
    cl_mem assoc = NULL;
    OK(clGetMemObjectInfo(s, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    CHECK(assoc == p);
    CHECK(clCreateSubBuffer(s, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err) == NULL);
    CHECK(err == CL_INVALID_MEM_OBJECT);  /* no sub-buffer of a sub-buffer */
    unsigned char in[1024], out[1024];
    for (int i = 0; i < 1024; ++i) in[i] = (unsigned char)i;
    OK(clEnqueueWriteBuffer(q, s, CL_TRUE, 0, sizeof in, in, 0, NULL, NULL));
    OK(clEnqueueReadBuffer(q, p, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    CHECK(memcmp(in, out, sizeof in) == 0);  /* the sub-buffer is the parent's bytes */

    OK(clReleaseMemObject(p));  /* the sub-buffer still uses it: not recycled */
    clpool_interpose_counters c0 = counters();
    cl_mem other = make(ctx, CL_MEM_READ_WRITE, 65536, NULL);
    if (get_counters) CHECK(counters().misses == c0.misses + 1);
    OK(clReleaseMemObject(s));  /* the last sub-buffer: now the parent goes back (and s to the driver) */
    OK(clFinish(q));
    clpool_interpose_counters c1 = counters();
    cl_mem again = make(ctx, CL_MEM_READ_WRITE, 65536, NULL);
    if (get_counters) {
        CHECK(counters().hits == c1.hits + 1);
        CHECK(counters().sub_buffers >= 1);
    }
    OK(clReleaseMemObject(again));
    OK(clReleaseMemObject(other));
}

static void test_use_host_ptr_passes_through(cl_context ctx) {
    static char host[4096];
    clpool_interpose_counters c0 = counters();
    cl_mem m = make(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof host, host);
    void* hp = NULL;
    OK(clGetMemObjectInfo(m, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    CHECK(hp == host);
    if (get_counters) {
        CHECK(counters().passthrough == c0.passthrough + 1);
        CHECK(counters().misses == c0.misses);
    }
    OK(clReleaseMemObject(m));
    /* Errors are the driver's: size 0 and bad flags are not pooled. */
    cl_int err = CL_SUCCESS;
    CHECK(clCreateBuffer(ctx, CL_MEM_READ_WRITE, 0, NULL, &err) == NULL);
    CHECK(err == CL_INVALID_BUFFER_SIZE);
    CHECK(clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, NULL, &err) == NULL);
    CHECK(err == CL_INVALID_VALUE);
}

/* Releasing a context empties its pools; a buffer the application still
 * holds keeps working and is freed on release. */
static void test_context_release(cl_device_id dev) {
    cl_int err = CL_SUCCESS;
    clpool_interpose_counters c0 = counters();
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    OK(err);
    cl_uint crefs = 0;
    OK(clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof crefs, &crefs, NULL));
    OK(clRetainContext(ctx));
    cl_uint crefs2 = 0;
    OK(clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof crefs2, &crefs2, NULL));
    CHECK(crefs2 == crefs + 1);
    OK(clReleaseContext(ctx));
    cl_mem cached = make(ctx, CL_MEM_READ_WRITE, 100000, NULL);
    OK(clReleaseMemObject(cached));
    OK(clFinish(q));
    cl_mem kept = make(ctx, CL_MEM_READ_WRITE, 5000, NULL);
    if (get_counters) {
        CHECK(counters().contexts_open == c0.contexts_open + 1);
        CHECK(counters().pools_open == c0.pools_open + 1);
        clpool_interpose_counters c = counters();  /* idle: cached, or pending until its bucket is next asked for */
        CHECK(c.bytes_cached + c.bytes_pending >= c0.bytes_cached + c0.bytes_pending + 100000);
    }
    OK(clReleaseContext(ctx));  /* the application's last reference */
    if (get_counters) {
        CHECK(counters().contexts_open == c0.contexts_open);
        CHECK(counters().pools_open == c0.pools_open);
        CHECK(counters().bytes_cached == c0.bytes_cached);
        CHECK(counters().bytes_pending == c0.bytes_pending);
    }
    unsigned char buf[5000];
    memset(buf, 1, sizeof buf);
    OK(clEnqueueWriteBuffer(q, kept, CL_TRUE, 0, sizeof buf, buf, 0, NULL, NULL));
    OK(clReleaseMemObject(kept));
    if (get_counters) CHECK(counters().live_buffers == c0.live_buffers);
    OK(clReleaseCommandQueue(q));
}

int main(void) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    if (open_device(&plat, &dev, &ctx, &q)) return 1;
    test_counts_and_queries(ctx);
    test_reuse_and_data(ctx, q);
    test_flags_are_separate_pools(ctx, q);
    test_flags_are_as_asked(ctx);
    test_image_copies_stop_at_asked_size(ctx, dev, q);
    test_reuse_waits_for_commands(ctx, dev, q);
    test_reuse_waits_for_released_queue(ctx, dev, q);
    test_sub_buffers(ctx, q);
    test_use_host_ptr_passes_through(ctx);
    test_context_release(dev);
    if (get_counters) {
        clpool_interpose_counters c = counters();
        printf("interposed: hits %llu misses %llu passthrough %llu\n", (unsigned long long)c.hits,
               (unsigned long long)c.misses, (unsigned long long)c.passthrough);
        CHECK(c.hits > 0);
    }
    /* Left alive on purpose: a cached pool and a live buffer at exit (no OpenCL call from exit). */
    cl_mem left = make(ctx, CL_MEM_READ_WRITE, 777, NULL);
    (void)left;
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
