// clpool 0.1's docs/TRANSFERS.md: upload/download through <clpool/transfer.hpp>, a
// pinned_vector from <clpool/pinned_allocator.hpp>, and a null host pointer caught as the
// std::invalid_argument 0.1 documented.
#include <clpool/pinned_allocator.hpp>
#include <clpool/registry.hpp>
#include <clpool/transfer.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    const std::size_t n = 1 << 20;
    clpool::pinned_vector<float> in(n / sizeof(float), 1.5f, clpool::PinnedAllocator<float>(queue));
    std::vector<float> out(n / sizeof(float));

    auto dev = clpool::get_buffer_pool(queue).allocate(n);
    cl::Event e = clpool::upload(queue, dev, /*dst_offset*/ 0, in.data(), n);
    clpool::download(queue, out.data(), dev, /*src_offset*/ 0, n).wait();
    (void)e;
    if (out[0] != 1.5f || out.back() != 1.5f) return 1;

    try {
        clpool::upload(queue, dev, 0, nullptr, n);
        std::puts("transfers: a null host pointer was accepted");
        return 2;
    } catch (const std::invalid_argument& error) {
        std::printf("transfers: ok (%s)\n", error.what());
    }
    return 0;
}
