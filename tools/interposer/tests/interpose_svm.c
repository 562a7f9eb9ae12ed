/* Shared virtual memory through the interposer: clSVMAlloc served by a pool, clSVMFree and
 * clEnqueueSVMFree handing pointers back, and what the driver keeps (fine-grained memory, large
 * alignments, pointers the interposer did not hand out). Passes plain too: without the interposer
 * only what OpenCL itself promises is checked. Needs coarse-grained SVM (PoCL 3.1 has it). */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "interpose_test.h"

static cl_context ctx;
static cl_command_queue queue;
static int interposed;

static int aligned(const void* p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* The pointer's first n bytes hold `byte` after a fill, read back through a map. */
static int holds(void* p, size_t n, unsigned char byte) {
    if (clEnqueueSVMMemFill(queue, p, &byte, 1, n, 0, NULL, NULL) != CL_SUCCESS) return 0;
    if (clEnqueueSVMMap(queue, CL_TRUE, CL_MAP_READ, p, n, 0, NULL, NULL) != CL_SUCCESS) return 0;
    int same = 1;
    for (size_t i = 0; i < n; ++i) same = same && ((unsigned char*)p)[i] == byte;
    if (clEnqueueSVMUnmap(queue, p, 0, NULL, NULL) != CL_SUCCESS) return 0;
    return clFinish(queue) == CL_SUCCESS && same;
}

/* clSVMFree: the application vouches that no command uses the pointer, so it serves again at once. */
static void test_reuse_after_free(void) {
    const clpool_interpose_svm_counters before = svm_counters();
    void* p = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 1000, 0);
    CHECK(p != NULL && aligned(p, 128));
    CHECK(holds(p, 1000, 0x5a));
    clSVMFree(ctx, p);
    void* again = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 1000, 0);
    CHECK(again != NULL && holds(again, 1000, 0xa5));
    const clpool_interpose_svm_counters after = svm_counters();
    if (interposed) {
        CHECK(again == p);
        CHECK(after.pooled == before.pooled + 2);
        CHECK(after.hits == before.hits + 1);
        CHECK(after.live == before.live + 1);
    }
    clSVMFree(ctx, again);
    CHECK(svm_counters().live == before.live);
    clSVMFree(ctx, NULL); /* a no-op */
    CHECK(svm_counters().driver_frees == before.driver_frees);
}

/* clEnqueueSVMFree frees in queue order: the pointer serves again only once the command has run. */
static void test_enqueued_free_waits_for_its_event(void) {
    cl_int err = CL_SUCCESS;
    void* p = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
    CHECK(p != NULL);
    cl_event gate = clCreateUserEvent(ctx, &err);
    OK(err);
    cl_event freed = NULL;
    OK(clEnqueueSVMFree(queue, 1, &p, NULL, NULL, 1, &gate, &freed));
    OK(clFlush(queue));
    void* during = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
    CHECK(during != NULL && during != p); /* p is not free yet: its command waits for the gate */
    cl_int status = 0;
    OK(clGetEventInfo(freed, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL));
    CHECK(status != CL_COMPLETE);
    cl_command_type type = 0;
    OK(clGetEventInfo(freed, CL_EVENT_COMMAND_TYPE, sizeof type, &type, NULL));
    CHECK(type == CL_COMMAND_SVM_FREE);
    OK(clSetUserEventStatus(gate, CL_COMPLETE));
    OK(clWaitForEvents(1, &freed));
    void* after = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
    CHECK(after != NULL && holds(after, 4096, 1));
    if (interposed) CHECK(after == p);
    clSVMFree(ctx, during);
    clSVMFree(ctx, after);
    OK(clReleaseEvent(freed));
    OK(clReleaseEvent(gate));
}

/* A pointer the driver hands out itself, with the interposer or without: fine-grained memory. */
static void* drivers_own(size_t n) { return clSVMAlloc(ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, n, 0); }

/* A mix: the interposer's pointer and the driver's, freed by one clEnqueueSVMFree without a
 * callback. The driver frees its own (and only those). */
