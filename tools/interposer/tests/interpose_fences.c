/* When a released buffer may be reused: at once behind a context's only in-order queue, and
 * behind a fence once that stops holding (a second queue, the queue's release, out-of-order
 * mode). Each case holds the old owner's write back with a user event and checks, after the
 * event is set, that the new owner's data is what the buffer holds: a reuse the interposer did
 * not order would let the old write land last. Links only -lOpenCL; run plain (every check holds
 * on a plain driver) and with the interposer (CLPOOL_INTERPOSER=<path>: also the hit counts). */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <time.h>

#include "interpose_test.h"

static cl_device_id dev;
enum { N = 32768 };
static unsigned char A[N], B[N], back[N];

static cl_mem make(cl_context ctx, cl_mem_flags flags, void* host) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(ctx, flags, N, host, &err);
    CHECK(err == CL_SUCCESS && m != NULL);
    return m;
}
static cl_command_queue queue(cl_context ctx, cl_command_queue_properties props) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(ctx, dev, props, &err);
    if (err != CL_SUCCESS) fprintf(stderr, "clCreateCommandQueue(props 0x%llx): %d\n", (unsigned long long)props, err);
    CHECK(err == CL_SUCCESS && q != NULL);
    return q;
}
static cl_context context(void) {
    cl_int err = CL_SUCCESS;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK(err == CL_SUCCESS);
    return ctx;
}
static cl_event gate_of(cl_context ctx) {
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(ctx, &err);
    CHECK(err == CL_SUCCESS);
    return gate;
}
/* The old owner: a write of A held back by the gate, then the release. */
static cl_mem old_owner(cl_context ctx, cl_command_queue q, cl_event gate) {
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    OK(clEnqueueWriteBuffer(q, m, CL_FALSE, 0, N, A, 1, &gate, NULL));
    OK(clFlush(q));
    OK(clReleaseMemObject(m));
    return m;  /* the handle value only, to compare */
}
/* After the gate is set and every queue finished: m holds `want`. */
static int holds(cl_command_queue q, cl_mem m, const unsigned char* want) {
    memset(back, 0, N);
    OK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, N, back, 0, NULL, NULL));
    return memcmp(back, want, N) == 0;
}
static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}
/* After a pause that lets any command free to run do so: e has not completed. */
static int still_held(cl_event e) {
    sleep_ms(20);
    cl_int status = CL_QUEUED;
    OK(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL));
    return status != CL_COMPLETE;
}

/* (1) One in-order queue: the release needs no fence, the next creation of the size reuses the
 * bucket at once although the old write still waits, and the queue orders the new owner's
 * write after it. */
static void test_lone_queue_reuses_at_once(void) {
    cl_context ctx = context();
    cl_command_queue q = queue(ctx, 0);
    cl_event gate = gate_of(ctx);
    cl_mem old = old_owner(ctx, q, gate);
    clpool_interpose_counters c0 = counters();
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    if (get_counters) {
        CHECK(m == old);  /* the bucket is the handle: the held buffer itself */
        CHECK(counters().hits == c0.hits + 1);
        CHECK(counters().misses == c0.misses);
        CHECK(counters().bytes_pending == c0.bytes_pending);  /* no marker to wait for */
    }
    cl_event read_done = NULL;
    OK(clEnqueueWriteBuffer(q, m, CL_FALSE, 0, N, B, 0, NULL, NULL));
    OK(clEnqueueReadBuffer(q, m, CL_FALSE, 0, N, back, 0, NULL, &read_done));
    OK(clFlush(q));
    CHECK(still_held(read_done));  /* in order: behind the held write */
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &read_done));
    CHECK(memcmp(back, B, N) == 0);
    CHECK(holds(q, m, B));
    OK(clReleaseMemObject(m));

    /* COPY_HOST_PTR: the core writes the data on a queue of its own, which must not overtake
     * the old owner's held write: the new buffer holds the copied data once the gate is set. */
    cl_event gate2 = gate_of(ctx);
    (void)old_owner(ctx, q, gate2);
    cl_mem c = make(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, B);
    OK(clSetUserEventStatus(gate2, CL_COMPLETE));
    OK(clFinish(q));
    CHECK(holds(q, c, B));
    OK(clReleaseMemObject(c));
    OK(clReleaseEvent(read_done));
    OK(clReleaseEvent(gate));
    OK(clReleaseEvent(gate2));
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
}

/* (2) A second queue made after the release: the held buffer is not handed out for it while
 * the old write waits (the new queue is not held back: a blocking write there returns). */
static void test_second_queue_fences_cached(void) {
    cl_context ctx = context();
    cl_command_queue q1 = queue(ctx, 0);
    cl_event gate = gate_of(ctx);
    cl_mem old = old_owner(ctx, q1, gate);
    cl_command_queue q2 = queue(ctx, 0);
    clpool_interpose_counters c0 = counters();
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    CHECK(m != old);
    if (get_counters) {
        CHECK(counters().misses == c0.misses + 1);
        CHECK(counters().hits == c0.hits);  /* taken from the cache, sent back to its fence: no hit */
    }
    OK(clEnqueueWriteBuffer(q2, m, CL_TRUE, 0, N, B, 0, NULL, NULL));
    CHECK(holds(q2, m, B));
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q1));
    CHECK(holds(q2, m, B));
    OK(clReleaseMemObject(m));
    OK(clReleaseEvent(gate));
    OK(clReleaseCommandQueue(q2));
    OK(clReleaseCommandQueue(q1));
    OK(clReleaseContext(ctx));
}

/* (2b) The reuse happened while the queue was alone, then a second queue comes: the new owner
 * may use it there, so the new queue starts behind the old queue's work. */
