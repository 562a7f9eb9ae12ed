// The stop flag interruptible waits watch by default; set by Ctrl+C (the opt-in handler) or request_interrupt().
#pragma once

#include <atomic>

namespace clpool::detail {

// Set by the opt-in handler or request_interrupt(); lock-free, so a signal
// handler may set it.
inline std::atomic<bool> interrupt_flag{false};
static_assert(std::atomic<bool>::is_always_lock_free);

}  // namespace clpool::detail
