// CommandEngine's connections (command_engine.h): logging in and reconnecting with backoff,
// tearing down a broken one and requeueing what it carried, choosing the connection for the
// next command by how fast each delivers, and autotune's measurement windows that add or drop
// connections. Its commands: command_engine.cpp.
#include <algorithm>
#include <vector>

#include "common/trace.h"
#include "initiator/internal/command_engine.h"
#include "initiator/internal/command_engine_parts.h"
#include "initiator/internal/retry_policy.h"

namespace wanbackup::initiator::internal {
namespace {

// How often each connection's delivery rate is re-estimated, in round trips (at least 50 ms).
constexpr int kRateIntervalRtts = 2;
constexpr std::chrono::milliseconds kMinRateInterval{50};

// Autotune's measurement window: long enough to average over several round trips and loss
// recoveries.
constexpr std::chrono::seconds kMinScaleWindow{1};
constexpr int kScaleWindowRtts = 8;

// Smoothing of each connection's delivery rate: the new sample's weight.
constexpr double kRateSampleWeight = 0.25;

bool IsPermanent(const Status& s) {
  switch (s.code()) {
    case StatusCode::kAuthFailed:
    case StatusCode::kPermissionDenied:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption:
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return true;
    default:
      return false;
  }
}

}  // namespace

void CommandEngine::ManageConnections(Clock::time_point now) {
  while (static_cast<int>(slots_.size()) < target_connections_.load()) {
    auto slot = std::make_unique<Slot>();
    slot->retry_at = now;
    slots_.push_back(std::move(slot));
  }
  if (failed_) return;
  const auto wanted = static_cast<size_t>(std::max(1, target_connections_.load()));
  for (size_t i = 0; i < std::min(wanted, slots_.size()); ++i) {
    Slot& slot = *slots_[i];
    if (slot.state != Slot::State::kDown || now < slot.retry_at) continue;
    slot.state = Slot::State::kConnecting;
    WB_TRACE("slot %zu: %s", i, slot.ever_up ? "reconnecting" : "connecting");
    if (slot.ever_up) ++reconnects_;
    transport_->Connect(i, slot.ever_up);
  }
}

void CommandEngine::OnConnected(const ConnectDone& done, Clock::time_point now) {
  Slot& slot = *slots_[done.channel];
  WB_TRACE("slot %zu: login %s", done.channel,
           done.status.ok() ? "done" : done.status.message().c_str());
  if (done.status.ok()) {
    if (failed_) {
      transport_->Close(done.channel);
      slot.state = Slot::State::kDown;
      return;
    }
    slot.state = Slot::State::kUp;
    slot.ramp_bytes = config_.ramp_start_bytes != 0 ? config_.ramp_start_bytes : kRampStartBytes;
    slot.delivered = 0;
    slot.rate = 0;
    slot.last_sample = 0;
    slot.broken = false;
    const uint32_t live = ++live_connections_;
    if (live > peak_connections_.load()) peak_connections_ = live;
    return;
  }
  last_error_ = done.status;
  slot.state = Slot::State::kDown;
  if (IsPermanent(done.status)) {
    if (!failed_) FailAll(done.status);
  } else {
    slot.retry_at = now + ReconnectDelay(++slot.failures);
  }
}

void CommandEngine::RetireExtraConnections() {
  // Connections past the target (autotune dropped them) finish what they carry, then close.
  const auto wanted = static_cast<size_t>(std::max(1, target_connections_.load()));
  for (size_t i = wanted; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    if (slot.state != Slot::State::kUp || slot.outstanding > 0) continue;
    WB_TRACE("slot %zu: retired", i);
    transport_->Close(i);
    slot.state = Slot::State::kDown;
    --live_connections_;
  }
}

bool CommandEngine::Warming() const {
  // The connections the plan wants (those being retired do not count).
  const auto wanted = static_cast<size_t>(std::max(1, target_connections_.load()));
  if (slots_.size() < wanted) return true;
  for (size_t i = 0; i < wanted; ++i) {
    const Slot& slot = *slots_[i];
    if (slot.state != Slot::State::kUp || slot.ramp_bytes < config_.plan.io_size) return true;
  }
  return false;
}

std::chrono::nanoseconds CommandEngine::RoundTrip() const {
  if (min_read_latency_ == std::chrono::nanoseconds::max()) return config_.rtt;
  return std::max<std::chrono::nanoseconds>(config_.rtt, min_read_latency_);
}

int CommandEngine::CommandBudget() const {
  return std::max(1, target_connections_.load()) * config_.plan.queue_depth;
}

int CommandEngine::PickConnection() {
  // C x N commands in flight in all, shared by how fast each connection delivers (autotune.h).
  // Connections being retired take no more.
  const auto wanted = static_cast<size_t>(std::max(1, target_connections_.load()));
  loads_.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = *slots_[i];
    // A READ-paced run also keeps each connection within what it carries (autotune.h), over
    // the round trip or the quickest READ so far if the target takes longer than the link.
    const bool room =
        !config_.plan.pace_reads ||
        slot.outstanding < RateLimitedCommands(per_connection_limit_,
                                               CommandCapRate(slot.rate, slot.last_sample),
                                               RoundTrip(), config_.plan.io_size);
    const bool usable = slot.state == Slot::State::kUp && !slot.broken && i < wanted && room;
    loads_[i] = ConnectionLoad{usable, slot.outstanding, slot.rate};
  }
  return ChooseConnection(loads_, static_cast<int>(in_flight_.size()), CommandBudget(),
                          per_connection_limit_);
}

