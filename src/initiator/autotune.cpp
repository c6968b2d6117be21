#include "initiator/autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace wanbackup::initiator {
namespace {

uint64_t RoundDown(uint64_t value, uint64_t multiple) {
  return value / multiple * multiple;
}

// MaxBurstLength as negotiated, or kAssumedMaxBurst when the login did not say.
uint64_t BurstBytes(const NegotiatedParams& negotiated) {
  return negotiated.max_burst_length != 0 ? negotiated.max_burst_length : kAssumedMaxBurst;
}

// PlanTransfer's steps, in order. Each takes the request and what the steps before chose.

// C: as given, else 1 on a LAN and enough for the assumed link's bandwidth-delay product.
int ChooseConnections(const TuningRequest& r, double rtt_s) {
  if (r.connections != 0) return r.connections;
  if (rtt_s < kShortRttSeconds) return 1;  // one connection fills the link; more only cost CPU
  const int c =
      static_cast<int>(std::ceil(kAssumedLinkBytesPerSecond * rtt_s / kSharedWindowBytesPerRtt));
  return std::clamp(c, kMinWanConnections, MaxConnections(r.rtt));
}

// B: as given or the default, within the LUN's transfer limit and size, whole blocks.
uint64_t ChooseIoSize(const TuningRequest& r, uint64_t block, std::string* notes) {
  uint64_t b = r.io_size != 0 ? r.io_size : kDefaultIoSize;
  b = std::clamp<uint64_t>(b, block, kMaxIoSize);
  if (r.max_transfer_bytes != 0 && b > r.max_transfer_bytes) {
    b = r.max_transfer_bytes;
    *notes += " B limited by the LUN's maximum transfer length;";
  }
  if (r.lun_size != 0) b = std::min(b, std::max<uint64_t>(r.lun_size, block));
  return std::max<uint64_t>(RoundDown(b, block), block);
}

// N: as given, else together the C connections keep one bandwidth-delay product of the assumed
// link outstanding, at least 1 MiB and 2 READs each (the next one is there when one completes)
// and no more than the target's socket takes (see autotune.h).
int ChooseQueueDepth(const TuningRequest& r, double rtt_s, int c, uint64_t b) {
  if (r.queue_depth != 0) return r.queue_depth;
  const double bdp = kAssumedLinkBytesPerSecond * rtt_s;
  const int most = std::max(2, static_cast<int>(kOutstandingBytesPerConnection / b));
  const int least = std::max(2, static_cast<int>((kMinBytesPerConnection + b - 1) / b));
  const int n = static_cast<int>(std::ceil(bdp / static_cast<double>(c) / static_cast<double>(b)));
  const int hi = std::min(most, kMaxQueueDepth);
  return std::clamp(n, std::min(least, hi), hi);
}

// Shrinks N, then C (when chosen here), then B, then C, until C × (N + 1) × B fits `cap`.
void FitMemory(const TuningRequest& r, uint64_t block, uint64_t cap, int* c, int* n, uint64_t* b,
               std::string* notes) {
  auto in_flight = [&] { return static_cast<uint64_t>(*c) * static_cast<uint64_t>(*n + 1) * *b; };
  if (in_flight() <= cap) return;
  *notes += " reduced to fit --max-memory;";
  while (in_flight() > cap && *n > 1)
    --*n;
  while (in_flight() > cap && *c > 1 && r.connections == 0)
    --*c;
  while (in_flight() > cap && *b > std::max<uint64_t>(kMinIoSize, block)) {
    *b = std::max<uint64_t>(RoundDown(*b / 2, block), std::max<uint64_t>(kMinIoSize, block));
  }
  while (in_flight() > cap && *c > 1)
    --*c;
}

std::string Explain(const TuningPlan& plan, double rtt_s, const std::string& notes,
                    const char* commands = "READs") {
  const int c = plan.connections, n = plan.queue_depth;
  const uint64_t b = plan.io_size;
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "RTT %.1f ms: %d connection%s x %d %s x %llu KiB in flight (%llu MiB)%s%s",
      rtt_s * 1e3, c, c == 1 ? "" : "s", n, commands, static_cast<unsigned long long>(b >> 10),
      static_cast<unsigned long long>(uint64_t(c) * uint64_t(n) * b >> 20),
      plan.adapt_connections && plan.max_connections > c ? ", more connections while they help"
                                                         : "",
      plan.pace_reads ? ", paced over the round trip" : "");
  std::string explanation = buf;
  if (!notes.empty()) explanation += ";" + notes.substr(0, notes.size() - 1);
  return explanation;
}

