// CommandEngine's commands (command_engine.h): requests split into commands, issued on the
// connection command_engine_connections.cpp picks, READs paced, completions, retries and
// fallbacks, and giving up. Its connections: command_engine_connections.cpp.
#include "initiator/internal/command_engine.h"

#include <algorithm>
#include <cstdio>

#include "common/cancel.h"
#include "common/trace.h"
#include "common/units.h"
#include "initiator/internal/command_engine_parts.h"
#include "initiator/internal/retry_policy.h"

namespace wanbackup::initiator::internal {
namespace {

// The I/O thread looks at submissions, retries and the no-progress clock at least this often.
constexpr std::chrono::milliseconds kMaxPollWait{50};

// A command is given up after this many retries of BUSY/NOT READY/UNIT ATTENTION kind (the
// no-progress timeout usually ends things first).
constexpr int kMaxCommandRetries = 50;

// The round trip in seconds, at least 1 ms (a loopback target measures ~0).
double RttSeconds(std::chrono::nanoseconds rtt) {
  return std::max(1e-3, std::chrono::duration<double>(rtt).count());
}

}  // namespace

CommandEngine::CommandEngine(std::unique_ptr<Transport> transport, CommandEngineConfig config)
    : transport_(std::move(transport)),
      config_(std::move(config)),
      per_connection_limit_(PerConnectionLimit(config_.plan.queue_depth, config_.plan.io_size)),
      pacer_(config_.plan.connections * kInitialWindowBytes / RttSeconds(config_.rtt)),
      scaler_(config_.plan.connections, config_.plan.max_connections) {
  target_connections_ = config_.plan.connections;
  auto slot = std::make_unique<Slot>();
  slot->state = Slot::State::kUp;
  slot->ever_up = true;
  slots_.push_back(std::move(slot));
  live_connections_ = 1;
}

void CommandEngine::Start() {
  io_thread_ = std::thread([this] { Run(); });
}

CommandEngine::~CommandEngine() {
  stop_ = true;
  transport_->Wake();
  if (io_thread_.joinable()) io_thread_.join();
  // transport_ goes next: it stops logins in progress and closes every channel, so no command
  // writes into a buffer once the engine is gone.
}

size_t CommandEngine::preferred_in_flight() const {
  // A full queue on every connection plus one spare each, so a connection that finishes a
  // command finds the next one waiting.
  const auto c = static_cast<size_t>(std::max(1, target_connections_.load()));
  return c * static_cast<size_t>(config_.plan.queue_depth) + c;
}

Status CommandEngine::Submit(const EngineRequest& r) {
  const SourceGeometry& g = config_.geometry;
  const uint64_t bs = g.block_size;
  const bool sync = r.op == BlockOp::kSynchronizeCache;
  const bool needs_buffer = r.op == BlockOp::kRead || r.op == BlockOp::kWrite;
  if ((r.length == 0 && !sync) || (needs_buffer && r.buffer == nullptr) || r.offset % bs != 0 ||
      r.length % bs != 0 || r.offset > g.size_bytes || r.length > g.size_bytes - r.offset) {
    return Status::InvalidArgument(std::string(OpName(r.op)) + " request [" +
                                   std::to_string(r.offset) + ", +" + std::to_string(r.length) +
                                   ") is outside " + g.name + " or not block-aligned");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fatal_.ok()) return fatal_;
    submitted_.push_back(r);
    ++outstanding_requests_;
  }
  transport_->Wake();
  return Status::Ok();
}

Result<EngineCompletion> CommandEngine::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!fatal_.ok()) return fatal_;
    if (!done_.empty()) {
      EngineCompletion c = std::move(done_.front());
      done_.pop_front();
      --outstanding_requests_;
      return c;
    }
    if (outstanding_requests_ == 0) return Status::Internal("Wait() with nothing submitted");
    if (CancellationRequested() && !cancel_requested_.exchange(true)) {
      // The I/O thread stops every command first, then reports Cancelled through fatal_.
      transport_->Wake();
    }
    done_cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

SourceStats CommandEngine::Stats() const {
  SourceStats s;
  s.bytes_read = bytes_done_.load();
  s.bytes_in_flight = bytes_in_flight_.load();
  s.connections = live_connections_.load();
  s.peak_connections = peak_connections_.load();
  s.commands_in_flight = commands_in_flight_.load();
  s.retries = retries_.load();
  s.reconnects = reconnects_.load();
  s.rtt = config_.rtt;
  s.io_size = static_cast<uint32_t>(config_.plan.io_size);
  s.queue_depth = static_cast<uint32_t>(config_.plan.queue_depth);
  return s;
}

