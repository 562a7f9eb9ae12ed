// nap: a short sleep for a thread that waits on another which may be preempted on this very core.
#pragma once

// nanosleep where there is one, so that the core and the locks do not read <chrono> and <thread>.
#if defined(__unix__)
#include <time.h>
#else
#include <chrono>
#include <thread>
#endif

namespace clpool::detail {

// Sleeps about `us` microseconds (a sleep, not a yield: the thread waited for may need this core).
inline void nap_us(long us) noexcept {
#if defined(__unix__)
    const timespec t{us / 1000000L, (us % 1000000L) * 1000L};
    nanosleep(&t, nullptr);
#else
    std::this_thread::sleep_for(std::chrono::microseconds(us));
#endif
}

}  // namespace clpool::detail