// B for WRITEs (autotune.h): the unsolicited size when it is worth a command, else that plus one
// burst; within the LUN's transfer limit and size, whole blocks.
uint64_t ChooseWriteSize(const TuningRequest& r, const NegotiatedParams& negotiated, uint64_t block,
                         std::string* notes) {
  if (r.io_size != 0) return ChooseIoSize(r, block, notes);
  const uint64_t unsolicited = UnsolicitedWriteBytes(negotiated);
  TuningRequest sized = r;
  sized.io_size =
      unsolicited >= kMinUnsolicitedWrite ? unsolicited : unsolicited + BurstBytes(negotiated);
  return ChooseIoSize(sized, block, notes);
}

void FillPlan(const TuningRequest& r, uint64_t cap, int c, int n, uint64_t b, TuningPlan* plan) {
  plan->connections = c;
  plan->queue_depth = n;
  plan->io_size = b;
  plan->adapt_connections = r.connections == 0;
  const uint64_t per_connection = static_cast<uint64_t>(n + 1) * b;
  plan->max_connections =
      plan->adapt_connections
          ? static_cast<int>(std::clamp<uint64_t>(cap / per_connection, static_cast<uint64_t>(c),
                                                  static_cast<uint64_t>(MaxConnections(r.rtt))))
          : c;
}

}  // namespace

uint64_t UnsolicitedWriteBytes(const NegotiatedParams& n) {
  if (!n.initial_r2t) return n.first_burst_length;  // unsolicited Data-Out up to FirstBurstLength
  if (!n.immediate_data) return 0;
  if (n.target_max_recv_data_segment_length == 0) return n.first_burst_length;
  return std::min(n.first_burst_length, n.target_max_recv_data_segment_length);
}

int WriteRoundTrips(uint64_t write_bytes, const NegotiatedParams& negotiated) {
  const uint64_t unsolicited = UnsolicitedWriteBytes(negotiated);
  const uint64_t burst = BurstBytes(negotiated);
  const uint64_t solicited = write_bytes > unsolicited ? write_bytes - unsolicited : 0;
  return static_cast<int>(1 + (solicited + burst - 1) / burst);
}

std::string DescribeWriteCost(uint64_t write_bytes, const NegotiatedParams& negotiated) {
  const int trips = WriteRoundTrips(write_bytes, negotiated);
  return std::to_string(trips) + (trips == 1 ? " round trip" : " round trips") + " per WRITE (" +
         std::to_string(UnsolicitedWriteBytes(negotiated) >> 10) + " KiB unsolicited, bursts of " +
         std::to_string(BurstBytes(negotiated) >> 10) + " KiB)";
}

NegotiatedParams WithOneRoundTripKeys(const NegotiatedParams& negotiated) {
  NegotiatedParams open = negotiated;
  open.initial_r2t = false;
  open.first_burst_length = std::max(negotiated.first_burst_length, kInitiatorBurstLength);
  return open;
}

std::string KeysForOneRoundTripWrites(const NegotiatedParams& negotiated) {
  const NegotiatedParams open = WithOneRoundTripKeys(negotiated);
  std::string keys;
  if (open.initial_r2t != negotiated.initial_r2t) keys = "InitialR2T=No";
  if (open.first_burst_length != negotiated.first_burst_length) {
    keys += (keys.empty() ? "" : " and ") + std::string("FirstBurstLength=") +
            std::to_string(open.first_burst_length);
  }
  return keys;
}

