#include "support/fake_transport.h"

#include <algorithm>
#include <cstring>

namespace wanbackup::testing {

using wbi::scsi::kCheckCondition;
using wbi::scsi::kGood;
using wbi::scsi::kSenseIllegalRequest;
using wbi::scsi::kTimeout;

FakeTransport::FakeTransport(FakeLinkOptions options)
    : options_(std::move(options)), start_(Clock::time_point{} + std::chrono::hours(1)) {
  now_ = start_;
  Channel& first = ChannelAt(0);
  first.open = true;
  first.logins = 1;
  logins_ = 1;
}

uint8_t FakeTransport::ContentAt(uint64_t offset) {
  const uint64_t word = (offset / 8 + 1) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint8_t>(word >> (8 * (offset % 8)));
}

void FakeTransport::FillContent(uint64_t offset, uint8_t* out, size_t size) {
  size_t i = 0;
  for (; i < size && (offset + i) % 8 != 0; ++i)
    out[i] = ContentAt(offset + i);
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = ((offset + i) / 8 + 1) * 0x9E3779B97F4A7C15ull;
    std::memcpy(out + i, &word, 8);  // little-endian, as ContentAt reads it
  }
  for (; i < size; ++i)
    out[i] = ContentAt(offset + i);
}

FakeTransport::Channel& FakeTransport::ChannelAt(size_t channel) {
  if (channels_.size() <= channel) channels_.resize(channel + 1);
  return channels_[channel];
}

int FakeTransport::OpenCount() const {
  return static_cast<int>(
      std::count_if(channels_.begin(), channels_.end(), [](const Channel& c) { return c.open; }));
}

double FakeTransport::RateFor(size_t channel) const {
  double rate = options_.channel_bytes_per_second;
  if (options_.slowdown) rate /= options_.slowdown(channel);
  return rate;
}

FakeTransport::Clock::time_point FakeTransport::Send(Channel& channel, size_t index,
                                                     uint32_t bytes) {
  const auto seconds = [](double s) {
    return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
  };
  auto finish = std::max(now_, channel.busy_until) + seconds(bytes / RateFor(index));
  if (options_.link_bytes_per_second) {
    const double link = options_.link_bytes_per_second(std::max(1, OpenCount()));
    link_busy_until_ = std::max(now_, link_busy_until_) + seconds(bytes / link);
    finish = std::max(finish, link_busy_until_);
  }
  channel.busy_until = finish;
  return finish;
}

void FakeTransport::Schedule(Clock::time_point when, Event event) {
  events_.emplace(when, std::move(event));
}

FakeTransport::Clock::time_point FakeTransport::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void FakeTransport::Connect(size_t index, bool reconnect) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& channel = ChannelAt(index);
  channel.open = false;
  ++channel.generation;
  ++channel.logins;
  ++logins_;
  if (reconnect) ++reconnect_logins_;
  Event event;
  event.kind = Event::Kind::kConnected;
  event.channel = index;
  event.generation = channel.generation;
  event.status = on_login ? on_login(index, channel.logins) : Status::Ok();
  Schedule(now_ + options_.login_round_trips * options_.rtt, std::move(event));
}

Status FakeTransport::Read(size_t index, const wbi::BlockCommand& command) {
  return Command(index, command);
}

Status FakeTransport::Write(size_t index, const wbi::BlockCommand& command) {
  return Command(index, command);
}

Status FakeTransport::WriteZeros(size_t index, const wbi::BlockCommand& command) {
  return Command(index, command);
}

Status FakeTransport::SynchronizeCache(size_t index, const wbi::BlockCommand& command) {
  return Command(index, command);
}

