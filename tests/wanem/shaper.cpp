#include "shaper.h"

#include <algorithm>

namespace wanem {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Shaper::Shaper(uint64_t seed) {
  for (uint64_t& word : rng_)
    word = SplitMix64(seed);
}

double Shaper::NextUniform() {
  // xoshiro256** (public-domain algorithm by Blackman and Vigna), top 53 bits as a double.
  const uint64_t result = Rotl(rng_[1] * 5, 7) * 9;
  const uint64_t t = rng_[1] << 17;
  rng_[2] ^= rng_[0];
  rng_[3] ^= rng_[1];
  rng_[1] ^= rng_[2];
  rng_[0] ^= rng_[3];
  rng_[2] ^= t;
  rng_[3] = Rotl(rng_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

int64_t Shaper::WakeAt(int64_t release_ns) const {
  constexpr int64_t kMaxStepNs = 50'000;
  const int64_t step = std::min(kMaxStepNs, params_.delay_ns / 20);
  if (step <= 1 || release_ns <= 0) return release_ns;
  return (release_ns + step - 1) / step * step;
}

uint64_t Shaper::BacklogBytes(int64_t now_ns) const {
  if (params_.rate_bps == 0 || serializer_free_ns_ <= now_ns) return 0;
  const double waiting_s = static_cast<double>(serializer_free_ns_ - now_ns) / 1e9;
  return static_cast<uint64_t>(waiting_s * static_cast<double>(params_.rate_bps) / 8.0);
}

Admission Shaper::Admit(int64_t now_ns, uint32_t bytes) {
  if (BlackholedAt(now_ns)) return {Verdict::kDropBlackhole, 0};
  if (params_.loss > 0.0 && NextUniform() < params_.loss) return {Verdict::kDropLoss, 0};

  int64_t depart_ns = now_ns;
  if (params_.rate_bps != 0) {
    const int64_t start_ns = std::max(now_ns, serializer_free_ns_);
    // A packet always fits an empty queue, however small the limit.
    const uint64_t backlog = BacklogBytes(now_ns);
    if (backlog > 0 && backlog + bytes > params_.queue_bytes) return {Verdict::kDropQueue, 0};
    // bytes < 2^20 (a super-packet counts its segments: under 128 KiB), so bytes * 8e9 < 2^63:
    // exact integer arithmetic, rounded up.
    const uint64_t bit_ns = uint64_t{bytes} * 8 * 1'000'000'000ULL;
    const auto tx_ns = static_cast<int64_t>((bit_ns + params_.rate_bps - 1) / params_.rate_bps);
    serializer_free_ns_ = start_ns + tx_ns;
    depart_ns = serializer_free_ns_;
  }
  const int64_t release_ns = std::max(depart_ns + params_.delay_ns, last_release_ns_);
  last_release_ns_ = release_ns;
  return {Verdict::kForward, release_ns};
}

}  // namespace wanem
