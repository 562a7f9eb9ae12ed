// thread_state: the scheduler state of one thread of this process, for tests that a waiter sleeps.
#pragma once

#if defined(__linux__)
#include <fstream>
#include <string>

#include <sys/types.h>

namespace clpool::test {

// 'R' running or runnable, 'S' asleep, ... (from /proc); '?' if unreadable.
inline char thread_state(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(f, line);
    const auto close = line.rfind(')');  // the command name may hold spaces
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

}  // namespace clpool::test
#endif