static void test_enqueued_free_mixed(void) {
    const clpool_interpose_svm_counters before = svm_counters();
    void* ptrs[2] = {clSVMAlloc(ctx, CL_MEM_READ_WRITE, 2048, 0), drivers_own(2048)};
    CHECK(ptrs[0] != NULL && ptrs[1] != NULL);
    OK(clEnqueueSVMFree(queue, 2, ptrs, NULL, NULL, 0, NULL, NULL));
    OK(clFinish(queue));
    const clpool_interpose_svm_counters after = svm_counters();
    if (interposed) {
        CHECK(after.passthrough == before.passthrough + 1);
        CHECK(after.driver_frees == before.driver_frees + 1);
        CHECK(after.live == before.live);
    }
    void* again = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 2048, 0);
    CHECK(again != NULL);
    if (interposed) CHECK(again == ptrs[0]);
    clSVMFree(ctx, again);
}

struct freed_by_app {
    cl_command_queue queue;
    cl_uint n;
    void* ptrs[3];
    int calls;
};

static void CL_CALLBACK free_them(cl_command_queue q, cl_uint n, void* ptrs[], void* user_data) {
    struct freed_by_app* r = (struct freed_by_app*)user_data;
    r->queue = q;
    r->n = n;
    for (cl_uint i = 0; i < n && i < 3; ++i) r->ptrs[i] = ptrs[i];
    ++r->calls;
    for (cl_uint i = 0; i < n; ++i) clSVMFree(ctx, ptrs[i]); /* the driver frees none of them */
}

/* With pfn_free_func the application frees the pointers itself, in the callback, which gets the
 * queue, the pointers and user_data as the driver gives them. */
static void test_enqueued_free_callback(void) {
    const clpool_interpose_svm_counters before = svm_counters();
    void* ptrs[3] = {clSVMAlloc(ctx, CL_MEM_READ_WRITE, 3000, 0), clSVMAlloc(ctx, CL_MEM_READ_ONLY, 300, 64),
                     drivers_own(3000)};
    CHECK(ptrs[0] != NULL && ptrs[1] != NULL && ptrs[2] != NULL);
    struct freed_by_app rec;
    memset(&rec, 0, sizeof rec);
    cl_event done = NULL;
    OK(clEnqueueSVMFree(queue, 3, ptrs, free_them, &rec, 0, NULL, &done));
    OK(clWaitForEvents(1, &done));
    OK(clFinish(queue));
    CHECK(rec.calls == 1);
    CHECK(rec.queue == queue);
    CHECK(rec.n == 3);
    CHECK(rec.ptrs[0] == ptrs[0] && rec.ptrs[1] == ptrs[1] && rec.ptrs[2] == ptrs[2]);
    const clpool_interpose_svm_counters after = svm_counters();
    if (interposed) {
        CHECK(after.live == before.live);                   /* its clSVMFree calls reached the pools */
        CHECK(after.driver_frees == before.driver_frees + 1); /* and the driver's pointer the driver */
    }
    void* again = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 3000, 0);
    CHECK(again != NULL);
    if (interposed) CHECK(again == ptrs[0]);
    clSVMFree(ctx, again);
    OK(clReleaseEvent(done));
}

/* Every alignment asked for is honoured; one above the largest the driver supports (PoCL's is its
 * 128-byte base-address alignment) is refused (NULL) as without the interposer, which passes it on. */
static void test_alignment(void) {
    static const cl_uint alignments[] = {0, 8, 16, 64, 128, 256, 4096, 1u << 16, 1u << 21};
    enum { count = sizeof alignments / sizeof alignments[0] };
    void* held[count];
    int refused[count];
    for (size_t round = 0; round < 2; ++round) { /* the second round from the pool's cache */
        for (size_t i = 0; i < count; ++i) {
            const cl_uint a = alignments[i];
            held[i] = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 5000, a);
            if (a <= 128) CHECK(held[i] != NULL); /* what every OpenCL C type needs is always given */
            if (round == 0) refused[i] = held[i] == NULL;
            else CHECK(refused[i] == (held[i] == NULL));
            if (held[i]) CHECK(aligned(held[i], a ? a : 128));
        }
        for (size_t i = 0; i < count; ++i) clSVMFree(ctx, held[i]);
    }
    CHECK(clSVMAlloc(ctx, CL_MEM_READ_WRITE, 5000, 3) == NULL); /* not a power of two */
    /* A pooled allocation freed, then asked for with a larger alignment than the pool's. */
    void* p = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 100, 0);
    clSVMFree(ctx, p);
    void* q = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 100, 1u << 20);
    CHECK(q == NULL || aligned(q, 1u << 20));
    clSVMFree(ctx, q);
}

