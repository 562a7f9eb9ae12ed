// clpool 0.1's README: "Any other combination is one `using` away", through the single
// headers 0.1's README named (<clpool/pool.hpp> brought the policies then).
#include <clpool/opencl.hpp>
#include <clpool/pool.hpp>
#include <clpool/registry.hpp>

#include <cstdio>

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    using MyPool = clpool::Pool<clpool::FixedSetBuckets, clpool::DeviceLocal, clpool::Capped, clpool::Striped<16>,
                                clpool::OpenCLBackend>;
    MyPool pool(clpool::OpenCLBackend(context), clpool::Capped(1ull << 30, 8));
    {
        auto h = pool.allocate(4096);
        clpool::release_after(h, queue);  // <clpool/opencl.hpp>
    }
    auto& shared = clpool::get_buffer_pool(queue);  // <clpool/registry.hpp>
    auto h = shared.allocate(1 << 16);
    std::printf("custom_pool: %s\n", h ? "ok" : "empty handle");
    return h ? 0 : 1;
}