Status FakeTransport::Command(size_t index, const wbi::BlockCommand& command) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& channel = ChannelAt(index);
  if (!channel.open)
    return Status::Unavailable("fake channel " + std::to_string(index) + " is closed");
  const FakeCommand seen{index,      channel.logins, ++channel.reads, command.lba,   command.bytes,
                         command.op, command.fua,    command.unmap,   command.legacy};
  const bool read = command.op == wbi::BlockOp::kRead;
  if (read) read_log_.emplace_back(now_, command.bytes);
  FakeAnswer answer =
      read ? (on_read ? on_read(seen) : FakeAnswer{}) : (on_write ? on_write(seen) : FakeAnswer{});
  const uint64_t offset = command.lba * options_.block_size;
  if (offset + command.bytes > options_.lun_bytes) {
    if (read) ++reads_past_end_;
    answer = FakeAnswer{FakeAnswer::Kind::kStatus, kCheckCondition, kSenseIllegalRequest};
  }
  // When the answer is due: a READ's data goes target to initiator, then GOOD; a WRITE's goes
  // the other way, in bursts that each wait for an R2T (see the header).
  Clock::time_point data_at = now_ + options_.rtt;
  if (read) {
    data_at = Send(channel, index, command.bytes) + options_.rtt;
  } else if (command.op == wbi::BlockOp::kWrite) {
    const uint64_t solicited =
        command.bytes > options_.unsolicited_bytes ? command.bytes - options_.unsolicited_bytes : 0;
    const uint64_t bursts = (solicited + options_.max_burst_bytes - 1) /
                            std::max<uint32_t>(1, options_.max_burst_bytes);
    data_at = Send(channel, index, command.bytes) + options_.rtt * static_cast<int64_t>(1 + bursts);
  }
  Answer(channel, index, command, answer, data_at);
  return Status::Ok();
}

void FakeTransport::Answer(Channel& channel, size_t index, const wbi::BlockCommand& command,
                           FakeAnswer answer, Clock::time_point data_at) {
  Event event;
  event.kind = Event::Kind::kDone;
  event.channel = index;
  event.generation = channel.generation;
  event.command = command;
  event.done.id = command.id;
  const std::string what =
      std::string("fake ") + wbi::OpName(command.op) + " LBA " + std::to_string(command.lba);
  switch (answer.kind) {
    case FakeAnswer::Kind::kData:
      event.data_bytes = command.bytes;
      event.done.outcome.status = kGood;
      Schedule(data_at, std::move(event));
      break;
    case FakeAnswer::Kind::kShort:
      event.data_bytes = command.op == wbi::BlockOp::kRead ? command.bytes / 2 : 0;
      event.done.outcome.status = kGood;
      event.done.outcome.short_transfer = true;
      Schedule(data_at, std::move(event));
      break;
    case FakeAnswer::Kind::kStatus:
      event.done.outcome.status = answer.status;
      event.done.outcome.sense_key = answer.sense_key;
      event.done.error = Status::IoError(what + ": status " + std::to_string(answer.status) +
                                         " sense key " + std::to_string(answer.sense_key));
      Schedule(command.op == wbi::BlockOp::kRead ? now_ + options_.rtt : data_at, std::move(event));
      break;
    case FakeAnswer::Kind::kHang:
      event.done.outcome.status = kTimeout;
      event.done.error = Status::Timeout(what + ": no answer within the command timeout");
      Schedule(now_ + options_.command_timeout, std::move(event));
      break;
    case FakeAnswer::Kind::kLoseChannel: {
      Event lost;
      lost.kind = Event::Kind::kLost;
      lost.channel = index;
      lost.generation = channel.generation;
      lost.status = Status::Unavailable("fake connection " + std::to_string(index) + " reset");
      Schedule(now_ + options_.rtt / 2, std::move(lost));
      break;
    }
  }
}

void FakeTransport::Land(const wbi::BlockCommand& command) {
  if (disk_.empty()) {
    disk_.resize(options_.lun_bytes);
    FillContent(0, disk_.data(), disk_.size());
  }
  const uint64_t offset = command.lba * options_.block_size;
  switch (command.op) {
    case wbi::BlockOp::kWrite:
      std::memcpy(disk_.data() + offset, command.buffer, command.bytes);
      bytes_written_ += command.bytes;
      ++writes_after_sync_;
      return;
    case wbi::BlockOp::kWriteZeros:
      std::memset(disk_.data() + offset, 0, command.bytes);
      bytes_zeroed_ += command.bytes;
      ++write_sames_;
      if (command.unmap) ++unmaps_;
      ++writes_after_sync_;
      return;
    case wbi::BlockOp::kSynchronizeCache:
      ++syncs_;
      writes_after_sync_ = 0;
      return;
    case wbi::BlockOp::kRead:
      return;
  }
}