/* Fine-grained memory is the driver's: the host uses it without a map. */
static void test_fine_grained_passthrough(cl_bitfield caps) {
    const clpool_interpose_svm_counters before = svm_counters();
    int* p = (int*)clSVMAlloc(ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, 4096, 0);
    CHECK(p != NULL);
    if (p) {
        for (int i = 0; i < 1024; ++i) p[i] = i;
        int back[1024];
        OK(clEnqueueSVMMemcpy(queue, CL_TRUE, back, p, sizeof back, 0, NULL, NULL));
        CHECK(back[1000] == 1000);
    }
    int* atomic = NULL;
    if (caps & CL_DEVICE_SVM_ATOMICS) {
        atomic = (int*)clSVMAlloc(ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS, 64, 0);
        CHECK(atomic != NULL);
    }
    clpool_interpose_svm_counters mid = svm_counters();
    if (interposed) {
        CHECK(mid.pooled == before.pooled);
        CHECK(mid.passthrough == before.passthrough + 1 + (atomic != NULL));
    }
    clSVMFree(ctx, p);
    clSVMFree(ctx, atomic);
    mid = svm_counters();
    if (interposed) CHECK(mid.driver_frees == before.driver_frees + 1 + (atomic != NULL));
}

/* A pointer the interposer did not hand out goes to the driver's clSVMFree; the pools are untouched. */
static void test_unknown_pointer_passthrough(void) {
    void* mine = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 512, 0);
    const clpool_interpose_svm_counters before = svm_counters();
    void* theirs = drivers_own(512);
    CHECK(theirs != NULL && holds(theirs, 512, 7));
    clSVMFree(ctx, theirs);
    const clpool_interpose_svm_counters after = svm_counters();
    if (interposed) {
        CHECK(after.passthrough == before.passthrough + 1);
        CHECK(after.driver_frees == before.driver_frees + 1);
        CHECK(after.live == before.live && after.pooled == before.pooled);
    }
    CHECK(holds(mine, 512, 9)); /* still the application's */
    /* A pointer inside a pooled allocation is not one clSVMAlloc returned: OpenCL does not allow
     * freeing it (PoCL ignores it). It goes to the driver, and the allocation stays the application's. */
    clSVMFree(ctx, (char*)mine + 256);
    if (interposed) {
        const clpool_interpose_svm_counters inside = svm_counters();
        CHECK(inside.driver_frees == after.driver_frees + 1);
        CHECK(inside.live == after.live);
    }
    CHECK(holds(mine, 512, 11));
    clSVMFree(ctx, mine);
    void* again = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 512, 0);
    if (interposed) CHECK(again == mine);
    clSVMFree(ctx, again);
}

/* Threads allocating and freeing (clSVMFree, and clEnqueueSVMFree on their own queues) at once:
 * no pointer is ever held by two of them. */
enum { churn_threads = 4, churn_rounds = 400, churn_slots = 8 };
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static void* live[churn_threads * churn_slots];
static cl_device_id device;

static int take(void* p) { /* 1 if p was not held by anyone */
    int fresh = 1;
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < sizeof live / sizeof live[0]; ++i) fresh = fresh && live[i] != p;
    for (size_t i = 0; i < sizeof live / sizeof live[0] && fresh; ++i)
        if (!live[i]) {
            live[i] = p;
            break;
        }
    pthread_mutex_unlock(&live_mu);
    return fresh;
}

static void give(void* p) {
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < sizeof live / sizeof live[0]; ++i)
        if (live[i] == p) live[i] = NULL;
    pthread_mutex_unlock(&live_mu);
}

