/* A test-only OpenCL layer that makes the driver run out of memory: clCreateBuffer fails with
 * CL_MEM_OBJECT_ALLOCATION_FAILURE once the live buffers it made would pass FAKE_OOM_BYTES.
 * PoCL's CPU device never runs out (it does not enforce its global memory size), so the
 * interposer's out-of-memory answer is tested against this layer, below it in the stack. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl_layer.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct _cl_icd_dispatch table;
static const struct _cl_icd_dispatch* below;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t live_bytes, budget;

struct tracked {
    cl_mem mem;
    size_t size;
};
static struct tracked live[4096];
static int nlive;

/* A test's hook, run once by the first creation after a failure (the caller's retry), before
 * it reaches the driver: the moment after a pool gave its cache back. */
static void (*retry_hook)(void);
static int failed_once;
__attribute__((visibility("default"))) void fake_oom_set_hook(void (*hook)(void)) { retry_hook = hook; }

/* Two more, for tests that pause a thread inside the interposer at a chosen driver call:
 * release_hook runs once, at the next clReleaseMemObject (before it reaches the driver);
 * event_hook runs at every clGetEventInfo while set (it picks its own moment). */
static void (*release_hook)(void);
static void (*event_hook)(void);
__attribute__((visibility("default"))) void fake_oom_set_release_hook(void (*hook)(void)) {
    __atomic_store_n(&release_hook, hook, __ATOMIC_RELEASE);
}
__attribute__((visibility("default"))) void fake_oom_set_event_hook(void (*hook)(void)) {
    __atomic_store_n(&event_hook, hook, __ATOMIC_RELEASE);
}

static cl_mem CL_API_CALL fake_create_buffer(cl_context c, cl_mem_flags f, size_t n, void* h, cl_int* err) {
    pthread_mutex_lock(&lock);
    if (live_bytes + n > budget || nlive == 4096) {
        failed_once = 1;
        pthread_mutex_unlock(&lock);
        if (err) *err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
        return NULL;
    }
    if (failed_once && retry_hook) {
        void (*hook)(void) = retry_hook;
        retry_hook = NULL;  /* once; the hook's own creations come back here */
        pthread_mutex_unlock(&lock);
        hook();
        pthread_mutex_lock(&lock);
    }
    cl_mem m = below->clCreateBuffer(c, f, n, h, err);
    if (m) {
        live[nlive].mem = m;
        live[nlive].size = n;
        ++nlive;
        live_bytes += n;
    }
    pthread_mutex_unlock(&lock);
    return m;
}

static cl_int CL_API_CALL fake_release(cl_mem m) {
    void (*hook)(void) = __atomic_exchange_n(&release_hook, NULL, __ATOMIC_ACQ_REL);
    if (hook) hook();
    cl_uint refs = 0;
    below->clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    pthread_mutex_lock(&lock);
    if (refs == 1) {
        for (int i = 0; i < nlive; ++i)
            if (live[i].mem == m) {
                live_bytes -= live[i].size;
                live[i] = live[--nlive];
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    return below->clReleaseMemObject(m);
}

static cl_int CL_API_CALL fake_event_info(cl_event e, cl_event_info param, size_t size, void* value, size_t* size_ret) {
    void (*hook)(void) = __atomic_load_n(&event_hook, __ATOMIC_ACQUIRE);
    if (hook) hook();
    return below->clGetEventInfo(e, param, size, value, size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clGetLayerInfo(cl_layer_info param, size_t size, void* value, size_t* size_ret) {
    if (param != CL_LAYER_API_VERSION) return CL_INVALID_VALUE;
    cl_layer_api_version v = CL_LAYER_API_VERSION_100;
    if (value) {
        if (size < sizeof v) return CL_INVALID_VALUE;
        memcpy(value, &v, sizeof v);
    }
    if (size_ret) *size_ret = sizeof v;
    return CL_SUCCESS;
}

CL_API_ENTRY cl_int CL_API_CALL clInitLayer(cl_uint n, const struct _cl_icd_dispatch* target, cl_uint* n_ret,
                                            const struct _cl_icd_dispatch** layer) {
    const char* b = getenv("FAKE_OOM_BYTES");
    budget = b ? (size_t)strtoull(b, NULL, 10) : (size_t)-1;
    size_t entries = n < sizeof table / sizeof(void*) ? n : sizeof table / sizeof(void*);
    memcpy(&table, target, entries * sizeof(void*));
    below = target;
    table.clCreateBuffer = fake_create_buffer;
    table.clReleaseMemObject = fake_release;
    table.clGetEventInfo = fake_event_info;
    *layer = &table;
    *n_ret = (cl_uint)entries;
    return CL_SUCCESS;
}
