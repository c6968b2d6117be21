// Shaper: what one direction of the emulated WAN does to a packet arriving at a given time —
// drop it (blackhole, random loss, full queue) or say when it leaves the far end.
//
// Model, per direction, in this order:
//   1. blackhole: while active, every packet is dropped;
//   2. random loss: each packet is dropped with probability `loss` (seeded PRNG: reproducible);
//   3. rate limit: a serializer sends `rate_bps` bits per second from a drop-tail FIFO that holds
//      at most `queue_bytes` bytes waiting; a packet that would overflow it is dropped;
//   4. delay: the packet arrives `delay_ns` after the serializer finishes sending it.
// Release times never decrease, so changing the delay at run time never reorders packets.
// Pure logic with an injected clock: not thread-safe, owned by one forwarding thread.
#pragma once

#include <cstdint>

namespace wanem {

struct LinkParams {
  int64_t delay_ns = 0;
  uint64_t rate_bps = 0;                   // 0 = unlimited
  uint64_t queue_bytes = 2 * 1024 * 1024;  // waiting room in front of the serializer
  double loss = 0.0;                       // probability in [0, 1]
  int64_t blackhole_until_ns = 0;          // CLOCK_MONOTONIC; drop everything before this
};

enum class Verdict { kForward, kDropBlackhole, kDropLoss, kDropQueue };

struct Admission {
  Verdict verdict;
  int64_t release_ns;  // when to hand the packet to the far side (kForward only)
};

class Shaper {
 public:
  explicit Shaper(uint64_t seed);

  void SetParams(const LinkParams& params) { params_ = params; }
  const LinkParams& params() const { return params_; }

  Admission Admit(int64_t now_ns, uint32_t bytes);
  bool BlackholedAt(int64_t now_ns) const { return now_ns < params_.blackhole_until_ns; }
  // Bytes waiting for the serializer at `now_ns` (0 when unlimited).
  uint64_t BacklogBytes(int64_t now_ns) const;
  // When to wake up to send a packet released at `release_ns`: the next point of a grid with a
  // step of 1/20 of the delay, at most 50 us, so one wake-up sends every packet due by then.
  // Packets leave up to one step late, never early (at 1 Gbit/s up to 4 full-size packets back to
  // back). A packet is due every 12 us at that rate, and arming a timer for each cost the emulator
  // a fifth of its CPU (a timer write is a VM exit on a virtual machine). Without a delay (a LAN)
  // the timing stays exact.
  int64_t WakeAt(int64_t release_ns) const;

 private:
  double NextUniform();

  LinkParams params_;
  int64_t serializer_free_ns_ = 0;  // when the serializer finishes the last accepted packet
  int64_t last_release_ns_ = 0;
  uint64_t rng_[4];
};

}  // namespace wanem