void CommandEngine::Run() {
  last_progress_ = transport_->Now();
  rate_tick_ = last_progress_;
  TransportEvents events;
  while (!stop_.load())
    Step(&events);
}

void CommandEngine::Step(TransportEvents* events) {
  const auto now = transport_->Now();
  TakeSubmissions();
  ManageConnections(now);
  if (!failed_ && cancel_requested_.load()) {
    FailAll(Status::Cancelled(config_.activity + " " + config_.geometry.name + ": interrupted"));
  }
  if (!failed_) {
    EstimateRates(now);
    PaceRound(now);
    IssueCommands(now);
    MeasureAndScale(now);
    RetireExtraConnections();
    const bool work = !ready_.empty() || !in_flight_.empty();
    if (!work) last_progress_ = now;  // idle is not stalled
    if (work && now - last_progress_ > config_.retry_timeout) FailAll(NoProgressStatus());
  }
  // Let completions gather for a moment (autotune.h, ServiceInterval) while other READs keep
  // the link busy; the kernel goes on receiving meanwhile.
  if (service_interval_.count() > 0 && in_flight_.size() > 1 &&
      now < last_service_ + service_interval_) {
    transport_->SleepUntil(last_service_ + service_interval_);
  }
  events->clear();
  transport_->Poll(PollDeadline(transport_->Now()), events);
  HandleEvents(*events);
  last_service_ = transport_->Now();
}

CommandEngine::Clock::time_point CommandEngine::PollDeadline(Clock::time_point now) const {
  // A retry waiting for its back-off wakes the loop when due; a command that is due but found
  // no room waits for a completion like everything else.
  // A READ held by the pacer wakes it when the bucket has room (at once if that time passed
  // while the loop slept for the service interval).
  Clock::time_point deadline = now + kMaxPollWait;
  if (!ready_.empty() && pace_wake_ != Clock::time_point{}) {
    deadline = std::min(deadline, std::max(pace_wake_, now));
  }
  if (!ready_.empty() && ready_.front()->not_before > now) {
    deadline = std::min(deadline, ready_.front()->not_before);
  }
  return deadline;
}

void CommandEngine::TakeSubmissions() {
  std::deque<EngineRequest> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(submitted_);
  }
  for (const EngineRequest& r : incoming) {
    auto request = std::make_unique<Request>();
    request->req = r;
    const bool as_data = r.op == BlockOp::kWriteZeros && write_same_refused_.load();
    SplitRequest(request.get(), as_data ? BlockOp::kWrite : r.op);
    requests_.push_back(std::move(request));
  }
}

void CommandEngine::SplitRequest(Request* request, BlockOp op) {
  const EngineRequest& r = request->req;
  const uint64_t bs = config_.geometry.block_size;
  const uint64_t most = op == BlockOp::kWriteZeros
                            ? std::max<uint64_t>(bs, config_.write_same_bytes / bs * bs)
                            : config_.plan.io_size;
  const bool write_of_zeros = op == BlockOp::kWrite && r.buffer == nullptr;
  uint64_t off = 0;
  do {  // a SYNCHRONIZE CACHE of the whole LUN (length 0) is one command
    const uint64_t len = std::min<uint64_t>(most, r.length - off);
    Command* cmd = NewCommand();
    cmd->request = request;
    cmd->op = op;
    cmd->lba = (r.offset + off) / bs;
    cmd->bytes = static_cast<uint32_t>(len);
    cmd->buffer = write_of_zeros ? ZeroData() : (r.buffer != nullptr ? r.buffer + off : nullptr);
    // A WRITE's all-zero piece (a zero region inside a larger write) goes as WRITE SAME too:
    // no data over the WAN. It keeps its buffer for a target that refuses WRITE SAME.
    if (op == BlockOp::kWrite && !write_of_zeros && cmd->buffer != nullptr &&
        !write_same_refused_.load() && AllZero(cmd->buffer, len)) {
      cmd->op = BlockOp::kWriteZeros;
    }
    ready_.push_back(cmd);
    ++request->parts_left;
    off += len;
  } while (off < r.length);
}

CommandEngine::Command* CommandEngine::NewCommand() {
  Command* cmd;
  if (!free_commands_.empty()) {
    cmd = free_commands_.back();
    free_commands_.pop_back();
  } else {
    commands_.push_back(std::make_unique<Command>());
    cmd = commands_.back().get();
  }
  *cmd = Command{};
  return cmd;
}

