// rerun_self: runs this test binary again as a child with one more environment variable, for settings read once per process.
#pragma once

#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace clpool::test {

// Runs this test binary with `var` ("NAME=value", replacing any NAME of the
// parent's) and the doctest filter `filter` (skipped cases included: the
// child halves are marked skip); returns its exit status, 128 + the signal if
// a signal ended it, -1 if it could not be run. `quiet`: the child is
// expected to fail; its report would only confuse the log.
inline int rerun_self(const std::string& var, const std::string& filter, bool quiet = false) {
    std::vector<std::string> env_strings;
    const std::string prefix = var.substr(0, var.find('=') + 1);
    for (char** e = environ; *e; ++e)
        if (std::string(*e).rfind(prefix, 0) != 0) env_strings.emplace_back(*e);
    env_strings.push_back(var);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe", no_skip = "--no-skip", tc = "-tc=" + filter, minimal = "--minimal";
    char* argv[] = {self.data(), no_skip.data(), tc.data(), minimal.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (quiet) {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace clpool::test