void FakeTransport::Close(size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& channel = ChannelAt(index);
  if (channel.open) ++closes_;
  channel.open = false;
  ++channel.generation;  // nothing scheduled for it happens any more: no buffer is written
  channel.busy_until = now_;
}

void FakeTransport::Deliver(Event& event, wbi::TransportEvents* events) {
  Channel& channel = ChannelAt(event.channel);
  if (event.generation != channel.generation) return;
  switch (event.kind) {
    case Event::Kind::kConnected:
      if (event.status.ok()) {
        channel.open = true;
        channel.reads = 0;
        channel.busy_until = now_;
        max_open_ = std::max(max_open_, OpenCount());
      }
      events->connected.push_back({event.channel, event.status});
      return;
    case Event::Kind::kLost:
      if (!channel.open) return;
      events->lost.push_back({event.channel, event.status});
      return;
    case Event::Kind::kDone:
      if (!channel.open) return;
      if (event.command.op != wbi::BlockOp::kRead) {
        if (!event.done.outcome.short_transfer && event.done.outcome.status == kGood) {
          Land(event.command);  // a WRITE lands with its GOOD status
        }
        if (event.command.op == wbi::BlockOp::kWrite) channel.bytes += event.data_bytes;
      } else if (event.data_bytes > 0) {
        const uint64_t offset = event.command.lba * options_.block_size;
        if (disk_.empty()) {
          FillContent(offset, event.command.buffer, event.data_bytes);
        } else {
          std::memcpy(event.command.buffer, disk_.data() + offset, event.data_bytes);
        }
        channel.bytes += event.data_bytes;
      }
      events->done.push_back(std::move(event.done));
      return;
  }
}

void FakeTransport::Poll(Clock::time_point deadline, wbi::TransportEvents* events) {
  std::unique_lock<std::mutex> lock(mu_);
  if (woken_) {
    woken_ = false;
    return;
  }
  if (events_.empty() || events_.begin()->first > deadline) {
    if (events_.empty()) {
      // Nothing in flight: the engine may be waiting for the consumer. Give it a real moment
      // before letting virtual time pass (a retry's back-off, the no-progress clock).
      if (wake_cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return woken_; })) {
        woken_ = false;
        return;
      }
    }
    now_ = std::max(now_, deadline);
    return;
  }
  now_ = std::max(now_, events_.begin()->first);
  while (!events_.empty() && events_.begin()->first <= now_) {
    Event event = std::move(events_.begin()->second);
    events_.erase(events_.begin());
    Deliver(event, events);
  }
}

void FakeTransport::SleepUntil(Clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ = std::max(now_, until);
}

void FakeTransport::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  wake_cv_.notify_all();
}

int FakeTransport::logins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return logins_;
}

int FakeTransport::closes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closes_;
}

int FakeTransport::reconnect_logins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reconnect_logins_;
}

int FakeTransport::reads_past_end() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_past_end_;
}

std::vector<std::pair<FakeTransport::Clock::time_point, uint32_t>> FakeTransport::read_log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return read_log_;
}

uint64_t FakeTransport::bytes_on(size_t channel) const {
  std::lock_guard<std::mutex> lock(mu_);
  return channel < channels_.size() ? channels_[channel].bytes : 0;
}

int FakeTransport::max_open_channels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_open_;
}

int FakeTransport::open_channels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return OpenCount();
}

std::chrono::nanoseconds FakeTransport::elapsed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_ - start_;
}

std::vector<uint8_t> FakeTransport::Disk() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!disk_.empty()) return disk_;
  std::vector<uint8_t> disk(options_.lun_bytes);
  FillContent(0, disk.data(), disk.size());
  return disk;
}

uint64_t FakeTransport::bytes_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_written_;
}

uint64_t FakeTransport::bytes_zeroed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_zeroed_;
}

int FakeTransport::write_sames() const {
  std::lock_guard<std::mutex> lock(mu_);
  return write_sames_;
}

int FakeTransport::unmaps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unmaps_;
}

int FakeTransport::syncs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return syncs_;
}

int FakeTransport::writes_after_sync() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_after_sync_;
}

}  // namespace wanbackup::testing
