// Instantiates the templates a program meets first, so their bodies are compiled too.
#pragma once

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    clpool::BufferPool pool(context);
    auto h = pool.allocate(1000);
    clpool::release_after(h, queue);
    clpool::Buffer b(context, CL_MEM_READ_WRITE, 64);
    const auto& dev = clpool::default_device();
    auto pinned = dev.pinned_pool().allocate(64);
    return pinned && clpool::get_buffer_pool(queue).stats().hits == 0 ? 0 : 1;
}