static void test_second_queue_after_reuse(void) {
    cl_context ctx = context();
    cl_command_queue q1 = queue(ctx, 0);
    cl_event gate = gate_of(ctx);
    (void)old_owner(ctx, q1, gate);
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);  /* the held bucket, when interposed */
    cl_command_queue q2 = queue(ctx, 0);
    cl_event wrote = NULL;
    OK(clEnqueueWriteBuffer(q2, m, CL_FALSE, 0, N, B, 0, NULL, &wrote));
    OK(clFlush(q2));
    if (get_counters) CHECK(still_held(wrote));  /* q2 starts behind q1's work (a plain driver need not) */
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &wrote));
    OK(clFinish(q1));
    CHECK(holds(q2, m, B));  /* the old write of A landed first */
    OK(clReleaseMemObject(m));
    OK(clReleaseEvent(wrote));
    OK(clReleaseEvent(gate));
    OK(clReleaseCommandQueue(q2));
    OK(clReleaseCommandQueue(q1));
    OK(clReleaseContext(ctx));
}

/* (2c) The lone queue released by the application, then another queue: its retired marker
 * fences both the cached buffer and one reissued before. */
static void test_lone_queue_released(void) {
    cl_context ctx = context();
    cl_command_queue q1 = queue(ctx, 0);
    cl_event gate = gate_of(ctx);
    cl_mem old = old_owner(ctx, q1, gate);
    cl_event gate2 = gate_of(ctx);
    (void)old_owner(ctx, q1, gate2);
    cl_mem reissued = make(ctx, CL_MEM_READ_WRITE, NULL);  /* the second held bucket, when interposed */
    OK(clReleaseCommandQueue(q1));
    cl_command_queue q2 = queue(ctx, 0);
    OK(clSetUserEventStatus(gate2, CL_COMPLETE));  /* q1 stays held by the first gate */
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    CHECK(m != old);
    cl_event wrote = NULL;
    OK(clEnqueueWriteBuffer(q2, reissued, CL_FALSE, 0, N, B, 0, NULL, &wrote));
    OK(clFlush(q2));
    if (get_counters) CHECK(still_held(wrote));  /* q2 starts behind the released q1's work */
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &wrote));
    OK(clEnqueueWriteBuffer(q2, m, CL_TRUE, 0, N, B, 0, NULL, NULL));
    CHECK(holds(q2, reissued, B));
    CHECK(holds(q2, m, B));
    OK(clReleaseMemObject(m));
    OK(clReleaseMemObject(reissued));
    OK(clReleaseEvent(wrote));
    OK(clReleaseEvent(gate));
    OK(clReleaseEvent(gate2));
    OK(clReleaseCommandQueue(q2));
    OK(clReleaseContext(ctx));
}

/* (3) An out-of-order queue: every release waits for a marker, as before. */
static void test_out_of_order_queue(void) {
    cl_context ctx = context();
    cl_command_queue q = queue(ctx, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    if (!q) return;
    cl_event gate = gate_of(ctx);
    cl_mem old = old_owner(ctx, q, gate);
    clpool_interpose_counters c0 = counters();
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    CHECK(m != old);
    if (get_counters) {
        CHECK(counters().misses == c0.misses + 1);
        CHECK(counters().hits == c0.hits);
        CHECK(counters().bytes_pending >= N);  /* the held buffer waits for its marker */
    }
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q));
    OK(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, N, B, 0, NULL, NULL));
    CHECK(holds(q, m, B));
    OK(clReleaseMemObject(m));
    OK(clReleaseEvent(gate));
    OK(clReleaseCommandQueue(q));
    OK(clReleaseContext(ctx));
}

/* clFinish on the lone queue: what was released before needs nothing more, even when a
 * second queue comes next while the first is held again (the cached buffer is reused at once,
 * not sent to wait for a marker behind the new hold). */
static void test_finish_covers_releases(void) {
    cl_context ctx = context();
    cl_command_queue q1 = queue(ctx, 0);
    cl_event gate = gate_of(ctx);
    cl_mem old = old_owner(ctx, q1, gate);
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clFinish(q1));
    cl_event hold = gate_of(ctx);
    static unsigned char byte;
    cl_mem other = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, NULL);
    OK(clEnqueueWriteBuffer(q1, other, CL_FALSE, 0, 1, &byte, 1, &hold, NULL));
    OK(clFlush(q1));
    cl_command_queue q2 = queue(ctx, 0);
    clpool_interpose_counters c0 = counters();
    cl_mem m = make(ctx, CL_MEM_READ_WRITE, NULL);
    if (get_counters) {
        CHECK(m == old);
        CHECK(counters().hits == c0.hits + 1);
    }
    OK(clEnqueueWriteBuffer(q2, m, CL_TRUE, 0, N, B, 0, NULL, NULL));
    CHECK(holds(q2, m, B));
    OK(clSetUserEventStatus(hold, CL_COMPLETE));
    OK(clFinish(q1));
    OK(clReleaseMemObject(m));
    OK(clReleaseMemObject(other));
    OK(clReleaseEvent(hold));
    OK(clReleaseEvent(gate));
    OK(clReleaseCommandQueue(q2));
    OK(clReleaseCommandQueue(q1));
    OK(clReleaseContext(ctx));
}

int main(void) {
    cl_platform_id plat = NULL;
    if (pick_device(&plat, &dev)) return 1;
    if (find_interposer()) return 1;
    memset(A, 0xAA, N);
    memset(B, 0xBB, N);
    test_lone_queue_reuses_at_once();
    test_second_queue_fences_cached();
    test_second_queue_after_reuse();
    test_lone_queue_released();
    test_out_of_order_queue();
    test_finish_covers_releases();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed (%s)\n", get_counters ? "interposed" : "plain driver");
    return 0;
}
