#include "initiator/internal/read_engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "common/cancel.h"
#include "common/trace.h"
#include "common/units.h"
#include "initiator/internal/lun_query.h"
#include "initiator/internal/retry_policy.h"
#include "initiator/internal/scsi_error.h"

namespace wanbackup::initiator::internal {
namespace {

// A new connection's READs start this small and double with each completion up to the planned
// size (a slow start of our own). A cold TCP connection cannot carry megabytes at once anyway,
// and a target that writes each Data-In PDU in one go (tgt 1.0.85 spins until the socket takes
// it, stalling its other connections) never finds the socket too small.
constexpr uint32_t kRampStartBytes = 32 << 10;

// How often each connection's delivery rate is re-estimated, in round trips (at least 50 ms).
constexpr int kRateIntervalRtts = 2;

// A command is given up after this many retries of BUSY/NOT READY/UNIT ATTENTION kind (the
// no-progress timeout usually ends things first).
constexpr int kMaxCommandRetries = 50;

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

std::string Range(uint64_t lba, uint64_t blocks) {
  return "LBA " + std::to_string(lba) + "+" + std::to_string(blocks);
}

}  // namespace

struct ReadEngine::Request {
  ReadRequest req;
  uint32_t parts_left = 0;
  Status status;
};

struct ReadEngine::Command {
  ReadEngine* engine = nullptr;
  Request* request = nullptr;
  uint64_t lba = 0;
  uint32_t bytes = 0;
  uint8_t* buffer = nullptr;
  scsi_iovec iov{};
  scsi_task* task = nullptr;  // set while in flight
  int slot = -1;              // set while in flight
  int attempts = 0;
  int medium_attempts = 0;
  Clock::time_point not_before{};
};

struct ReadEngine::Slot {
  enum class State { kDown, kConnecting, kUp };
  std::unique_ptr<Connection> conn;
  State state = State::kDown;
  int outstanding = 0;
  int failures = 0;  // consecutive failed logins or broken connections without progress
  uint32_t ramp_bytes = kRampStartBytes;  // largest READ this connection is ready for
  uint64_t delivered = 0;                 // bytes completed since the last rate estimate
  double rate = 0;                        // bytes/s, smoothed; 0 = not known yet
  bool ever_up = false;
  bool broken = false;
  Status broken_reason;
  Clock::time_point retry_at{};
  Clock::time_point last_tick{};
  std::thread connector;
};

ReadEngine::ReadEngine(IscsiSourceOptions options, std::unique_ptr<Connection> first, LunInfo lun,
                       std::chrono::nanoseconds rtt, TuningPlan plan)
    : options_(IscsiSourceOptions{options.connection.Clone(), options.lun, options.tuning,
                                  options.retry_timeout}),
      lun_(std::move(lun)),
      rtt_(rtt),
      plan_(std::move(plan)),
      per_connection_limit_(PerConnectionLimit(plan_.queue_depth, plan_.io_size)),
      scaler_(plan_.connections, plan_.max_connections) {
  IscsiUrl url;
  url.host = options_.connection.host;
  url.port = options_.connection.port;
  url.target = options_.connection.target;
  url.lun = options_.lun;
  geometry_.name = url.ToDisplayString();
  geometry_.size_bytes = lun_.size_bytes();
  geometry_.block_size = lun_.block_size;
  negotiated_ = first->negotiated();
  target_connections_ = plan_.connections;
  auto slot = std::make_unique<Slot>();
  slot->conn = std::move(first);
  slot->state = Slot::State::kUp;
  slot->ever_up = true;
  slots_.push_back(std::move(slot));
  live_connections_ = 1;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void ReadEngine::Start() {
  io_thread_ = std::thread([this] { Run(); });
}

ReadEngine::~ReadEngine() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (io_thread_.joinable()) io_thread_.join();
  for (auto& slot : slots_) {
    if (slot->connector.joinable()) slot->connector.join();  // they see stop_ and give up
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    connected_.clear();
  }
  // Log out politely where nothing is in flight; destroy everything else. Destroying a context
  // calls back every command it still holds, which finds failed_ set and only lets go of it.
  failed_ = true;
  for (auto& slot : slots_) {
    if (slot->conn && slot->outstanding > 0) slot->conn->Abort();
    slot->conn.reset();
  }
  for (auto& cmd : commands_) {
    if (cmd->task != nullptr) {
      scsi_free_scsi_task(cmd->task);
      cmd->task = nullptr;
    }
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

size_t ReadEngine::preferred_in_flight() const {
  // A full queue on every connection plus one spare each, so a connection that finishes a
  // command finds the next one waiting.
  const auto c = static_cast<size_t>(std::max(1, target_connections_.load()));
  return c * static_cast<size_t>(plan_.queue_depth) + c;
}

Status ReadEngine::Submit(const ReadRequest& r) {
  const uint64_t bs = geometry_.block_size;
  if (r.length == 0 || r.buffer == nullptr || r.offset % bs != 0 || r.length % bs != 0 ||
      r.offset > geometry_.size_bytes || r.length > geometry_.size_bytes - r.offset) {
    return Status::InvalidArgument("read request [" + std::to_string(r.offset) + ", +" +
                                   std::to_string(r.length) + ") is outside " + geometry_.name +
                                   " or not block-aligned");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fatal_.ok()) return fatal_;
    submitted_.push_back(r);
    ++outstanding_requests_;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  return Status::Ok();
}

Result<ReadCompletion> ReadEngine::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!fatal_.ok()) return fatal_;
    if (!done_.empty()) {
      ReadCompletion c = std::move(done_.front());
      done_.pop_front();
      --outstanding_requests_;
      return c;
    }
    if (outstanding_requests_ == 0) return Status::Internal("Wait() with nothing submitted");
    if (CancellationRequested() && !cancel_requested_.exchange(true)) {
      // The I/O thread stops every command first, then reports Cancelled through fatal_.
      const uint64_t one = 1;
      (void)!::write(wake_fd_, &one, sizeof one);
    }
    done_cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

SourceStats ReadEngine::Stats() const {
  SourceStats s;
  s.bytes_read = bytes_read_.load();
  s.bytes_in_flight = bytes_in_flight_.load();
  s.connections = live_connections_.load();
  s.peak_connections = peak_connections_.load();
  s.commands_in_flight = commands_in_flight_.load();
  s.retries = retries_.load();
  s.reconnects = reconnects_.load();
  s.rtt = rtt_;
  s.io_size = static_cast<uint32_t>(plan_.io_size);
  s.queue_depth = static_cast<uint32_t>(plan_.queue_depth);
  return s;
}

void ReadEngine::Run() {
  last_progress_ = Clock::now();
  rate_tick_ = last_progress_;
  while (!stop_.load()) {
    const auto now = Clock::now();
    TakeSubmissions();
    ManageConnections(now);
    if (!failed_ && cancel_requested_.load()) {
      FailAll(Status::Cancelled("reading " + geometry_.name + ": interrupted"));
    }
    if (!failed_) {
      EstimateRates(now);
      IssueCommands(now);
      MeasureAndScale(now);
      const bool work = !ready_.empty() || commands_in_flight_.load() > 0;
      if (!work) last_progress_ = now;  // idle is not stalled
      if (work && now - last_progress_ > options_.retry_timeout) FailAll(NoProgressStatus());
    }
    // Let completions gather for a moment (autotune.h, ServiceInterval) while other READs keep
    // the link busy; the kernel goes on receiving meanwhile.
    if (service_interval_.count() > 0 && commands_in_flight_.load() > 1 &&
        now < last_service_ + service_interval_) {
      std::this_thread::sleep_until(last_service_ + service_interval_);
      PollAndService(Clock::now());
    } else {
      PollAndService(now);
    }
    last_service_ = Clock::now();
  }
}

void ReadEngine::TakeSubmissions() {
  std::deque<ReadRequest> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(submitted_);
  }
  const uint64_t bs = geometry_.block_size;
  for (const ReadRequest& r : incoming) {
    auto request = std::make_unique<Request>();
    request->req = r;
    for (uint64_t off = 0; off < r.length;) {
      const uint64_t len = std::min<uint64_t>(plan_.io_size, r.length - off);
      Command* cmd = NewCommand();
      cmd->engine = this;
      cmd->request = request.get();
      cmd->lba = (r.offset + off) / bs;
      cmd->bytes = static_cast<uint32_t>(len);
      cmd->buffer = r.buffer + off;
      ready_.push_back(cmd);
      ++request->parts_left;
      off += len;
    }
    requests_.push_back(std::move(request));
  }
}

ReadEngine::Command* ReadEngine::NewCommand() {
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

void ReadEngine::ManageConnections(Clock::time_point now) {
  std::vector<Connected> results;
  {
    std::lock_guard<std::mutex> lock(mu_);
    results.swap(connected_);
  }
  for (Connected& c : results) {
    Slot& slot = *slots_[c.slot];
    if (slot.connector.joinable()) slot.connector.join();
    WB_TRACE("slot %zu: login %s", c.slot,
             c.result.ok() ? "done" : c.result.status().message().c_str());
    if (c.result.ok()) {
      slot.conn = std::move(c.result).value();
      slot.state = Slot::State::kUp;
      slot.ramp_bytes = kRampStartBytes;
      slot.delivered = 0;
      slot.rate = 0;
      slot.broken = false;
      slot.last_tick = now;
      const uint32_t live = ++live_connections_;
      if (live > peak_connections_.load()) peak_connections_ = live;
      continue;
    }
    last_error_ = c.result.status();
    slot.state = Slot::State::kDown;
    if (IsPermanent(c.result.status())) {
      FailAll(c.result.status());
    } else {
      slot.retry_at = now + ReconnectDelay(++slot.failures);
    }
  }
  while (static_cast<int>(slots_.size()) < target_connections_.load()) {
    auto slot = std::make_unique<Slot>();
    slot->retry_at = now;
    slots_.push_back(std::move(slot));
  }
  if (failed_) return;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    if (slot.state == Slot::State::kDown && now >= slot.retry_at) StartConnector(i, slot.ever_up);
  }
}

void ReadEngine::StartConnector(size_t index, bool reconnect) {
  Slot& slot = *slots_[index];
  slot.state = Slot::State::kConnecting;
  WB_TRACE("slot %zu: %s", index, reconnect ? "reconnecting" : "connecting");
  if (reconnect) ++reconnects_;
  slot.connector = std::thread([this, index, reconnect, opts = options_.connection.Clone()] {
    Result<std::unique_ptr<Connection>> conn = Connection::Open(opts, &stop_);
    if (conn.ok()) {
      // A new session must reach the same LUN; after a reconnect, prove it is the same device.
      Status same = VerifySameLun(**conn, lun_, reconnect);
      if (!same.ok()) conn = same;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_.push_back({index, std::move(conn)});
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  });
}

void ReadEngine::IssueCommands(Clock::time_point now) {
  for (size_t i = 0; i < ready_.size();) {
    Command* cmd = ready_[i];
    if (cmd->not_before > now) {
      ++i;
      continue;
    }
    const int best_index = PickConnection();
    if (best_index < 0) return;
    Slot* best = slots_[static_cast<size_t>(best_index)].get();
    const uint32_t limit = std::max<uint32_t>(best->ramp_bytes, geometry_.block_size);
    if (cmd->bytes > limit) {
      // Send the first `limit` bytes now; the rest stays first in line as its own command.
      Command* rest = NewCommand();
      *rest = *cmd;
      rest->lba = cmd->lba + limit / geometry_.block_size;
      rest->bytes = cmd->bytes - limit;
      rest->buffer = cmd->buffer + limit;
      cmd->bytes = limit;
      ++cmd->request->parts_left;
      ready_.insert(ready_.begin() + static_cast<std::ptrdiff_t>(i) + 1, rest);
    }
    cmd->iov.iov_base = cmd->buffer;
    cmd->iov.iov_len = cmd->bytes;
    scsi_task* task = iscsi_read16_iov_task(best->conn->context(), lun_.lun, cmd->lba, cmd->bytes,
                                            static_cast<int>(geometry_.block_size), 0, 0, 0, 0, 0,
                                            ReadCallback, cmd, &cmd->iov, 1);
    if (task == nullptr) {
      best->broken = true;
      best->broken_reason = Status::Unavailable(std::string("cannot queue READ(16): ") +
                                                iscsi_get_error(best->conn->context()));
      continue;  // the same command goes to another connection
    }
    WB_TRACE("slot %d: READ lba %llu bytes %u (outstanding %d)", best_index,
             static_cast<unsigned long long>(cmd->lba), cmd->bytes, best->outstanding + 1);
    cmd->task = task;
    cmd->slot = best_index;
    ++best->outstanding;
    ++commands_in_flight_;
    bytes_in_flight_ += cmd->bytes;
    ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

int ReadEngine::CommandBudget() const {
  return std::max(1, target_connections_.load()) * plan_.queue_depth;
}

int ReadEngine::PickConnection() {
  // C x N commands in flight in all, shared by how fast each connection delivers (autotune.h).
  loads_.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = *slots_[i];
    loads_[i] =
        ConnectionLoad{slot.state == Slot::State::kUp && !slot.broken, slot.outstanding, slot.rate};
  }
  return ChooseConnection(loads_, static_cast<int>(commands_in_flight_.load()), CommandBudget(),
                          per_connection_limit_);
}

void ReadEngine::EstimateRates(Clock::time_point now) {
  const auto interval =
      std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(50), kRateIntervalRtts * rtt_);
  if (now - rate_tick_ < interval) return;
  const double seconds = std::chrono::duration<double>(now - rate_tick_).count();
  rate_tick_ = now;
  for (auto& slot : slots_) {
    if (slot->state != Slot::State::kUp) continue;  // a new login starts it afresh
    const double sample = static_cast<double>(slot->delivered) / seconds;
    slot->delivered = 0;
    if (sample == 0 && slot->outstanding == 0) continue;  // nothing asked: nothing learnt
    slot->rate = slot->rate > 0 ? 0.75 * slot->rate + 0.25 * sample : sample;
  }
  double total = 0;
  for (const auto& slot : slots_) {
    if (slot->state == Slot::State::kUp) total += slot->rate;
  }
  service_interval_ = ServiceInterval(CommandBudget(), plan_.io_size, total);
}

void ReadEngine::PollAndService(Clock::time_point now) {
  std::vector<pollfd> fds;
  std::vector<size_t> owners;
  fds.push_back({wake_fd_, POLLIN, 0});
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    if (slot.state != Slot::State::kUp || !slot.conn || slot.conn->broken()) continue;
    fds.push_back({slot.conn->fd(), slot.conn->events(), 0});
    owners.push_back(i);
  }
  int timeout_ms = 50;
  if (!ready_.empty() && ready_.front()->not_before > now) {
    timeout_ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(ready_.front()->not_before - now)
            .count(),
        0, 50));
  }
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0) return;  // EINTR: go round again
  if (fds[0].revents != 0) {
    uint64_t drained;
    (void)!::read(wake_fd_, &drained, sizeof drained);
  }
  const auto after = Clock::now();
  for (size_t k = 0; k < owners.size(); ++k) {
    Slot& slot = *slots_[owners[k]];
    const short revents = fds[k + 1].revents;
    // libiscsi's command timeouts are checked when it is serviced; do so at least 4 times a
    // second even on a quiet socket.
    if (revents == 0 && after - slot.last_tick < std::chrono::milliseconds(250)) continue;
    slot.last_tick = after;
    Status s = slot.conn->Service(revents);
    if (!s.ok() && !slot.broken) {
      slot.broken = true;
      slot.broken_reason = s;
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]->broken && slots_[i]->state == Slot::State::kUp) {
      TearDown(i, slots_[i]->broken_reason);
    }
  }
}

