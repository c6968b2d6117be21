#include "support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace wanbackup::testing {
namespace {

std::vector<std::string> FullArgv(const std::vector<std::string>& argv, const RunOptions& o) {
  std::vector<std::string> full;
  if (!o.netns.empty()) full = {"ip", "netns", "exec", o.netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

// Forks and execs; the child's stdin/stdout/stderr become the given fds (-1: /dev/null).
pid_t Spawn(const std::vector<std::string>& argv, const RunOptions& o, int in_fd, int out_fd,
            int err_fd) {
  std::vector<std::string> full = FullArgv(argv, o);
  std::vector<char*> cargv;
  for (std::string& s : full)
    cargv.push_back(s.data());
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(in_fd >= 0 ? in_fd : devnull, STDIN_FILENO);
    ::dup2(out_fd >= 0 ? out_fd : devnull, STDOUT_FILENO);
    ::dup2(err_fd >= 0 ? err_fd : devnull, STDERR_FILENO);
    for (const auto& [k, v] : o.env)
      ::setenv(k.c_str(), v.c_str(), 1);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
      std::fprintf(stderr, "chdir %s: %s\n", o.cwd.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "exec %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

}  // namespace

RunResult Run(const std::vector<std::string>& argv, const RunOptions& options) {
  int out[2], err[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe");
  }
  const pid_t pid = Spawn(argv, options, in[0], out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(in[0]);
  if (!options.stdin_data.empty()) {
    (void)!::write(in[1], options.stdin_data.data(), options.stdin_data.size());
  }
  ::close(in[1]);

  RunResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

Background::Background(const std::vector<std::string>& argv, const RunOptions& options) {
  int err_fd = -1;
  if (!options.err_file.empty()) {
    err_fd = ::open(options.err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err_fd < 0) throw std::runtime_error("opening " + options.err_file);
  }
  pid_ = Spawn(argv, options, -1, -1, err_fd);
  if (err_fd >= 0) ::close(err_fd);
}

Background::~Background() {
  if (!reaped_) {
    Kill(SIGKILL);
    Wait(std::chrono::seconds(5));
  }
}

void Background::Kill(int signo) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, signo);
}

int Background::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reaped_) {
    const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

}  // namespace wanbackup::testing