void CommandEngine::PaceRound(Clock::time_point now) {
  if (!config_.plan.pace_reads) return;
  if (round_start_ == Clock::time_point{}) {
    round_start_ = now;
    pace_refill_ = now;
  }
  const auto length = std::max<std::chrono::nanoseconds>(kPaceMinRound, config_.rtt);
  const double window_rate = static_cast<double>(CommandBudget()) *
                             static_cast<double>(config_.plan.io_size) / RttSeconds(config_.rtt);
  if (now - round_start_ >= length) {
    const double seconds = std::chrono::duration<double>(now - round_start_).count();
    const double delivered = static_cast<double>(round_bytes_) / seconds;
    pacer_.OnRound(delivered, round_app_limited_, Warming(), window_rate);
    WB_TRACE("pacer: round delivered %.1f MB/s%s, min latency %.2f ms; pace %.1f MB/s%s",
             delivered / 1e6, round_app_limited_ ? " (ran out of READs)" : "",
             std::chrono::duration<double, std::milli>(round_min_latency_).count(),
             pacer_.rate(window_rate) / 1e6, pacer_.starting() ? " (start-up)" : "");
    round_start_ = now;
    round_bytes_ = 0;
    round_app_limited_ = false;
    round_min_latency_ = std::chrono::nanoseconds::max();
  }
  // Room for one READ at most: two go back to back, never a bunch.
  const double depth = static_cast<double>(config_.plan.io_size);
  const double rate = pacer_.rate(window_rate);
  pace_rate_ = rate;
  const double refill = rate * std::chrono::duration<double>(now - pace_refill_).count();
  pace_tokens_ = std::min(depth, pace_tokens_ + refill);  // the pace is never 0 (ReadPacer)
  pace_refill_ = now;
}

