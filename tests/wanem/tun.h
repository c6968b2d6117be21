// Creating the emulator's two TUN devices, each inside its own network namespace, configured
// (address, MTU, queue length, up) with ioctls so no other tool is needed. Functions are
// thread-safe; each switches only the calling thread's namespace and switches it back.
#pragma once

#include <cstdint>
#include <string>

namespace wanem {

struct TunConfig {
  std::string netns;    // name under /run/netns (from `ip netns add`)
  std::string ifname;   // device name inside that namespace
  std::string address;  // IPv4 address of this end
  int prefix_len = 24;
  int mtu = 1500;
  int txqueuelen = 10000;
  // Super-packets (frame.h): a virtio_net_hdr on every frame, and the kernel's checksum and TCP
  // segmentation offloads on the device (TUNSETOFFLOAD), so TCP in the namespace hands over
  // TSO super-packets. Off: one IP packet per frame, and the offloads cleared.
  bool super_packets = false;
};

// Opens a non-blocking TUN fd (IFF_TUN | IFF_NO_PI, with IFF_VNET_HDR for super-packets) whose
// device lives in cfg.netns, sets its offloads, and brings it and the namespace's loopback up.
// Returns the fd, or -1 with *error set.
int OpenTun(const TunConfig& cfg, std::string* error);

// Clears the device's offloads (TUNSETOFFLOAD 0) before the emulator lets go of `fd`: a device
// that outlives it (made persistent by someone else) then hands the next reader plain packets.
// Best effort, for the exit path: returns false when the ioctl failed.
bool ClearOffloads(int fd);

// Runs the calling thread inside namespace `netns` until the returned guard is destroyed.
class NetnsGuard {
 public:
  explicit NetnsGuard(const std::string& netns);
  ~NetnsGuard();
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  int original_ = -1;
  bool ok_ = false;
  std::string error_;
};

}  // namespace wanem
