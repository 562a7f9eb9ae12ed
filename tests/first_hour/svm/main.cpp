// First hour, docs/SVM.md: the SVM arena and the buffer arena with offset handles, in an engine
// loop whose sizes change every step. Exits non-zero on a wrong result or a driver call per block.
#include <clpool/clpool.hpp>

#include <iostream>
#include <vector>

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    cl::Program program(context,
                        "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }\n"
                        "__kernel void twice_at(__global float* x, ulong first) { x[first + get_global_id(0)] *= "
                        "2.0f; }",
                        true);
    cl::Kernel twice(program, "twice");
    cl::Kernel twice_at(program, "twice_at");

    clpool::SVMArenaPool svm(context);      // config_error if the device has no coarse-grained SVM
    clpool::OffsetArenaPool offsets(context);
    int wrong = 0;
    for (int step = 0; step < 20; ++step) {
        const std::size_t n = 1000 + 37 * static_cast<std::size_t>(step);
        std::vector<float> in(n), out(n);
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i + step);

        auto a = svm.allocate(n * sizeof(float));
        clpool::upload(queue, a, 0, in.data(), n * sizeof(float));
        clpool::set_kernel_arg(twice, 0, a);  // clSetKernelArgSVMPointer
        queue.enqueueNDRangeKernel(twice, cl::NullRange, cl::NDRange(n));
        clpool::download(queue, out.data(), a, 0, n * sizeof(float)).wait();
        clpool::release_after(a, queue);
        for (std::size_t i = 0; i < n; ++i) wrong += out[i] != 2.0f * in[i];

        auto b = offsets.allocate(n * sizeof(float));
        clpool::upload(queue, b, 0, in.data(), n * sizeof(float));
        twice_at.setArg(0, b.buffer().segment());
        twice_at.setArg(1, cl_ulong(b.buffer().offset() / sizeof(float)));
        queue.enqueueNDRangeKernel(twice_at, cl::NullRange, cl::NDRange(n));
        clpool::download(queue, out.data(), b, 0, n * sizeof(float)).wait();
        clpool::release_after(b, queue);
        for (std::size_t i = 0; i < n; ++i) wrong += out[i] != 2.0f * in[i];
    }
    const auto s = svm.stats();
    const auto o = offsets.stats();
    std::cout << "svm: " << s.segment_allocations << " segment(s) for 20 steps; offsets: " << o.segment_allocations
              << " segment(s), " << o.sub_buffers_made << " sub-buffers made; " << wrong << " wrong\n";
    return wrong == 0 && s.sub_buffers_made == 0 && o.sub_buffers_made == 0 && s.segment_allocations <= 2 &&
                   o.segment_allocations <= 2
               ? 0
               : 1;
}
