// The trace writer (CLPOOL_TRACE): one line per buffer creation and release, in the format of common/trace_format.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace clpool::interpose {

// Thread-safe; every call makes no OpenCL call.
class Trace {
public:
    // Writes the header to f, which the Trace then owns for good (it is flushed at exit, never closed).
    // The Trace must live for ever too: its lock is taken around every fork().
    explicit Trace(std::FILE* f);
    // An allocation of `bytes` in the context numbered ctx_token: the id its free will name.
    std::uint64_t alloc(unsigned ctx_token, std::uint64_t flags, std::size_t bytes) noexcept;
    void free(std::uint64_t id) noexcept;
    // At exit, while another thread may be inside a write: loses the tail rather than hang.
    void flush() noexcept;

private:
    std::uint64_t now() noexcept;
    void write(const char* line, int n) noexcept;

    std::mutex mu_;
    std::FILE* f_;
    std::chrono::steady_clock::time_point t0_;
    std::uint64_t last_id_ = 0;
    std::uint64_t last_t_ = 0;
};

}  // namespace clpool::interpose
