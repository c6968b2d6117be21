#include "tun.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "frame.h"

namespace wanem {
namespace {

std::string ErrnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool SetIfFlagsUp(int sock, const char* ifname, std::string* error) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (::ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) {
    *error = ErrnoText(std::string("SIOCGIFFLAGS ") + ifname);
    return false;
  }
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) {
    *error = ErrnoText(std::string("SIOCSIFFLAGS ") + ifname);
    return false;
  }
  return true;
}

bool Configure(const TunConfig& cfg, std::string* error) {
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    *error = ErrnoText("socket");
    return false;
  }
  bool ok = false;
  do {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, cfg.ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_mtu = cfg.mtu;
    if (::ioctl(sock, SIOCSIFMTU, &ifr) != 0) {
      *error = ErrnoText("setting MTU " + std::to_string(cfg.mtu));
      break;
    }
    ifr = ifreq{};
    std::strncpy(ifr.ifr_name, cfg.ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_qlen = cfg.txqueuelen;
    if (::ioctl(sock, SIOCSIFTXQLEN, &ifr) != 0) {
      *error = ErrnoText("setting txqueuelen");
      break;
    }
    ifr = ifreq{};
    std::strncpy(ifr.ifr_name, cfg.ifname.c_str(), IFNAMSIZ - 1);
    auto* addr = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
    addr->sin_family = AF_INET;
    if (::inet_pton(AF_INET, cfg.address.c_str(), &addr->sin_addr) != 1) {
      *error = "'" + cfg.address + "' is not an IPv4 address";
      break;
    }
    if (::ioctl(sock, SIOCSIFADDR, &ifr) != 0) {
      *error = ErrnoText("setting address " + cfg.address);
      break;
    }
    ifr = ifreq{};
    std::strncpy(ifr.ifr_name, cfg.ifname.c_str(), IFNAMSIZ - 1);
    auto* mask = reinterpret_cast<sockaddr_in*>(&ifr.ifr_netmask);
    mask->sin_family = AF_INET;
    mask->sin_addr.s_addr = htonl(cfg.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - cfg.prefix_len));
    if (::ioctl(sock, SIOCSIFNETMASK, &ifr) != 0) {
      *error = ErrnoText("setting netmask");
      break;
    }
    if (!SetIfFlagsUp(sock, cfg.ifname.c_str(), error)) break;
    if (!SetIfFlagsUp(sock, "lo", error)) break;
    ok = true;
  } while (false);
  ::close(sock);
  return ok;
}

// Set at every start, both ways: a device that outlives an emulator (persistent) keeps the
// offloads it was given, and an emulator reading plain packets from a device with TSO on would
// receive super-packets it cannot parse (even SYNs are lost then).
bool SetOffloads(int fd, bool super_packets, std::string* error) {
  if (super_packets) {
    int size = static_cast<int>(kVnetHeaderBytes);
    if (::ioctl(fd, TUNSETVNETHDRSZ, &size) != 0) {
      *error = ErrnoText("TUNSETVNETHDRSZ");
      return false;
    }
  }
  const unsigned offloads =
      super_packets ? TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN : 0;
  if (::ioctl(fd, TUNSETOFFLOAD, offloads) != 0) {
    *error = ErrnoText("TUNSETOFFLOAD");
    return false;
  }
  return true;
}

}  // namespace

NetnsGuard::NetnsGuard(const std::string& netns) {
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original_ < 0) {
    error_ = ErrnoText("opening this thread's network namespace");
    return;
  }
  const std::string path = "/run/netns/" + netns;
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    error_ = ErrnoText("network namespace " + netns + " (" + path + ")");
    return;
  }
  if (::setns(target, CLONE_NEWNET) != 0) {
    error_ = ErrnoText("entering network namespace " + netns);
    ::close(target);
    return;
  }
  ::close(target);
  ok_ = true;
}

NetnsGuard::~NetnsGuard() {
  if (original_ >= 0) {
    if (ok_) (void)::setns(original_, CLONE_NEWNET);
    ::close(original_);
  }
}

bool ClearOffloads(int fd) {
  return ::ioctl(fd, TUNSETOFFLOAD, 0U) == 0;
}

int OpenTun(const TunConfig& cfg, std::string* error) {
  if (cfg.ifname.empty() || cfg.ifname.size() >= IFNAMSIZ) {
    *error = "interface name '" + cfg.ifname + "' must have 1 to 15 characters";
    return -1;
  }
  if (cfg.mtu < 576 || cfg.mtu > 65535) {
    *error = "MTU " + std::to_string(cfg.mtu) + " is outside 576..65535";
    return -1;
  }
  if (cfg.prefix_len < 1 || cfg.prefix_len > 30) {
    *error = "prefix length must be within 1..30";
    return -1;
  }
  NetnsGuard guard(cfg.netns);
  if (!guard.ok()) {
    *error = guard.error();
    return -1;
  }
  const int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = ErrnoText("/dev/net/tun");
    return -1;
  }
  ifreq ifr{};
  ifr.ifr_flags = static_cast<short>(IFF_TUN | IFF_NO_PI | (cfg.super_packets ? IFF_VNET_HDR : 0));
  std::strncpy(ifr.ifr_name, cfg.ifname.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
    *error = ErrnoText("creating TUN device " + cfg.ifname + " in " + cfg.netns);
    ::close(fd);
    return -1;
  }
  if (!SetOffloads(fd, cfg.super_packets, error)) {
    ::close(fd);
    return -1;
  }
  if (!Configure(cfg, error)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace wanem
