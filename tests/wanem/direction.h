// Direction: one way of the emulated link (site A -> B, or B -> A), run by its own thread:
// reads packets from one TUN fd, passes them through a Shaper into a PacketRing, and writes each
// to the other TUN fd when its release time comes (timerfd, absolute CLOCK_MONOTONIC, 1 ns
// timer slack; no busy waiting; woken on the grid of Shaper::WakeAt, so one wake-up sends every
// packet due by then).
//
// Thread-safety: Start/Stop from the owning thread; SetParams, params(), Blackhole and Stats
// from any thread (they take a mutex or read atomics; the forwarding thread picks up new
// parameters before its next packet).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "packet_ring.h"
#include "shaper.h"

namespace wanem {

// Packets are what the link carries (a super-packet counts its segments), bytes their IP bytes
// on the link (frame.h); frames are what the emulator read and wrote (equal to packets in the
// per-packet mode). Drops count frames.
struct DirectionStats {
  uint64_t rx_packets = 0, rx_bytes = 0;  // read from the input TUN
  uint64_t tx_packets = 0, tx_bytes = 0;  // written to the output TUN
  uint64_t rx_frames = 0, tx_frames = 0, drop_malformed = 0;
  uint64_t drop_loss = 0, drop_queue = 0, drop_blackhole = 0, drop_overflow = 0, tx_errors = 0;
  uint64_t queued_bytes = 0;  // in the delay line now
  double cpu_seconds = 0;     // CPU time of the forwarding thread
};

class Direction {
 public:
  // `super_packets`: both fds carry virtio_net_hdr frames (tun.h, frame.h).
  Direction(std::string name, int in_fd, int out_fd, size_t ring_bytes, int mtu, uint64_t seed,
            bool super_packets);
  ~Direction();
  Direction(const Direction&) = delete;
  Direction& operator=(const Direction&) = delete;

  // Returns false with *error set when the thread's resources cannot be created.
  bool Start(std::string* error);
  void Stop();

  void SetParams(const LinkParams& params);
  LinkParams params() const;
  DirectionStats Stats() const;
  const std::string& name() const { return name_; }

 private:
  void Run();
  void Wake();
  void TakeIn(std::vector<uint8_t>* scratch);  // reads up to kReadBudget frames
  void ReleaseDue();

  const std::string name_;
  const int in_fd_;
  const int out_fd_;
  const bool super_packets_;
  const size_t max_frame_;  // the largest frame read()
  PacketRing ring_;
  Shaper shaper_;  // forwarding thread only

  mutable std::mutex mu_;
  LinkParams pending_params_;  // GUARDED_BY(mu_)
  std::atomic<uint64_t> params_generation_{0};

  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<clockid_t> cpu_clock_{CLOCK_MONOTONIC};
  std::atomic<bool> cpu_clock_valid_{false};

  std::atomic<uint64_t> rx_packets_{0}, rx_bytes_{0}, tx_packets_{0}, tx_bytes_{0};
  std::atomic<uint64_t> drop_loss_{0}, drop_queue_{0}, drop_blackhole_{0}, drop_overflow_{0};
  std::atomic<uint64_t> tx_errors_{0}, queued_bytes_{0};
  std::atomic<uint64_t> rx_frames_{0}, tx_frames_{0}, drop_malformed_{0};
};

}  // namespace wanem
