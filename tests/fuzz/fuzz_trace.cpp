// libFuzzer target for the trace parser: any input either parses or raises trace_error naming a
// line inside the input; nothing else escapes, nothing crashes.
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_trace.cpp
//   ./a.out tests/fuzz/corpus/trace
#include "tools/replay/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::size_t lines = 1;
    for (char c : text) lines += c == '\n';
    try {
        const auto trace = clpool::replay::parse_trace(text);
        // Every event sits on a real line after the header, in file order, and frees pair with allocs.
        std::size_t prev = 1, allocs = 0, frees = 0;
        for (const auto& e : trace.events) {
            if (e.line <= prev || e.line > lines) std::abort();
            prev = e.line;
            (e.kind == clpool::replay::op::alloc ? allocs : frees) += 1;
        }
        if (allocs - frees != trace.live_at_end) std::abort();
    } catch (const clpool::replay::trace_error& e) {
        if (e.line() == 0 || e.line() > lines) std::abort();
    }
    return 0;
}
