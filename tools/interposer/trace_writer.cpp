// The trace writer's lines (trace_writer.hpp); their syntax is common/trace_format.hpp's.
#include "trace_writer.hpp"

#include "common/trace_format.hpp"

#include <clpool/platform/fork_locks.hpp>

#include <unistd.h>

namespace clpool::interpose {

namespace fmt = tools::trace_format;

Trace::Trace(std::FILE* f) : f_(f), t0_(std::chrono::steady_clock::now()) {
    // Taken around fork(): a line another thread was writing at the fork must not keep the child's lines waiting.
    detail::fork_locks::add_mutex(detail::fork_rank::interposer_trace, mu_);
    static char buffer[1 << 16];
    std::setvbuf(f_, buffer, _IOFBF, sizeof buffer);
    char note[64];
    std::snprintf(note, sizeof note, "pid %ld; written by libclpool_interpose", static_cast<long>(getpid()));
    char line[fmt::max_line];
    write(line, fmt::format_header(line, sizeof line, note));
}

std::uint64_t Trace::alloc(unsigned ctx_token, std::uint64_t flags, std::size_t bytes) noexcept {
    std::lock_guard lock(mu_);
    const std::uint64_t id = ++last_id_;
    char line[fmt::max_line];
    write(line, fmt::format_alloc(line, sizeof line, now(), id, ctx_token, flags, bytes));
    return id;
}

void Trace::free(std::uint64_t id) noexcept {
    std::lock_guard lock(mu_);
    char line[fmt::max_line];
    write(line, fmt::format_free(line, sizeof line, now(), id));
}

void Trace::flush() noexcept {
    if (!mu_.try_lock()) return;
    std::fflush(f_);
    mu_.unlock();
}

// Strictly increasing, so the replay's order is the file's order.
std::uint64_t Trace::now() noexcept {
    const auto dt = std::chrono::steady_clock::now() - t0_;
    std::uint64_t t = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
    if (t <= last_t_) t = last_t_ + 1;
    last_t_ = t;
    return t;
}

// n as snprintf returned it: a line that did not fit is not written.
void Trace::write(const char* line, int n) noexcept {
    if (n > 0 && static_cast<std::size_t>(n) < fmt::max_line) std::fwrite(line, 1, static_cast<std::size_t>(n), f_);
}

}  // namespace clpool::interpose
