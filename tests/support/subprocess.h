// Running programs from tests: argv (never a shell), optional network namespace, captured
// stdout/stderr, a hard timeout (the child is killed by PID, and only it). Not thread-safe per
// object; different objects may run concurrently.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace wanbackup::testing {

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  bool timed_out = false;
  std::string out, err;
};

struct RunOptions {
  std::string netns;                       // run inside this namespace (ip netns exec)
  std::map<std::string, std::string> env;  // added to the environment
  std::chrono::milliseconds timeout{60000};
  std::string stdin_data;
  std::string cwd;  // the working directory ("" = the test's)
  // Background only: the program's stderr goes to this file, created or truncated ("" =
  // /dev/null), for a test that checks what a program it stopped and resumed said.
  std::string err_file;
};

// Runs to completion (or timeout).
RunResult Run(const std::vector<std::string>& argv, const RunOptions& options = {});

// A program that runs in the background while the test goes on (a server). Killed and reaped
// on destruction if still running.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const RunOptions& options = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  pid_t pid() const { return pid_; }
  // Waits for exit up to `timeout`; returns the exit code, or -1 (still running or signalled).
  int Wait(std::chrono::milliseconds timeout);
  void Kill(int signo);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace wanbackup::testing