void ReadEngine::TearDown(size_t index, const Status& why) {
  Slot& slot = *slots_[index];
  last_error_ = why;
  // Destroying the context calls back its commands with CANCELLED (they are re-queued);
  // commands libiscsi no longer reports are found below. Only then may another connection
  // reuse their buffers.
  if (slot.conn) slot.conn->Abort();
  const auto now = Clock::now();
  for (auto& owned : commands_) {
    Command* cmd = owned.get();
    if (cmd->slot != static_cast<int>(index) || cmd->task == nullptr) continue;
    scsi_free_scsi_task(cmd->task);
    cmd->task = nullptr;
    cmd->slot = -1;
    --commands_in_flight_;
    bytes_in_flight_ -= cmd->bytes;
    Requeue(cmd, now);
  }
  slot.conn.reset();
  slot.outstanding = 0;
  slot.broken = false;
  slot.state = Slot::State::kDown;
  slot.retry_at = now + ReconnectDelay(++slot.failures);
  --live_connections_;
}

void ReadEngine::ReadCallback(iscsi_context* /*iscsi*/, int status, void* command_data,
                              void* data) {
  auto* cmd = static_cast<Command*>(data);
  auto* task = static_cast<scsi_task*>(command_data);
  cmd->engine->OnCommandDone(cmd, status, task);
  if (task != nullptr) scsi_free_scsi_task(task);
}

