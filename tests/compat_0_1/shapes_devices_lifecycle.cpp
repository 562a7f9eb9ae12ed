// clpool 0.1's docs/SHAPES.md and docs/DEVICES.md, through the headers they named:
// element_type and order, device_scope, backend_kind, device_type, device_facts,
// wait_options and wait_status, interrupt_handler_options, shutdown_report.
#include <clpool/device.hpp>
#include <clpool/lifecycle.hpp>
#include <clpool/shape_trie.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
    clpool::ShapeTrie& trie = clpool::ShapeTrie::global();
    clpool::Shape a = trie.intern({2, 3, 4}, clpool::element_type::f32);
    std::vector<std::int64_t> extents{4, 3}, strides{1, 4};
    clpool::Shape b = trie.intern(extents, strides, clpool::element_type::f16, clpool::order::f);
    if (!(a == trie.intern({2, 3, 4}, clpool::element_type::f32)) || b.rank() != 2) return 1;

    const clpool::DeviceHandle& dev = clpool::default_device();
    {
        clpool::device_scope scope("host");  // this thread's current device until the block ends
        if (clpool::current_device().backend() != clpool::backend_kind::host) return 2;
    }
    const clpool::device_type type = dev.type();
    const clpool::device_facts facts = dev.facts();
    std::printf("device: %s, type %d, max_alloc %zu\n", dev.describe().c_str(), static_cast<int>(type),
                facts.max_alloc);

    clpool::wait_options options;
    options.timeout = std::chrono::seconds(10);
    if (dev.backend() == clpool::backend_kind::opencl) {
        const clpool::wait_status s = clpool::finish_interruptible(dev.queue(), options);
        if (s != clpool::wait_status::complete) return 3;
    }
    clpool::interrupt_handler_options handler;
    handler.grace = std::chrono::seconds(1);
    (void)handler;

    const clpool::shutdown_report report = clpool::shutdown();
    std::printf("shutdown: %zu queues, %zu bytes released\n", report.queues, report.bytes_released);
    return report.queues_failed == 0 ? 0 : 4;
}
