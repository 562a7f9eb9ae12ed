// clpool 0.1's README quick start, as it was.
#include <clpool/clpool.hpp>

#include <iostream>

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);  // any OpenCL context
    cl::CommandQueue queue(context);

    clpool::BufferPool pool(context);
    {
        auto h = pool.allocate(1 << 20);  // a miss: creates and commits a 1 MiB buffer
        queue.enqueueFillBuffer(h.buffer(), 0.0f, 0, h.nbytes());
        queue.finish();
    }  // the handle goes back to the pool, not the driver
    auto again = pool.allocate(1000000);  // same 1 MiB bucket: a hit, no driver call
    std::cout << pool.stats() << '\n';    // hits=1 misses=1 hit_rate=0.5 ...

    // Process-wide pools, one per context, created on first use:
    auto staging = clpool::get_pinned_pool(queue).allocate(64 << 10);

    // Use it from CMake with find_package(clpool CONFIG) or add_subdirectory, then
    // target_link_libraries(app PRIVATE clpool::clpool).
    return pool.stats().hits == 1 && staging ? 0 : 1;
}