void CommandEngine::IssueCommands(Clock::time_point now) {
  pace_wake_ = Clock::time_point{};
  for (size_t i = 0; i < ready_.size();) {
    Command* cmd = ready_[i];
    if (cmd->not_before > now) {
      ++i;
      continue;
    }
    const bool paced = config_.plan.pace_reads && cmd->op == BlockOp::kRead;
    if (paced && pace_tokens_ <= 0) {
      const double wait_s = -pace_tokens_ / std::max(1.0, pace_rate_);
      pace_wake_ = now + std::chrono::nanoseconds(static_cast<int64_t>(wait_s * 1e9) + 1);
      return;
    }
    const int best_index = PickConnection();
    if (best_index < 0) return;
    Slot& best = *slots_[static_cast<size_t>(best_index)];
    if (cmd->op == BlockOp::kRead || cmd->op == BlockOp::kWrite) {
      SplitToRamp(i, std::max<uint32_t>(best.ramp_bytes, config_.geometry.block_size));
    }
    cmd->id = next_command_id_++;
    const EngineRequest& req = cmd->request->req;
    Status queued =
        Send(*transport_, static_cast<size_t>(best_index),
             BlockCommand{cmd->id, cmd->lba, cmd->bytes, cmd->buffer, cmd->op, req.fua, req.unmap,
                          cmd->op == BlockOp::kSynchronizeCache && sync16_refused_.load()});
    if (!queued.ok()) {
      best.broken = true;
      best.broken_reason = queued;
      continue;  // the same command goes to another connection
    }
    WB_TRACE("slot %d: %s lba %llu bytes %u (outstanding %d)", best_index, OpName(cmd->op),
             static_cast<unsigned long long>(cmd->lba), cmd->bytes, best.outstanding + 1);
    cmd->slot = best_index;
    cmd->issued = now;
    in_flight_[cmd->id] = cmd;
    ++best.outstanding;
    ++commands_in_flight_;
    bytes_in_flight_ += cmd->bytes;
    if (paced) pace_tokens_ -= cmd->bytes;
    ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // Everything due went out and the budget has room: the consumer, not the link, set the pace.
  if (static_cast<int>(in_flight_.size()) < CommandBudget()) round_app_limited_ = true;
}

CommandEngine::Command* CommandEngine::SplitToRamp(size_t ready_index, uint32_t limit) {
  Command* cmd = ready_[ready_index];
  if (cmd->bytes <= limit) return cmd;
  // Send the first `limit` bytes now; the rest stays first in line as its own command.
  Command* rest = NewCommand();
  *rest = *cmd;
  rest->lba = cmd->lba + limit / config_.geometry.block_size;
  rest->bytes = cmd->bytes - limit;
  rest->buffer = cmd->buffer + limit;
  cmd->bytes = limit;
  ++cmd->request->parts_left;
  ready_.insert(ready_.begin() + static_cast<std::ptrdiff_t>(ready_index) + 1, rest);
  return cmd;
}

void CommandEngine::OnCommandDone(const CommandDone& done) {
  auto it = in_flight_.find(done.id);
  if (it == in_flight_.end()) return;  // its channel was closed: already re-queued
  Command* cmd = it->second;
  in_flight_.erase(it);
  Slot& slot = *slots_[static_cast<size_t>(cmd->slot)];
  WB_TRACE("slot %d: done lba %llu status 0x%x", cmd->slot,
           static_cast<unsigned long long>(cmd->lba), static_cast<unsigned>(done.outcome.status));
  cmd->slot = -1;
  --slot.outstanding;
  --commands_in_flight_;
  bytes_in_flight_ -= cmd->bytes;
  if (DecideRetry(done.outcome, cmd->attempts).action != RetryAction::kDone) {
    OnCommandFailed(cmd, slot, done);
    return;
  }
  slot.failures = 0;
  slot.ever_up = true;
  bytes_done_ += cmd->bytes;
  if (cmd->op == BlockOp::kRead || cmd->op == BlockOp::kWrite) {
    // Only data on the wire measures a connection (WRITE SAME and SYNC carry none).
    slot.ramp_bytes = static_cast<uint32_t>(
        std::min<uint64_t>(config_.plan.io_size, uint64_t{slot.ramp_bytes} * 2));
    window_bytes_ += cmd->bytes;
    slot.delivered += cmd->bytes;
    if (cmd->op == BlockOp::kRead) {
      round_bytes_ += cmd->bytes;
      const auto latency = transport_->Now() - cmd->issued;
      round_min_latency_ = std::min(round_min_latency_, latency);
      min_read_latency_ = std::min(min_read_latency_, latency);
    }
  } else if (cmd->op == BlockOp::kWriteZeros) {
    bytes_zeroed_ += cmd->bytes;
  }
  last_progress_ = transport_->Now();
  FinishPart(cmd, Status::Ok());
}

void CommandEngine::OnCommandFailed(Command* cmd, Slot& slot, const CommandDone& done) {
  const auto now = transport_->Now();
  if (FallBackToWrite(cmd, done) || FallBackToSync10(cmd, done)) return;
  const RetryDecision d = DecideRetry(done.outcome, cmd->attempts);
  const std::string what = std::string(OpName(cmd->op)) + " " + Range(cmd->lba, cmd->bytes);
  const Status error =
      done.outcome.short_transfer
          ? Status::IoError(what + ": the target " + (cmd->op == BlockOp::kRead ? "sent" : "took") +
                            " fewer bytes than asked")
          : (done.error.ok() ? Status::IoError(what + ": failed") : done.error);
  if (done.outcome.status != scsi::kCancelled) last_error_ = error;
  switch (d.action) {
    case RetryAction::kDone:
      break;  // not reached: OnCommandDone handles success
    case RetryAction::kRetryNow:
    case RetryAction::kRetryLater:
      if (++cmd->attempts > kMaxCommandRetries) {
        FinishPart(cmd, error.WithContext("giving up after " + std::to_string(kMaxCommandRetries) +
                                          " retries"));
        return;
      }
      ++retries_;
      Requeue(cmd, now + d.delay);
      return;
    case RetryAction::kReconnect:
      // The connection is unusable (timeout, transport error, or being torn down). The command
      // is gone from the transport, so it can go elsewhere now.
      if (done.outcome.status != scsi::kCancelled && !slot.broken) {
        slot.broken = true;
        slot.broken_reason = error;
      }
      ++retries_;
      Requeue(cmd, now);
      return;
    case RetryAction::kRetryThenFail:
      if (++cmd->medium_attempts > kMediumErrorRetries) {
        FinishPart(cmd, error);
        return;
      }
      ++retries_;
      Requeue(cmd, now + d.delay);
      return;
    case RetryAction::kFail:
      FinishPart(cmd, error);
      return;
  }
}

// A target that does not know SYNCHRONIZE CACHE(16) (ILLEGAL REQUEST) gets the 10-byte one,
// once; if that fails too, the failure is the run's.
bool CommandEngine::FallBackToSync10(Command* cmd, const CommandDone& done) {
  if (cmd->op != BlockOp::kSynchronizeCache || done.outcome.status != scsi::kCheckCondition ||
      done.outcome.sense_key != scsi::kSenseIllegalRequest || sync16_refused_.exchange(true)) {
    return false;
  }
  WB_TRACE("SYNCHRONIZE CACHE(16) refused (%s): trying SYNCHRONIZE CACHE(10)",
           done.error.message().c_str());
  cmd->attempts = 0;
  Requeue(cmd, transport_->Now());
  return true;
}

bool CommandEngine::FallBackToWrite(Command* cmd, const CommandDone& done) {
  if (cmd->op != BlockOp::kWriteZeros || done.outcome.status != scsi::kCheckCondition ||
      done.outcome.sense_key != scsi::kSenseIllegalRequest) {
    return false;
  }
  // The target does not do WRITE SAME (or not with UNMAP): zeros go as data from now on.
  if (!write_same_refused_.exchange(true)) {
    WB_TRACE("WRITE SAME refused (%s): writing zeros", done.error.message().c_str());
  }
  // The range becomes WRITEs of at most io_size from the zero buffer, first in line.
  const uint32_t step = static_cast<uint32_t>(std::min<uint64_t>(config_.plan.io_size, cmd->bytes));
  std::vector<Command*> parts;
  for (uint32_t off = step; off < cmd->bytes; off += step) {
    Command* part = NewCommand();
    part->request = cmd->request;
    part->op = BlockOp::kWrite;
    part->lba = cmd->lba + off / config_.geometry.block_size;
    part->bytes = std::min(step, cmd->bytes - off);
    part->buffer = ZeroData();
    ++cmd->request->parts_left;
    parts.push_back(part);
  }
  cmd->op = BlockOp::kWrite;
  cmd->bytes = step;
  cmd->buffer = ZeroData();
  cmd->attempts = 0;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it)
    Requeue(*it, transport_->Now());
  Requeue(cmd, transport_->Now());
  return true;
}

