// wanem: a WAN emulator for tests and benchmarks, for kernels without netem.
//
// `wanem run` joins two network namespaces ("site A" and "site B", made beforehand with
// `ip netns add`) through a TUN device in each and forwards IP packets between them with a
// per-direction one-way delay, rate limit + drop-tail queue, random loss and blackhole switch
// (see shaper.h). Real kernel TCP runs end to end. `wanem ctl` changes it at run time
// (see control.h). scripts/wanlab wraps both: `wanlab up` / `wanlab down`.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/units.h"
#include "control.h"
#include "direction.h"
#include "frame.h"
#include "tun.h"

namespace wanem {
namespace {

struct RunOptions {
  std::string netns_a, netns_b, dev = "wan0";
  std::string addr_a = "198.18.0.1", addr_b = "198.18.0.2";
  int prefix = 24;
  int mtu = 1500;
  std::string delay = "0ms", rate = "unlimited", queue = "2MiB", loss = "0", ring = "256MiB";
  uint64_t seed = 1;
  std::string control, pidfile, log;
  bool daemon = false;
  bool super_packets = false;
};

int64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool FillSockaddr(const std::string& path, sockaddr_un* addr, std::string* error) {
  if (path.size() >= sizeof(addr->sun_path)) {
    *error = "control socket path is too long: " + path;
    return false;
  }
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

class Emulator {
 public:
  bool Setup(const RunOptions& o, std::string* error) {
    LinkParams params;
    auto delay = wanbackup::ParseDuration(o.delay, "ms");
    auto rate = wanbackup::ParseBitRate(o.rate);
    auto queue = wanbackup::ParseSize(o.queue);
    auto loss = wanbackup::ParseFraction(o.loss);
    auto ring = wanbackup::ParseSize(o.ring);
    for (const wanbackup::Status& s :
         {delay.status(), rate.status(), queue.status(), loss.status(), ring.status()}) {
      if (!s.ok()) {
        *error = s.message();
        return false;
      }
    }
    params.delay_ns = delay->count();
    params.rate_bps = *rate;
    params.queue_bytes = *queue;
    params.loss = *loss;
    const uint64_t largest = o.super_packets ? kVnetHeaderBytes + kMaxIpBytes : o.mtu;
    if (*ring < largest * 64) {
      *error = "--ring must hold at least 64 of the largest frames (" +
               std::to_string(largest * 64) + " bytes)";
      return false;
    }

    TunConfig a{o.netns_a, o.dev, o.addr_a, o.prefix, o.mtu, 10000, o.super_packets};
    TunConfig b{o.netns_b, o.dev, o.addr_b, o.prefix, o.mtu, 10000, o.super_packets};
    fd_a_ = OpenTun(a, error);
    if (fd_a_ < 0) return false;
    fd_b_ = OpenTun(b, error);
    if (fd_b_ < 0) return false;

    ab_ = std::make_unique<Direction>("ab", fd_a_, fd_b_, *ring, o.mtu, o.seed, o.super_packets);
    ba_ = std::make_unique<Direction>("ba", fd_b_, fd_a_, *ring, o.mtu, o.seed * 7919 + 1,
                                      o.super_packets);
    ab_->SetParams(params);
    ba_->SetParams(params);
    if (!ab_->Start(error) || !ba_->Start(error)) return false;

    sockaddr_un addr;
    if (!FillSockaddr(o.control, &addr, error)) return false;
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::unlink(o.control.c_str());
    if (listen_fd_ < 0 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      *error = "control socket " + o.control + ": " + std::strerror(errno);
      return false;
    }
    ::chmod(o.control.c_str(), 0600);
    control_path_ = o.control;
    return true;
  }

  // Serves control requests until `stop` or SIGINT/SIGTERM.
  void Serve() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    const int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC);
    bool running = true;
    while (running) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {sig_fd, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[1].revents != 0) break;
      if (fds[0].revents != 0) {
        const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) {
          running = HandleClient(client);
          ::close(client);
        }
      }
    }
    if (sig_fd >= 0) ::close(sig_fd);
  }

  ~Emulator() {
    if (ab_) ab_->Stop();
    if (ba_) ba_->Stop();
    if (listen_fd_ >= 0) {
      ::close(listen_fd_);
      ::unlink(control_path_.c_str());
    }
    // Closing a TUN fd removes its device; should the device outlive us all the same, it must
    // not keep TSO for an emulator that reads plain packets (tun.cpp, SetOffloads).
    for (const int fd : {fd_a_, fd_b_}) {
      if (fd < 0) continue;
      (void)ClearOffloads(fd);
      ::close(fd);
    }
  }

 private:
  // Returns false when the emulator should stop.
  bool HandleClient(int client) {
    timeval tv{2, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string line;
    char buf[1024];
    while (line.find('\n') == std::string::npos && line.size() < 4096) {
      const ssize_t n = ::read(client, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    if (const size_t nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    bool keep_running = true;
    const std::string reply = Execute(line, &keep_running) + "\n";
    (void)!::write(client, reply.data(), reply.size());
    return keep_running;
  }

  std::vector<Direction*> Selected(Which which) {
    switch (which) {
      case Which::kAB:
        return {ab_.get()};
      case Which::kBA:
        return {ba_.get()};
      case Which::kBoth:
        return {ab_.get(), ba_.get()};
    }
    return {};
  }

  std::string Execute(const std::string& line, bool* keep_running) {
    auto parsed = ParseCommand(line);
    if (!parsed.ok()) return "error: " + parsed.status().message();
    const Command& cmd = *parsed;
    const int64_t now = NowNs();
    switch (cmd.kind) {
      case Command::Kind::kPing:
        return "ok";
      case Command::Kind::kStop:
        *keep_running = false;
        return "ok";
      case Command::Kind::kShow:
        return "ok\n" + FormatParams("ab", ab_->params(), now) + "\n" +
               FormatParams("ba", ba_->params(), now);
      case Command::Kind::kStats:
        return "ok\n" + FormatStats("ab", ab_->Stats()) + "\n" + FormatStats("ba", ba_->Stats());
      case Command::Kind::kSet:
        for (Direction* d : Selected(cmd.which)) {
          LinkParams p = d->params();
          ApplySet(cmd, &p);
          d->SetParams(p);
        }
        return "ok";
      case Command::Kind::kBlackhole:
        for (Direction* d : Selected(cmd.which)) {
          LinkParams p = d->params();
          p.blackhole_until_ns = cmd.blackhole_ns > 0 ? now + cmd.blackhole_ns : 0;
          d->SetParams(p);
        }
        return "ok";
    }
    return "error: unhandled command";
  }

  int fd_a_ = -1, fd_b_ = -1, listen_fd_ = -1;
  std::string control_path_;
  std::unique_ptr<Direction> ab_, ba_;
};

int Run(const RunOptions& o) {
  // The signals that stop the emulator are taken by a signalfd; block them in every thread.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);

  int ready_pipe[2] = {-1, -1};
  if (o.daemon) {
    if (::pipe2(ready_pipe, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "wanem: pipe: %s\n", std::strerror(errno));
      return 1;
    }
    const pid_t child = ::fork();
    if (child < 0) {
      std::fprintf(stderr, "wanem: fork: %s\n", std::strerror(errno));
      return 1;
    }
    if (child > 0) {  // parent: wait for the child's verdict, then exit with it
      ::close(ready_pipe[1]);
      std::string verdict;
      char buf[512];
      ssize_t n;
      while ((n = ::read(ready_pipe[0], buf, sizeof buf)) > 0)
        verdict.append(buf, static_cast<size_t>(n));
      if (verdict == "ok") return 0;
      std::fprintf(stderr, "wanem: %s\n", verdict.empty() ? "failed to start" : verdict.c_str());
      return 1;
    }
    ::close(ready_pipe[0]);
    ::setsid();
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(devnull, STDIN_FILENO);
    const int out = o.log.empty()
                        ? devnull
                        : ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ::dup2(out >= 0 ? out : devnull, STDOUT_FILENO);
    ::dup2(out >= 0 ? out : devnull, STDERR_FILENO);
  }
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);

  auto report = [&](const std::string& verdict) {
    if (ready_pipe[1] >= 0) {
      (void)!::write(ready_pipe[1], verdict.data(), verdict.size());
      ::close(ready_pipe[1]);
      ready_pipe[1] = -1;
    } else if (verdict != "ok") {
      std::fprintf(stderr, "wanem: %s\n", verdict.c_str());
    }
  };

  Emulator emulator;
  std::string error;
  if (!emulator.Setup(o, &error)) {
    report(error);
    return 1;
  }
  if (!o.pidfile.empty()) {
    FILE* f = std::fopen(o.pidfile.c_str(), "w");
    if (f == nullptr) {
      report("pidfile " + o.pidfile + ": " + std::strerror(errno));
      return 1;
    }
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  std::fprintf(stderr, "wanem: forwarding %s <-> %s %s (pid %d)\n", o.netns_a.c_str(),
               o.netns_b.c_str(), o.super_packets ? "in super-packets" : "packet by packet",
               static_cast<int>(::getpid()));
  std::fflush(stderr);
  report("ok");
  emulator.Serve();
  if (!o.pidfile.empty()) ::unlink(o.pidfile.c_str());
  return 0;
}

int Ctl(const std::string& path, const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words)
    line += (line.empty() ? "" : " ") + w;
  sockaddr_un addr;
  std::string error;
  if (!FillSockaddr(path, &addr, &error)) {
    std::fprintf(stderr, "wanem: %s\n", error.c_str());
    return 2;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "wanem: cannot reach the emulator at %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return 2;
  }
  line += "\n";
  (void)!::write(fd, line.data(), line.size());
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    reply.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (reply.starts_with("ok")) {
    const size_t nl = reply.find('\n');
    std::fputs(nl == std::string::npos ? "" : reply.c_str() + nl + 1, stdout);
    return 0;
  }
  std::fprintf(stderr, "wanem: %s", reply.empty() ? "no reply\n" : reply.c_str());
  return 1;
}

}  // namespace
}  // namespace wanem

