// ProgressBar: a one-line progress bar on standard error, drawn only on a terminal.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace clpool::tools {

// Draws "[#####.....]  12/40  label" on stderr, rewriting one line, when
// stderr is a terminal (so logs and pipes stay clean); otherwise does nothing.
// finish() (or the destructor) clears the line. Not thread-safe.
class ProgressBar {
public:
    ProgressBar(std::size_t total, bool allowed = true)
        : total_(total), enabled_(allowed && total > 0 && ::isatty(STDERR_FILENO) == 1) {}
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;
    ~ProgressBar() { finish(); }

    bool enabled() const noexcept { return enabled_; }

    // Marks `done` steps of `total` complete and shows `label`.
    void update(std::size_t done, const std::string& label) {
        if (!enabled_) return;
        constexpr std::size_t width = 30;
        const std::size_t filled = done >= total_ ? width : done * width / total_;
        std::string bar(filled, '#');
        bar.resize(width, '.');
        std::fprintf(stderr, "\r\033[K[%s] %3zu/%zu  %s", bar.c_str(), done, total_, label.c_str());
        std::fflush(stderr);
        drawn_ = true;
    }

    void finish() noexcept {
        if (enabled_ && drawn_) {
            std::fputs("\r\033[K", stderr);
            std::fflush(stderr);
        }
        drawn_ = false;
    }

private:
    std::size_t total_;
    bool enabled_;
    bool drawn_ = false;
};

}  // namespace clpool::tools
