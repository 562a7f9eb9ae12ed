// The transfer calls: the driver sees the bucket, so each is checked here against the size the application asked.
#include "next.hpp"
#include "state.hpp"

namespace clpool::interpose::core {

// CL_INVALID_VALUE when [offset, offset + n) leaves a live pooled buffer's asked size.
static cl_int check_range(cl_mem m, size_t offset, size_t n) {
    State& st = state();
    std::lock_guard lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end() || it->second->parent || !alive(*it->second)) return CL_SUCCESS;
    const size_t size = it->second->size;
    return offset > size || n > size - offset ? CL_INVALID_VALUE : CL_SUCCESS;
}

cl_int enqueue_read_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, void* ptr,
                           cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueReadBuffer(q, m, blocking, offset, n, ptr, nwait, wait, event);
}

cl_int enqueue_write_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset, size_t n, const void* ptr,
                            cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueWriteBuffer(q, m, blocking, offset, n, ptr, nwait, wait, event);
}

cl_int enqueue_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_offset, size_t dst_offset, size_t n,
                           cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(src, src_offset, n)) return e;
    if (cl_int e = check_range(dst, dst_offset, n)) return e;
    return next().clEnqueueCopyBuffer(q, src, dst, src_offset, dst_offset, n, nwait, wait, event);
}

cl_int enqueue_fill_buffer(cl_command_queue q, cl_mem m, const void* pattern, size_t pattern_size, size_t offset,
                           size_t n, cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) return e;
    return next().clEnqueueFillBuffer(q, m, pattern, pattern_size, offset, n, nwait, wait, event);
}

void* enqueue_map_buffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags, size_t offset, size_t n,
                         cl_uint nwait, const cl_event* wait, cl_event* event, cl_int* err) {
    core_scope guard;
    if (cl_int e = check_range(m, offset, n)) {
        if (err) *err = e;
        return nullptr;
    }
    return next().clEnqueueMapBuffer(q, m, blocking, flags, offset, n, nwait, wait, event, err);
}

// Checks a rectangular region of a live pooled buffer against the asked size
// (*err = CL_INVALID_VALUE past it); returns m unchanged (the driver checks
// everything else, against the bucket).
static cl_mem rect_target(cl_mem m, const size_t* origin, const size_t* region, size_t row, size_t slice, cl_int* err) {
    State& st = state();
    std::lock_guard lock(st.mu);
    auto it = st.mems.find(m);
    if (it == st.mems.end() || it->second->parent || !alive(*it->second) || !origin || !region) return m;
    const MemRec& rec = *it->second;
    if (region[0] == 0 || region[1] == 0 || region[2] == 0) return m;  // the driver's error
    if (row == 0) row = region[0];
    if (slice == 0) slice = region[1] * row;
    const size_t first = origin[2] * slice + origin[1] * row + origin[0];
    const size_t extent = (region[2] - 1) * slice + (region[1] - 1) * row + region[0];
    if (first > rec.size || extent > rec.size - first) *err = CL_INVALID_VALUE;
    return m;
}

cl_int enqueue_read_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* bo, const size_t* ho,
                                const size_t* region, size_t brp, size_t bsp, size_t hrp, size_t hsp, void* ptr,
                                cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    m = rect_target(m, bo, region, brp, bsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueReadBufferRect(q, m, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait, event);
}

cl_int enqueue_write_buffer_rect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t* bo, const size_t* ho,
                                 const size_t* region, size_t brp, size_t bsp, size_t hrp, size_t hsp, const void* ptr,
                                 cl_uint nwait, const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    m = rect_target(m, bo, region, brp, bsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueWriteBufferRect(q, m, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait, event);
}

cl_int enqueue_copy_buffer_rect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t* so, const size_t* dO,
                                const size_t* region, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nwait,
                                const cl_event* wait, cl_event* event) {
    core_scope guard;
    cl_int err = CL_SUCCESS;
    src = rect_target(src, so, region, srp, ssp, &err);
    dst = rect_target(dst, dO, region, drp, dsp, &err);
    if (err != CL_SUCCESS) return err;
    return next().clEnqueueCopyBufferRect(q, src, dst, so, dO, region, srp, ssp, drp, dsp, nwait, wait, event);
}

// The bytes an image region covers; 0 when they cannot be known (the driver's error then).
static size_t image_region_bytes(cl_mem image, const size_t* region) {
    size_t element = 0;
    if (!region || clGetImageInfo(image, CL_IMAGE_ELEMENT_SIZE, sizeof element, &element, nullptr) != CL_SUCCESS)
        return 0;
    size_t n = element;
    for (int i = 0; i < 3; ++i)
        if (__builtin_mul_overflow(n, region[i], &n)) return 0;
    return n;
}

cl_int enqueue_copy_image_to_buffer(cl_command_queue q, cl_mem src_image, cl_mem dst, const size_t* src_origin,
                                    const size_t* region, size_t dst_offset, cl_uint nwait, const cl_event* wait,
                                    cl_event* event) {
    core_scope guard;
    if (const size_t n = image_region_bytes(src_image, region))
        if (cl_int e = check_range(dst, dst_offset, n)) return e;
    return next().clEnqueueCopyImageToBuffer(q, src_image, dst, src_origin, region, dst_offset, nwait, wait, event);
}

cl_int enqueue_copy_buffer_to_image(cl_command_queue q, cl_mem src, cl_mem dst_image, size_t src_offset,
                                    const size_t* dst_origin, const size_t* region, cl_uint nwait, const cl_event* wait,
                                    cl_event* event) {
    core_scope guard;
    if (const size_t n = image_region_bytes(dst_image, region))
        if (cl_int e = check_range(src, src_offset, n)) return e;
    return next().clEnqueueCopyBufferToImage(q, src, dst_image, src_offset, dst_origin, region, nwait, wait, event);
}

}  // namespace clpool::interpose::core