void ReadEngine::OnCommandDone(Command* cmd, int status, scsi_task* task) {
  if (cmd->slot < 0 || cmd->task == nullptr) return;  // already accounted for
  Slot& slot = *slots_[static_cast<size_t>(cmd->slot)];
  const int slot_index = cmd->slot;
  cmd->task = nullptr;
  cmd->slot = -1;
  --slot.outstanding;
  --commands_in_flight_;
  bytes_in_flight_ -= cmd->bytes;
  if (failed_) return;  // shutting down or given up: nothing more to do with it

  CommandOutcome outcome;
  outcome.status = status;
  if (task != nullptr) {
    outcome.sense_key = task->sense.key;
    outcome.asc_ascq = task->sense.ascq;
    outcome.short_transfer = status == SCSI_STATUS_GOOD &&
                             task->residual_status == SCSI_RESIDUAL_UNDERFLOW && task->residual > 0;
  }
  const auto now = Clock::now();
  WB_TRACE("slot %d: done lba %llu status 0x%x", slot_index,
           static_cast<unsigned long long>(cmd->lba), static_cast<unsigned>(status));
  const RetryDecision d = DecideRetry(outcome, cmd->attempts);
  const std::string what = "READ(16) " + Range(cmd->lba, cmd->bytes / geometry_.block_size);
  iscsi_context* ctx = slot.conn ? slot.conn->context() : nullptr;
  switch (d.action) {
    case RetryAction::kDone:
      slot.failures = 0;
      slot.ever_up = true;
      slot.ramp_bytes =
          static_cast<uint32_t>(std::min<uint64_t>(plan_.io_size, uint64_t{slot.ramp_bytes} * 2));
      bytes_read_ += cmd->bytes;
      window_bytes_ += cmd->bytes;
      slot.delivered += cmd->bytes;
      last_progress_ = now;
      FinishPart(cmd, Status::Ok());
      return;
    case RetryAction::kRetryNow:
    case RetryAction::kRetryLater:
      last_error_ = outcome.short_transfer
                        ? Status::IoError(what + ": the target sent fewer bytes than asked")
                        : TaskStatus(status, task, ctx, what);
      if (++cmd->attempts > kMaxCommandRetries) {
        FinishPart(cmd, last_error_.WithContext("giving up after " +
                                                std::to_string(kMaxCommandRetries) + " retries"));
        return;
      }
      ++retries_;
      Requeue(cmd, now + d.delay);
      return;
    case RetryAction::kReconnect:
      // The connection is unusable (timeout, transport error, or being torn down). The command
      // is gone from libiscsi, so it can go elsewhere now.
      if (status != SCSI_STATUS_CANCELLED) {
        slot.broken = true;
        slot.broken_reason = TaskStatus(status, task, ctx, what);
        last_error_ = slot.broken_reason;
      }
      (void)slot_index;
      ++retries_;
      Requeue(cmd, now);
      return;
    case RetryAction::kRetryThenFail: {
      last_error_ = TaskStatus(status, task, ctx, what);
      if (++cmd->medium_attempts > kMediumErrorRetries) {
        FinishPart(cmd, last_error_);
        return;
      }
      ++retries_;
      Requeue(cmd, now + d.delay);
      return;
    }
    case RetryAction::kFail:
      last_error_ = TaskStatus(status, task, ctx, what);
      FinishPart(cmd, last_error_);
      return;
  }
}

