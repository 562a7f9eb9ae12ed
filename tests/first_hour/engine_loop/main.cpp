// First hour, docs/TRANSFERS.md: an engine loop. Each step uploads its input into a pooled buffer,
// runs a kernel on it, downloads the result and hands the buffer back with release_after.
#include <clpool/clpool.hpp>
#include <clpool/interop/transfer.hpp>

#include <cstdio>
#include <iostream>
#include <vector>

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    cl::Program program(context, "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }", true);
    cl::Kernel twice(program, "twice");
    auto& pool = clpool::get_buffer_pool(queue);  // the process-wide pool of this context

    int wrong = 0;
    for (int step = 0; step < 20; ++step) {
        const std::size_t n = 1000 + 37 * static_cast<std::size_t>(step);  // sizes vary, buckets repeat
        std::vector<float> in(n), out(n);
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i + step);

        auto buf = pool.allocate(n * sizeof(float));
        clpool::upload(queue, buf, 0, in.data(), n * sizeof(float));
        twice.setArg(0, buf.buffer());
        queue.enqueueNDRangeKernel(twice, cl::NullRange, cl::NDRange(n));
        clpool::download(queue, out.data(), buf, 0, n * sizeof(float)).wait();
        clpool::release_after(buf, queue);  // reused once the queue has run what it holds

        for (std::size_t i = 0; i < n; ++i) wrong += out[i] != 2.0f * in[i];
    }
    queue.finish();
    const clpool::PoolStats s = pool.stats();
    std::cout << "engine_loop: " << s << '\n';
    // How many steps hit depends on when each release's marker completed; after finish()
    // every one has: nothing is pending, and the next step's size is a hit.
    const auto hits = s.hits;
    const bool reused = pool.allocate(1000 * sizeof(float)) && pool.stats().hits == hits + 1;
    const bool ok = wrong == 0 && s.hits + s.misses == 20 && s.bytes_pending == 0 &&
                    s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending && reused;
    if (!ok) std::fprintf(stderr, "engine_loop: FAILED (%d wrong values, reused %d)\n", wrong, int(reused));
    return ok ? 0 : 1;
}