TuningPlan PlanWrite(const TuningRequest& r, const NegotiatedParams& negotiated) {
  const uint64_t block = std::max<uint32_t>(r.block_size, 512);
  const double rtt_s = std::chrono::duration<double>(r.rtt).count();
  std::string notes;
  int c = ChooseConnections(r, rtt_s);  // a read's count, unless more fit (below)
  uint64_t b = ChooseWriteSize(r, negotiated, block, &notes);
  const int trips = WriteRoundTrips(b, negotiated);
  const uint64_t cap = std::max<uint64_t>(BufferBudget(r.max_memory), 2 * block);
  int n = r.queue_depth;
  if (n == 0) {
    const double k = std::ceil(kWriteMargin * kAssumedLinkBytesPerSecond *
                               (rtt_s * trips + kWriteRecoverySeconds) / static_cast<double>(b));
    const auto per_connection = [&](int connections) {
      return std::clamp(static_cast<int>(std::ceil(k / connections)), 2, kMaxQueueDepth);
    };
    n = per_connection(c);
    // On a WAN the K WRITEs go over every connection the round trip allows (autotune.h, above
    // kWriteMargin), not a read's count, as long as that fits the memory cap as it is: each
    // connection holds one spare buffer, and a tight --max-memory keeps its WRITEs in flight.
    if (r.connections == 0 && rtt_s >= kShortRttSeconds) {
      for (int more = MaxConnections(r.rtt); more > c; --more) {
        const int m = per_connection(more);
        if (static_cast<uint64_t>(more) * static_cast<uint64_t>(m + 1) * b <= cap) {
          c = more;
          n = m;
          break;
        }
      }
    }
  }
  FitMemory(r, block, cap, &c, &n, &b, &notes);
  TuningPlan plan;
  FillPlan(r, cap, c, n, b, &plan);
  notes += " " + DescribeWriteCost(b, negotiated) + ";";
  plan.explanation = Explain(plan, rtt_s, notes, "WRITEs");
  return plan;
}

TuningPlan PlanTransfer(const TuningRequest& r) {
  const uint64_t block = std::max<uint32_t>(r.block_size, 512);
  const double rtt_s = std::chrono::duration<double>(r.rtt).count();
  std::string notes;
  int c = ChooseConnections(r, rtt_s);
  uint64_t b = ChooseIoSize(r, block, &notes);
  int n = ChooseQueueDepth(r, rtt_s, c, b);
  const uint64_t cap = std::max<uint64_t>(BufferBudget(r.max_memory), 2 * block);
  FitMemory(r, block, cap, &c, &n, &b, &notes);

  TuningPlan plan;
  FillPlan(r, cap, c, n, b, &plan);
  plan.pace_reads = rtt_s >= kShortRttSeconds && c * n > 1;
  plan.explanation = Explain(plan, rtt_s, notes);
  return plan;
}

ConnectionScaler::ConnectionScaler(int start, int max, double min_gain)
    : max_(std::max(start, max)), min_gain_(min_gain) {
  settled_ = start >= max_;
}

int ConnectionScaler::OnMeasurement(int connections, double bytes_per_second,
                                    double per_connection_ceiling) {
  if (settled_) return connections;
  if (best_rate_ > 0 && bytes_per_second < best_rate_ * (1 - kStepLossToUndo) &&
      best_connections_ < connections) {
    settled_ = true;  // the last step cost throughput (more flows than the link bears): go back
    return best_connections_;
  }
  if (per_connection_ceiling > 0 && connections > 0 &&
      bytes_per_second / connections < kPlateauShare * per_connection_ceiling) {
    settled_ = true;  // connections are not the limit: the link or the target is
    best_rate_ = std::max(best_rate_, bytes_per_second);
    return connections;
  }
  if (best_rate_ > 0 && bytes_per_second < best_rate_ * min_gain_) {
    settled_ = true;  // the last step did not pay: the link is full, or the target is the limit
    best_rate_ = std::max(best_rate_, bytes_per_second);
    return connections;
  }
  best_rate_ = bytes_per_second;
  best_connections_ = connections;
  if (connections >= max_) {
    settled_ = true;
    return connections;
  }
  return std::min(max_, connections + (connections + 1) / 2);
}

