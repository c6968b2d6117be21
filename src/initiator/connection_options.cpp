#include "initiator/connection_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace wanbackup::initiator {

void ApplyUrl(IscsiUrl& url, ConnectionOptions* options) {
  options->host = url.host;
  options->port = url.port;
  options->target = url.target;
  if (!url.user.empty()) options->chap.user = url.user;
  if (!url.password.empty()) options->chap.secret = std::move(url.password);
}

namespace {

constexpr size_t kCongestionNameMax = 16;  // the kernel's TCP_CA_NAME_MAX, with its NUL

// The host's list, one line of names separated by spaces; empty when it cannot be read.
std::string SysctlLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Status SetCongestionControl(int fd, const std::string& name) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) == 0) {
    return Status::Ok();
  }
  const int err = errno;
  const std::string what = "TCP congestion control '" + name + "'";
  if (err == EPERM) {
    const std::string allowed = SysctlLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    return Status::PermissionDenied(
        what +
        " is not allowed for this user (allowed: " + (allowed.empty() ? "unknown" : allowed) +
        "; root may add it to net.ipv4.tcp_allowed_congestion_control)");
  }
  if (err == ENOENT) {
    const std::string available = SysctlLine("/proc/sys/net/ipv4/tcp_available_congestion_control");
    return Status::InvalidArgument(what + " is not available on this host (available: " +
                                   (available.empty() ? "unknown" : available) +
                                   "; a module may provide it, e.g. modprobe tcp_bbr)");
  }
  return Status::FromErrno(err, "cannot use " + what);
}

Status CheckCongestionControl(const std::string& name) {
  if (name.empty() || name.size() >= kCongestionNameMax) {
    return Status::InvalidArgument("TCP congestion control '" + name +
                                   "': a name of 1 to 15 characters, such as cubic or bbr");
  }
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int probe = fd >= 0 ? fd : ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return Status::FromErrno(errno, "cannot open a TCP socket");
  Status status = SetCongestionControl(probe, name);
  ::close(probe);
  return status;
}

std::string DefaultInitiatorName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    return "iqn.2026-11.org.wanbackup:host";
  std::string name = "iqn.2026-11.org.wanbackup:";
  for (const char* p = host; *p != '\0'; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    name += ok ? c : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : '-';
  }
  return name;
}

}  // namespace wanbackup::initiator
