// A downstream program: the host pool always, the OpenCL pool where OpenCL is built in.
#include <clpool/clpool.hpp>

#include <iostream>

int main() {
    clpool::host::BufferPool host_pool{clpool::HostBackend{}};
    host_pool.allocate(4096).release();
    const bool host_ok = host_pool.allocate(3000).bucket_size() == 4096 && host_pool.stats().hits == 1;
#ifdef CLPOOL_HAS_OPENCL
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    clpool::BufferPool pool(context);
    pool.allocate(1000).release();
    const bool cl_ok = pool.allocate(1000) && pool.stats().hits == 1;
#else
    const bool cl_ok = true;
#endif
    std::cout << "consumer: host " << host_ok << " opencl " << cl_ok << '\n';
    return host_ok && cl_ok ? 0 : 1;
}