void ReadEngine::Requeue(Command* cmd, Clock::time_point not_before) {
  cmd->not_before = not_before;
  ready_.push_front(cmd);  // retries go first: the consumer may be waiting for this range
}

void ReadEngine::FinishPart(Command* cmd, const Status& status) {
  Request* request = cmd->request;
  free_commands_.push_back(cmd);
  if (!status.ok() && request->status.ok()) request->status = status;
  if (--request->parts_left > 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(ReadCompletion{request->req, request->status});
  }
  done_cv_.notify_one();
  auto it = std::find_if(requests_.begin(), requests_.end(),
                         [request](const auto& r) { return r.get() == request; });
  if (it != requests_.end()) requests_.erase(it);
}

void ReadEngine::FailAll(const Status& status) {
  failed_ = true;
  // Stop every command before saying so: once Wait() reports the failure, the caller may free
  // the buffers those commands were reading into.
  for (auto& slot : slots_) {
    if (slot->conn) slot->conn->Abort();
    slot->conn.reset();
    slot->outstanding = 0;
    if (slot->state == Slot::State::kUp) {
      slot->state = Slot::State::kDown;
      --live_connections_;
    }
  }
  for (auto& cmd : commands_) {
    if (cmd->task != nullptr) {
      scsi_free_scsi_task(cmd->task);
      cmd->task = nullptr;
      cmd->slot = -1;
    }
  }
  commands_in_flight_ = 0;
  bytes_in_flight_ = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fatal_.ok()) fatal_ = status;
  }
  done_cv_.notify_all();
}