void CommandEngine::EstimateRates(Clock::time_point now) {
  const auto interval =
      std::max<std::chrono::nanoseconds>(kMinRateInterval, kRateIntervalRtts * config_.rtt);
  if (now - rate_tick_ < interval) return;
  const double seconds = std::chrono::duration<double>(now - rate_tick_).count();
  rate_tick_ = now;
  for (auto& slot : slots_) {
    if (slot->state != Slot::State::kUp) continue;  // a new login starts it afresh
    const double sample = static_cast<double>(slot->delivered) / seconds;
    slot->delivered = 0;
    if (sample == 0 && slot->outstanding == 0) continue;  // nothing asked: nothing learnt
    slot->last_sample = sample;
    slot->rate =
        slot->rate > 0 ? (1 - kRateSampleWeight) * slot->rate + kRateSampleWeight * sample : sample;
  }
  double total = 0;
  for (const auto& slot : slots_) {
    if (slot->state == Slot::State::kUp) total += slot->rate;
  }
  service_interval_ = ServiceInterval(CommandBudget(), config_.plan.io_size, total);
}

void CommandEngine::HandleEvents(const TransportEvents& events) {
  const auto now = transport_->Now();
  for (const ConnectDone& c : events.connected)
    OnConnected(c, now);
  for (const CommandDone& d : events.done)
    OnCommandDone(d);
  for (const ChannelLost& lost : events.lost) {
    Slot& slot = *slots_[lost.channel];
    if (slot.state == Slot::State::kUp && !slot.broken) {
      slot.broken = true;
      slot.broken_reason = lost.why;
    }
  }
  if (failed_) return;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]->broken && slots_[i]->state == Slot::State::kUp) {
      TearDown(i, slots_[i]->broken_reason);
    }
  }
}

void CommandEngine::TearDown(size_t index, const Status& why) {
  Slot& slot = *slots_[index];
  WB_TRACE("slot %zu: torn down: %s", index, why.message().c_str());
  last_error_ = why;
  // After Close, no command of this channel writes into its buffer: they may go elsewhere.
  transport_->Close(index);
  const auto now = transport_->Now();
  std::vector<Command*> orphans;
  for (const auto& [id, cmd] : in_flight_) {
    if (cmd->slot == static_cast<int>(index)) orphans.push_back(cmd);
  }
  // Lowest LBA first in line, as they were issued.
  std::sort(orphans.begin(), orphans.end(),
            [](const Command* a, const Command* b) { return a->lba > b->lba; });
  for (Command* cmd : orphans) {
    in_flight_.erase(cmd->id);
    cmd->slot = -1;
    --commands_in_flight_;
    bytes_in_flight_ -= cmd->bytes;
    Requeue(cmd, now);
  }
  slot.outstanding = 0;
  slot.broken = false;
  slot.state = Slot::State::kDown;
  slot.retry_at = now + ReconnectDelay(++slot.failures);
  --live_connections_;
}

void CommandEngine::MeasureAndScale(Clock::time_point now) {
  if (!config_.plan.adapt_connections || scaler_.settled()) return;
  const bool full = static_cast<int>(in_flight_.size()) >= CommandBudget();
  const bool busy = !ready_.empty() || full;
  if (Warming() || !busy) {
    window_valid_ = false;
    return;
  }
  const int up = target_connections_.load();  // not warming: every one wanted is up
  if (!window_valid_) {
    window_valid_ = true;
    window_start_ = now;
    window_bytes_ = 0;
    return;
  }
  const auto length =
      std::max<std::chrono::nanoseconds>(kMinScaleWindow, kScaleWindowRtts * config_.rtt);
  if (now - window_start_ < length) return;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  const double rate = static_cast<double>(window_bytes_) / seconds;
  window_start_ = now;
  window_bytes_ = 0;
  if (!window_warm_) {  // the first window after a change still holds TCP slow start
    window_warm_ = true;
    return;
  }
  const double rtt_s = std::chrono::duration<double>(config_.rtt).count();
  // What one connection can carry alone: the target's window, or what we keep outstanding on
  // it if that is less.
  const double per_rtt = std::min(
      kWindowBytesPerRtt, static_cast<double>(config_.plan.queue_depth) *
                              static_cast<double>(config_.plan.io_size) /
                              static_cast<double>(std::max(1, config_.round_trips_per_command)));
  const double ceiling = rtt_s > 0 ? per_rtt / rtt_s : 0;
  const int want = scaler_.OnMeasurement(up, rate, ceiling);
  WB_TRACE("scaler: %d connections carry %.1f MB/s -> %d", up, rate / 1e6, want);
  if (want != up) {
    target_connections_ = want;
    window_warm_ = false;
    window_valid_ = false;
  }
}

}  // namespace wanbackup::initiator::internal
