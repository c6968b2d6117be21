#include "initiator/internal/iscsi_transport.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "common/trace.h"
#include "initiator/internal/lun_query.h"
#include "initiator/internal/scsi_error.h"

namespace wanbackup::initiator::internal {

struct IscsiTransport::Pending {
  IscsiTransport* transport = nullptr;
  size_t channel = 0;
  uint64_t id = 0;
  uint64_t lba = 0;
  uint32_t blocks = 0;
  BlockOp op = BlockOp::kRead;
  scsi_iovec iov{};
  scsi_task* task = nullptr;
};

struct IscsiTransport::Channel {
  std::unique_ptr<Connection> conn;
  std::thread connector;
  bool lost = false;  // reported through Poll; waits for Close
  Clock::time_point last_tick{};
  std::unordered_map<uint64_t, std::unique_ptr<Pending>> pending;
};

IscsiTransport::IscsiTransport(ConnectionOptions options, LunInfo lun,
                               std::unique_ptr<Connection> first)
    : options_(std::move(options)),
      lun_(std::move(lun)),
      zero_block_(std::max<uint32_t>(lun_.block_size, 512), 0) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ChannelAt(0).conn = std::move(first);
}

IscsiTransport::~IscsiTransport() {
  stop_ = true;
  for (auto& channel : channels_) {
    if (channel->connector.joinable()) channel->connector.join();  // they see stop_ and give up
  }
  logins_.clear();
  // Log out politely where nothing is in flight; destroy everything else. Destroying a context
  // calls back every command it still holds, which finds collecting_ unset and only lets go.
  collecting_ = nullptr;
  for (auto& channel : channels_) {
    if (channel->conn && !channel->pending.empty()) channel->conn->Abort();
    channel->conn.reset();
    DropPending(*channel);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

IscsiTransport::Channel& IscsiTransport::ChannelAt(size_t channel) {
  while (channels_.size() <= channel)
    channels_.push_back(std::make_unique<Channel>());
  return *channels_[channel];
}

void IscsiTransport::Connect(size_t index, bool reconnect) {
  Channel& channel = ChannelAt(index);
  if (channel.connector.joinable()) channel.connector.join();
  channel.connector = std::thread([this, index, reconnect, opts = options_.Clone()] {
    Result<std::unique_ptr<Connection>> conn = Connection::Open(opts, &stop_);
    if (conn.ok()) {
      // A new session must reach the same LUN; after a reconnect, prove it is the same device.
      Status same = VerifySameLun(**conn, lun_, reconnect);
      if (!same.ok()) conn = same;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      logins_.push_back({index, std::move(conn)});
    }
    Wake();
  });
}

Status IscsiTransport::Queue(size_t index, const BlockCommand& command, const TaskMaker& make) {
  Channel& channel = ChannelAt(index);
  if (!channel.conn || channel.conn->broken()) {
    return Status::Unavailable("connection " + std::to_string(index) + " is not open");
  }
  auto pending = std::make_unique<Pending>();
  pending->transport = this;
  pending->channel = index;
  pending->id = command.id;
  pending->lba = command.lba;
  pending->blocks = command.bytes / lun_.block_size;
  pending->op = command.op;
  pending->iov.iov_base = command.buffer;
  pending->iov.iov_len = command.bytes;
  scsi_task* task = make(channel.conn->context(), pending.get());
  if (task == nullptr) {
    return Status::Unavailable(std::string("cannot queue ") + OpName(command.op) + ": " +
                               iscsi_get_error(channel.conn->context()));
  }
  pending->task = task;
  channel.pending[command.id] = std::move(pending);
  return Status::Ok();
}

Status IscsiTransport::Read(size_t index, const BlockCommand& command) {
  const int lun = lun_.lun;
  const int block = static_cast<int>(lun_.block_size);
  return Queue(index, command, [&](iscsi_context* iscsi, Pending* p) {
    return iscsi_read16_iov_task(iscsi, lun, command.lba, command.bytes, block, 0, 0, 0, 0, 0,
                                 CommandCallback, p, &p->iov, 1);
  });
}

Status IscsiTransport::Write(size_t index, const BlockCommand& command) {
  const int lun = lun_.lun;
  const int block = static_cast<int>(lun_.block_size);
  const int fua = command.fua ? 1 : 0;
  // The data stays where the engine put it (zero copy): libiscsi sends it from the iovec, which
  // lives in Pending until the callback.
  return Queue(index, command, [&](iscsi_context* iscsi, Pending* p) {
    return iscsi_write16_iov_task(iscsi, lun, command.lba, nullptr, command.bytes, block, 0, 0, fua,
                                  0, 0, CommandCallback, p, &p->iov, 1);
  });
}

Status IscsiTransport::WriteZeros(size_t index, const BlockCommand& command) {
  const int lun = lun_.lun;
  const uint32_t blocks = command.bytes / lun_.block_size;
  const int unmap = command.unmap ? 1 : 0;
  BlockCommand same = command;
  same.buffer = nullptr;
  same.bytes = command.bytes;
  return Queue(index, same, [&](iscsi_context* iscsi, Pending* p) {
    return iscsi_writesame16_task(iscsi, lun, command.lba, zero_block_.data(),
                                  static_cast<uint32_t>(zero_block_.size()), blocks, 0, unmap, 0, 0,
                                  CommandCallback, p);
  });
}

Status IscsiTransport::SynchronizeCache(size_t index, const BlockCommand& command) {
  const int lun = lun_.lun;
  const uint32_t blocks = command.bytes / lun_.block_size;
  return Queue(index, command, [&](iscsi_context* iscsi, Pending* p) {
    if (command.legacy) {  // 0 blocks from LBA 0: the whole LUN, as the engine always asks
      return iscsi_synchronizecache10_task(iscsi, lun, 0, 0, 0, 0, CommandCallback, p);
    }
    return iscsi_synchronizecache16_task(iscsi, lun, command.lba, blocks, 0, 0, CommandCallback, p);
  });
}

void IscsiTransport::Close(size_t index) {
  Channel& channel = ChannelAt(index);
  // Destroying the context calls back its commands with CANCELLED; with collecting_ unset they
  // are only let go of. Commands libiscsi no longer reports are freed after. Only then may the
  // engine hand their buffers to another channel.
  TransportEvents* saved = collecting_;
  collecting_ = nullptr;
  if (channel.conn) channel.conn->Abort();
  collecting_ = saved;
  channel.conn.reset();
  DropPending(channel);
  channel.lost = false;
}

void IscsiTransport::DropPending(Channel& channel) {
  for (auto& [id, pending] : channel.pending) {
    if (pending->task != nullptr) scsi_free_scsi_task(pending->task);
  }
  channel.pending.clear();
}

void IscsiTransport::CommandCallback(iscsi_context* iscsi, int status, void* command_data,
                                     void* data) {
  auto* pending = static_cast<Pending*>(data);
  auto* task = static_cast<scsi_task*>(command_data);
  IscsiTransport* self = pending->transport;
  Channel& channel = *self->channels_[pending->channel];
  auto it = channel.pending.find(pending->id);
  if (it == channel.pending.end() || it->second.get() != pending) {
    if (task != nullptr) scsi_free_scsi_task(task);
    return;
  }
  if (self->collecting_ != nullptr) {
    CommandDone done;
    done.id = pending->id;
    done.outcome.status = status;
    if (task != nullptr) {
      done.outcome.sense_key = task->sense.key;
      done.outcome.asc_ascq = task->sense.ascq;
      done.outcome.short_transfer = status == SCSI_STATUS_GOOD &&
                                    task->residual_status == SCSI_RESIDUAL_UNDERFLOW &&
                                    task->residual > 0;
    }
    if (status != SCSI_STATUS_GOOD) {
      done.error =
          TaskStatus(status, task, iscsi,
                     std::string(OpName(pending->op)) + " LBA " + std::to_string(pending->lba) +
                         "+" + std::to_string(pending->blocks));
    }
    self->collecting_->done.push_back(std::move(done));
  }
  channel.pending.erase(it);  // frees `pending`
  if (task != nullptr) scsi_free_scsi_task(task);
}

void IscsiTransport::TakeLogins(TransportEvents* events) {
  std::vector<Login> logins;
  {
    std::lock_guard<std::mutex> lock(mu_);
    logins.swap(logins_);
  }
  for (Login& login : logins) {
    Channel& channel = ChannelAt(login.channel);
    if (channel.connector.joinable()) channel.connector.join();
    if (login.result.ok()) {
      channel.conn = std::move(login.result).value();
      channel.lost = false;
      channel.last_tick = Clock::now();
      events->connected.push_back({login.channel, Status::Ok()});
    } else {
      events->connected.push_back({login.channel, login.result.status()});
    }
  }
}

void IscsiTransport::Poll(Clock::time_point deadline, TransportEvents* events) {
  std::vector<pollfd> fds;
  std::vector<size_t> owners;
  fds.push_back({wake_fd_, POLLIN, 0});
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& channel = *channels_[i];
    if (!channel.conn || channel.conn->broken() || channel.lost) continue;
    fds.push_back({channel.conn->fd(), channel.conn->events(), 0});
    owners.push_back(i);
  }
  const auto now = Clock::now();
  const int timeout_ms = static_cast<int>(
      std::clamp<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count(), 0,
                          kServiceTick.count()));
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0) return;  // EINTR: the engine goes round again
  if (fds[0].revents != 0) {
    uint64_t drained;
    (void)!::read(wake_fd_, &drained, sizeof drained);
  }
  TakeLogins(events);
  std::vector<short> revents;
  revents.reserve(owners.size());
  for (size_t k = 0; k < owners.size(); ++k)
    revents.push_back(fds[k + 1].revents);
  ServiceChannels(revents, owners, events);
}

void IscsiTransport::ServiceChannels(const std::vector<short>& revents,
                                     const std::vector<size_t>& owners, TransportEvents* events) {
  const auto now = Clock::now();
  collecting_ = events;
  for (size_t k = 0; k < owners.size(); ++k) {
    Channel& channel = *channels_[owners[k]];
    if (revents[k] == 0 && now - channel.last_tick < kServiceTick) continue;
    channel.last_tick = now;
    Status s = channel.conn->Service(revents[k]);
    if (!s.ok()) {
      channel.lost = true;
      events->lost.push_back({owners[k], s});
    }
  }
  collecting_ = nullptr;
}

void IscsiTransport::SleepUntil(Clock::time_point until) {
  std::this_thread::sleep_until(until);
}

void IscsiTransport::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

}  // namespace wanbackup::initiator::internal