uint8_t* CommandEngine::ZeroData() {
  // Allocated once, at its final size: commands in flight point into it.
  if (zeros_.empty()) zeros_.resize(config_.plan.io_size);
  return zeros_.data();
}

void CommandEngine::Requeue(Command* cmd, Clock::time_point not_before) {
  cmd->not_before = not_before;
  ready_.push_front(cmd);  // retries go first: the consumer may be waiting for this range
}

void CommandEngine::FinishPart(Command* cmd, const Status& status) {
  Request* request = cmd->request;
  free_commands_.push_back(cmd);
  if (!status.ok() && request->status.ok()) request->status = status;
  if (--request->parts_left > 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(EngineCompletion{request->req, request->status});
  }
  done_cv_.notify_one();
  auto it = std::find_if(requests_.begin(), requests_.end(),
                         [request](const auto& r) { return r.get() == request; });
  if (it != requests_.end()) requests_.erase(it);
}

void CommandEngine::FailAll(const Status& status) {
  failed_ = true;
  // Stop every command before saying so: once Wait() reports the failure, the caller may free
  // the buffers those commands were reading into.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    slot.outstanding = 0;
    if (slot.state == Slot::State::kUp) {
      transport_->Close(i);
      slot.state = Slot::State::kDown;
      --live_connections_;
    }
  }
  for (auto& [id, cmd] : in_flight_)
    cmd->slot = -1;
  in_flight_.clear();
  commands_in_flight_ = 0;
  bytes_in_flight_ = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fatal_.ok()) fatal_ = status;
  }
  done_cv_.notify_all();
}

std::string CommandEngine::Range(uint64_t lba, uint32_t bytes) const {
  const uint64_t blocks = bytes / config_.geometry.block_size;
  return "LBA " + std::to_string(lba) + " (" + std::to_string(blocks) +
         (blocks == 1 ? " block)" : " blocks)");
}

Status CommandEngine::NoProgressStatus() const {
  const Command* first = nullptr;
  for (const Command* cmd : ready_) {
    if (first == nullptr || cmd->lba < first->lba) first = cmd;
  }
  for (const auto& [id, cmd] : in_flight_) {
    if (first == nullptr || cmd->lba < first->lba) first = cmd;
  }
  std::string msg = "giving up on " + config_.geometry.name + ": no progress for " +
                    FormatDuration(config_.retry_timeout);
  if (first != nullptr)
    msg += "; " + config_.unfinished + " from " + Range(first->lba, first->bytes);
  if (!last_error_.ok()) msg += "; last error: " + last_error_.message();
  return Status(last_error_.ok() ? StatusCode::kTimeout : last_error_.code(), msg);
}

}  // namespace wanbackup::initiator::internal
