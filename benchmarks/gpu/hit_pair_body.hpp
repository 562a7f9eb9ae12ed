// The loop that hit_pair_loop.cpp times and hit_pair_instructions.cpp counts: allocate and
// release a cached 4 KiB buffer n times. Out of line, so callgrind can count it alone.
#pragma once

template <class Pl>
[[gnu::noinline]] void hit_pair_body(Pl& p, long n) {
    for (long i = 0; i < n; ++i) {
        auto h = p.allocate(4096);
        asm volatile("" ::"r"(&h) : "memory");
        h.release();
    }
}