static void* churn(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    void* mine[churn_slots] = {0};
    int bad = 0;
    for (int r = 0; r < churn_rounds && q; ++r) {
        seed = seed * 1103515245u + 12345u;
        const int slot = (int)((seed >> 8) % churn_slots);
        if (mine[slot]) {
            give(mine[slot]); /* before the free: another thread may get it at once */
            if (seed & 0x10000u) {
                OK(clEnqueueSVMFree(q, 1, &mine[slot], NULL, NULL, 0, NULL, NULL));
            } else {
                clSVMFree(ctx, mine[slot]);
            }
            mine[slot] = NULL;
        } else {
            mine[slot] = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 64u << ((seed >> 12) % 10), 0);
            bad += mine[slot] == NULL || !take(mine[slot]);
        }
    }
    for (int i = 0; i < churn_slots; ++i)
        if (mine[i]) {
            give(mine[i]);
            clSVMFree(ctx, mine[i]);
        }
    if (q) {
        OK(clFinish(q));
        OK(clReleaseCommandQueue(q));
    }
    CHECK(q != NULL);
    CHECK(bad == 0);
    return NULL;
}

static void test_threads(void) {
    pthread_t t[churn_threads];
    for (uintptr_t i = 0; i < churn_threads; ++i) CHECK(pthread_create(&t[i], NULL, churn, (void*)i) == 0);
    for (int i = 0; i < churn_threads; ++i) pthread_join(t[i], NULL);
}

static cl_context closing;
static void CL_CALLBACK free_in_closing(cl_command_queue q, cl_uint n, void* ptrs[], void* user_data) {
    (void)q;
    (void)user_data;
    for (cl_uint i = 0; i < n; ++i) clSVMFree(closing, ptrs[i]);
}

/* The context released right after two frees are queued: the first's callback frees through the
 * interposer, and the second waits for it on the in-order queue. Releasing the context must not
 * wait for the second while holding what the first's callback needs (the alarm makes a hang fail). */
static void test_release_context_with_frees_queued(cl_device_id dev) {
    cl_int err = CL_SUCCESS;
    closing = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    OK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(closing, dev, NULL, &err);
    OK(err);
    void* first[2] = {clSVMAlloc(closing, CL_MEM_READ_WRITE, 1 << 20, 0),
                      clSVMAlloc(closing, CL_MEM_READ_WRITE, 4096, 0)};
    void* second = clSVMAlloc(closing, CL_MEM_READ_WRITE, 1 << 20, 0);
    CHECK(first[0] && first[1] && second);
    alarm(60);
    OK(clEnqueueSVMFree(q, 2, first, free_in_closing, NULL, 0, NULL, NULL));
    OK(clEnqueueSVMFree(q, 1, &second, NULL, NULL, 0, NULL, NULL));
    OK(clReleaseContext(closing));
    OK(clFinish(q));
    OK(clReleaseCommandQueue(q));
    alarm(0);
}

int main(void) {
    cl_platform_id plat;
    cl_device_id dev;
    if (open_device(&plat, &dev, &ctx, &queue)) return 1;
    interposed = get_counters != NULL;
    if (interposed && !get_svm_counters) {
        fprintf(stderr, "the interposer has no clpool_interpose_get_svm_counters: it does not pool SVM\n");
        return 1;
    }
    cl_bitfield caps = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) != CL_SUCCESS ||
        !(caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) || !(caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER)) {
        fprintf(stderr, "the device has no coarse- and fine-grained SVM buffers (OpenCL 2.0); this test needs both\n");
        return 1;
    }
    test_reuse_after_free();
    test_enqueued_free_waits_for_its_event();
    test_enqueued_free_mixed();
    test_enqueued_free_callback();
    test_alignment();
    test_fine_grained_passthrough(caps);
    test_unknown_pointer_passthrough();
    device = dev;
    test_threads();
    test_release_context_with_frees_queued(dev);
    if (interposed) CHECK(svm_counters().live == 0);
    OK(clReleaseCommandQueue(queue));
    OK(clReleaseContext(ctx));
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("interpose_svm: all checks passed%s\n", interposed ? " (through the interposer)" : "");
    return failures != 0;
}
