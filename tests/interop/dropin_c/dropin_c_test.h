/* What the drop-in C pair's test programs share: tests/c_test.h's CHECK, OK and device, and
 * two checks of a pooled buffer. */
#ifndef CLPOOL_DROPIN_C_TEST_H
#define CLPOOL_DROPIN_C_TEST_H

#include "../../c_test.h"

/* The bucket a pooled buffer is a view of; NULL for a buffer of the driver's own. */
static inline cl_mem bucket_of(cl_mem m) {
    cl_mem parent = NULL;
    if (clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) != CL_SUCCESS) return NULL;
    return parent;
}

/* Writes `n` bytes to `m` on `q` and reads them back: 1 if they came back. */
static inline int round_trip(cl_command_queue q, cl_mem m, size_t n) {
    unsigned char in[256], out[256];
    if (n > sizeof in) n = sizeof in;
    for (size_t i = 0; i < n; ++i) in[i] = (unsigned char)(i * 7 + 1);
    if (clEnqueueWriteBuffer(q, m, CL_TRUE, 0, n, in, 0, NULL, NULL) != CL_SUCCESS) return 0;
    if (clEnqueueReadBuffer(q, m, CL_TRUE, 0, n, out, 0, NULL, NULL) != CL_SUCCESS) return 0;
    for (size_t i = 0; i < n; ++i)
        if (in[i] != out[i]) return 0;
    return 1;
}

#endif
