// First hour, docs/SHAPES.md: interned shapes, and their device copy uploaded once.
#include <clpool/clpool.hpp>
#include <clpool/shapes/shape_mirror.hpp>
#include <clpool/shapes/shape_trie.hpp>

#include <cstdint>
#include <iostream>
#include <vector>

int main() {
    clpool::ShapeTrie& trie = clpool::ShapeTrie::global();
    const clpool::Shape a = trie.intern({2, 3, 4}, clpool::ElementType::f32);
    const clpool::Shape b = trie.intern({2, 3, 4}, clpool::ElementType::f32);
    bool ok = a == b && a.data() == b.data() && a.rank() == 3 && a.element_count() == 24;

    // A bad shape is an error that names the value.
    try {
        (void)trie.intern({2, -1}, clpool::ElementType::f32);
        ok = false;
    } catch (const clpool::shape_error& e) {
        ok = ok && e.why() == clpool::shape_error::reason::negative_extent;
    }

    // The kernel's copy: uploaded on the first call, the same buffer after.
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    auto& pool = clpool::get_buffer_pool(queue);
    clpool::ShapeMirror mirror(pool, queue);
    const cl::Buffer first = mirror.buffer(a);
    const cl::Buffer again = mirror.buffer(b);
    std::vector<std::int64_t> words(a.words().size());
    queue.enqueueReadBuffer(first, CL_TRUE, 0, words.size() * sizeof(std::int64_t), words.data());
    ok = ok && first() == again() && words == std::vector<std::int64_t>(a.words().begin(), a.words().end());
    std::cout << "shapes: rank " << a.rank() << ", " << a.words().size() << " words, mirror " << pool.stats() << '\n';
    return ok ? 0 : 1;
}