int PerConnectionLimit(int queue_depth, uint64_t io_size) {
  const uint64_t n = static_cast<uint64_t>(std::max(1, queue_depth));
  const uint64_t socket = kOutstandingBytesPerConnection / std::max<uint64_t>(1, io_size);
  return static_cast<int>(std::max(n, std::min(2 * n, socket)));
}

int ChooseConnection(std::span<const ConnectionLoad> connections, int in_flight, int budget,
                     int per_connection_limit) {
  if (in_flight >= budget) return -1;
  double known = 0;
  int rated = 0;
  for (const ConnectionLoad& c : connections) {
    if (c.usable && c.rate > 0) {
      known += c.rate;
      ++rated;
    }
  }
  const double average = rated > 0 ? known / rated : 1.0;
  int best = -1;
  double best_finish = 0;
  for (size_t i = 0; i < connections.size(); ++i) {
    const ConnectionLoad& c = connections[i];
    if (!c.usable || c.outstanding >= per_connection_limit) continue;
    const double rate = c.rate > 0 ? c.rate : average;
    const double finish = c.outstanding == 0 ? -1.0 : (c.outstanding + 1) / rate;
    if (best < 0 || finish < best_finish) {
      best = static_cast<int>(i);
      best_finish = finish;
    }
  }
  return best;
}

int MaxConnections(std::chrono::nanoseconds rtt) {
  const double rtt_s = std::chrono::duration<double>(rtt).count();
  const double windows = kLongRttWindowMargin * kAssumedLinkBytesPerSecond * rtt_s /
                         static_cast<double>(kReceiveWindowBytes);
  if (!(windows > kMaxConnections)) return kMaxConnections;  // also NaN
  return static_cast<int>(std::min<double>(std::ceil(windows), kMaxLongRttConnections));
}

uint64_t BufferBudget(uint64_t max_memory) {
  const uint64_t reserve = std::min<uint64_t>(16ull << 20, max_memory / 4);
  return max_memory - reserve;
}

std::chrono::nanoseconds ServiceInterval(int budget, uint64_t io_size, double bytes_per_second) {
  if (budget < 2 || io_size == 0 || !(bytes_per_second > 0)) return std::chrono::nanoseconds(0);
  const double cover_s =
      static_cast<double>(budget - 1) * static_cast<double>(io_size) / bytes_per_second;
  const auto pause = std::chrono::nanoseconds(static_cast<int64_t>(cover_s / 8 * 1e9));
  return std::min<std::chrono::nanoseconds>(pause, kMaxServiceInterval);
}

int RateLimitedCommands(int limit, double bytes_per_second, std::chrono::nanoseconds rtt,
                        uint64_t io_size) {
  if (!(bytes_per_second > 0) || io_size == 0) return limit;
  const double window = bytes_per_second * std::chrono::duration<double>(rtt).count();
  const double commands = std::ceil(kRateWindows * window / static_cast<double>(io_size));
  return std::clamp(static_cast<int>(std::min<double>(commands, limit)), std::min(2, limit), limit);
}

double CommandCapRate(double smoothed, double latest_sample) {
  return std::max(smoothed, latest_sample);
}

void ReadPacer::OnRound(double delivered, bool app_limited, bool warming, double window_rate) {
  highest_ = std::max(highest_, delivered);
  if (!starting_ || warming || app_limited) return;
  if (highest_ >= growth_base_ * kPaceStartupGrowth) {
    growth_base_ = highest_;
    flat_rounds_ = 0;
  } else {
    ++flat_rounds_;
  }
  // Done when the pace reaches the window's, or the delivered rate stopped growing.
  starting_ = kPaceStartupGain * highest_ < window_rate && flat_rounds_ < kPaceStartupRounds;
}

double ReadPacer::rate(double window_rate) const {
  const double steady = kPaceWindowShare * window_rate;
  if (!starting_) return steady;
  return std::min(steady, std::max(kPaceStartupGain * highest_, initial_rate_));
}

}  // namespace wanbackup::initiator
