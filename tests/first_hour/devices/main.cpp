// First hour, docs/DEVICES.md: list the devices, pick one by selector, scope it, and see a bad
// selector explained.
#include <clpool/clpool.hpp>

#include <iostream>
#include <string>

int main() {
    const auto devices = clpool::list_devices();
    for (const auto& d : devices)
        std::cout << "devices: " << d.index << " (" << d.platform_index << ':' << d.device_index << ") "
                  << clpool::to_string(d.type) << " '" << d.device_name << "' on '" << d.platform_name << "' ("
                  << d.platform_vendor << ")\n";
    bool ok = !devices.empty();

    const clpool::DeviceHandle& dev = clpool::default_device();  // CLPOOL_DEVICE, else auto
    ok = ok && dev.backend() == clpool::BackendKind::opencl && &dev == &clpool::select_device("0");
    {
        clpool::DeviceScope scope("host");
        ok = ok && clpool::current_device().backend() == clpool::BackendKind::host;
        auto h = clpool::current_device().host_buffer_pool().allocate(4096);
        ok = ok && h;
    }
    ok = ok && &clpool::current_device() == &dev;
    auto buf = dev.buffer_pool().allocate(1 << 20);
    ok = ok && buf && buf.bucket_size() == (1u << 20);

    // A vendor that is not here (docs/DEVICES.md's example) and a letter inside a word match nothing.
    for (const char* bad : {"amd", "x", ""}) {
        try {
            (void)clpool::select_device(bad);
            std::cerr << "devices: '" << bad << "' selected a device\n";
            ok = false;
        } catch (const clpool::config_error& e) {
            const std::string what = e.what();
            std::cout << "devices: '" << bad << "': " << what.substr(0, what.find('\n')) << '\n';
        }
    }
    std::cout << "devices: default " << dev.describe() << '\n';
    return ok ? 0 : 1;
}