int main(int argc, char** argv) {
  CLI::App app("wanem: WAN emulator joining two network namespaces through TUN devices", "wanem");
  app.require_subcommand(1);
  wanem::RunOptions o;
  CLI::App* run = app.add_subcommand("run", "create the devices and forward until stopped");
  run->add_option("--netns-a", o.netns_a, "site A namespace (initiator side)")->required();
  run->add_option("--netns-b", o.netns_b, "site B namespace (target side)")->required();
  run->add_option("--dev", o.dev, "TUN device name in both namespaces")->capture_default_str();
  run->add_option("--addr-a", o.addr_a, "site A address")->capture_default_str();
  run->add_option("--addr-b", o.addr_b, "site B address")->capture_default_str();
  run->add_option("--prefix", o.prefix, "prefix length of both addresses")->capture_default_str();
  run->add_option("--mtu", o.mtu, "MTU of both devices (576..65535)")->capture_default_str();
  run->add_option("--delay", o.delay, "one-way delay, each direction")->capture_default_str();
  run->add_option("--rate", o.rate, "rate limit, each direction (e.g. 1gbit)")
      ->capture_default_str();
  run->add_option("--queue", o.queue, "drop-tail queue in front of the rate limiter")
      ->capture_default_str();
  run->add_option("--loss", o.loss, "random loss, each direction (e.g. 0.1%)")
      ->capture_default_str();
  run->add_option("--ring", o.ring, "delay-line memory per direction")->capture_default_str();
  run->add_option("--seed", o.seed, "loss PRNG seed")->capture_default_str();
  run->add_option("--control", o.control, "control socket path")->required();
  run->add_option("--pidfile", o.pidfile, "write the PID here once forwarding");
  run->add_option("--log", o.log, "with --daemon: append messages here");
  run->add_flag("--super-packets", o.super_packets,
                "take TSO super-packets (up to 64 KiB) from the kernel and forward them whole, "
                "charged as their segments' wire bytes, so the rate cap and TCP's MSS stay as "
                "per packet: a fraction of the CPU per byte. Loss, blackhole and queue drops "
                "then take whole super-packets (bursts of segments): leave it off for loss "
                "experiments. Off (the default here; scripts/wanlab turns it on): one IP packet "
                "per frame (frame.h)");
  run->add_flag("--daemon", o.daemon, "detach once ready; exit status says whether setup worked");
  std::string ctl_path;
  std::vector<std::string> ctl_words;
  CLI::App* ctl = app.add_subcommand("ctl", "send one control command (see control.h)");
  ctl->add_option("socket", ctl_path, "control socket path")->required();
  ctl->add_option("command", ctl_words, "ping | show | stats | set ... | blackhole ... | stop")
      ->required();
  CLI11_PARSE(app, argc, argv);
  if (run->parsed()) return wanem::Run(o);
  return wanem::Ctl(ctl_path, ctl_words);
}