Status ReadEngine::NoProgressStatus() const {
  uint64_t first_lba = UINT64_MAX, blocks = 0;
  for (const Command* cmd : ready_) {
    if (cmd->lba < first_lba) {
      first_lba = cmd->lba;
      blocks = cmd->bytes / geometry_.block_size;
    }
  }
  for (const auto& cmd : commands_) {
    if (cmd->task != nullptr && cmd->lba < first_lba) {
      first_lba = cmd->lba;
      blocks = cmd->bytes / geometry_.block_size;
    }
  }
  std::string msg = "giving up on " + geometry_.name + ": no progress for " +
                    FormatDuration(options_.retry_timeout);
  if (first_lba != UINT64_MAX) msg += "; unread from " + Range(first_lba, blocks);
  if (!last_error_.ok()) msg += "; last error: " + last_error_.message();
  return Status(last_error_.ok() ? StatusCode::kTimeout : last_error_.code(), msg);
}

void ReadEngine::MeasureAndScale(Clock::time_point now) {
  if (!plan_.adapt_connections || scaler_.settled()) return;
  int up = 0;
  bool ramped = true;  // every connection is past its start-up ramp
  for (const auto& slot : slots_) {
    if (slot->state != Slot::State::kUp) continue;
    ++up;
    ramped = ramped && slot->ramp_bytes >= plan_.io_size;
  }
  const bool all_up = up == target_connections_.load() && up == static_cast<int>(slots_.size());
  const bool full = static_cast<int>(commands_in_flight_.load()) >= CommandBudget();
  const bool busy = !ready_.empty() || full;
  if (!all_up || !busy || !ramped) {
    window_valid_ = false;
    return;
  }
  if (!window_valid_) {
    window_valid_ = true;
    window_start_ = now;
    window_bytes_ = 0;
    return;
  }
  // Long enough to average over several round trips and loss recoveries.
  const auto length = std::max<std::chrono::nanoseconds>(std::chrono::seconds(1), 8 * rtt_);
  if (now - window_start_ < length) return;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  const double rate = static_cast<double>(window_bytes_) / seconds;
  window_start_ = now;
  window_bytes_ = 0;
  if (!window_warm_) {  // the first window after a change still holds TCP slow start
    window_warm_ = true;
    return;
  }
  const double rtt_s = std::chrono::duration<double>(rtt_).count();
  // What one connection can carry alone: the target's window, or what we keep outstanding on
  // it if that is less.
  const double per_rtt = std::min(kWindowBytesPerRtt, static_cast<double>(plan_.queue_depth) *
                                                          static_cast<double>(plan_.io_size));
  const double ceiling = rtt_s > 0 ? per_rtt / rtt_s : 0;
  const int want = scaler_.OnMeasurement(up, rate, ceiling);
  WB_TRACE("scaler: %d connections carry %.1f MB/s -> %d", up, rate / 1e6, want);
  if (want > up) {
    target_connections_ = want;
    window_warm_ = false;
    window_valid_ = false;
  }
}

}  // namespace wanbackup::initiator::internal
