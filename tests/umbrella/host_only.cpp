// A host-only program: includes the umbrella header with the OpenCL headers in sight (so the
// OpenCL parts are compiled in) but is linked without libOpenCL (tests/CMakeLists.txt, target
// clpool_host_only). It must link, and a host pool must allocate and release.
#include <clpool/clpool.hpp>

#ifndef CLPOOL_HAS_OPENCL
#error "the OpenCL headers should be visible here: this test checks that seeing them costs no -lOpenCL"
#endif

#include <cstdio>

int main() {
    clpool::host::BufferPool pool{clpool::HostBackend{}};
    {
        auto h = pool.allocate(1000);
        if (!h || h.nbytes() != 1000) {
            std::puts("host_only: allocate failed");
            return 1;
        }
    }  // released

    auto again = pool.allocate(1000);  // served from the cache
    const auto s = pool.stats();
    if (!again || s.hits != 1 || s.misses != 1) {
        std::puts("host_only: the released buffer was not reused");
        return 1;
    }
    std::puts("host_only: linked without libOpenCL; allocate, release and reuse work");
    return 0;
}
