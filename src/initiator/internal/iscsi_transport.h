// IscsiTransport: the Transport over libiscsi. Each channel is one Connection (one TCP
// connection, one session); logins run on short-lived connector threads (Connection::Open +
// VerifySameLun) so several overlap and none stalls the I/O thread; Poll() is one poll() over
// every socket plus an eventfd for Wake().
//
// libiscsi checks its command timeouts only when serviced, so every open channel is serviced at
// least every kServiceTick, even on a quiet socket. Per-command state (the iovec, the task) lives
// here until libiscsi lets go of it: destroying a context calls back every command it still
// holds, and those calls must find their state.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "initiator/connection_options.h"
#include "initiator/internal/connection.h"
#include "initiator/internal/transport.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator::internal {

class IscsiTransport final : public Transport {
 public:
  static constexpr std::chrono::milliseconds kServiceTick{250};

  // `first` becomes channel 0, already open. New channels log in with `options` and must reach
  // the LUN `lun` describes.
  IscsiTransport(ConnectionOptions options, LunInfo lun, std::unique_ptr<Connection> first);
  // Stops logins in progress, logs out idle channels (bounded) and destroys the rest.
  ~IscsiTransport() override;
  IscsiTransport(const IscsiTransport&) = delete;
  IscsiTransport& operator=(const IscsiTransport&) = delete;

  Clock::time_point Now() const override { return Clock::now(); }
  void Connect(size_t index, bool reconnect) override;
  Status Read(size_t index, const BlockCommand& command) override;
  Status Write(size_t index, const BlockCommand& command) override;
  Status WriteZeros(size_t index, const BlockCommand& command) override;
  Status SynchronizeCache(size_t index, const BlockCommand& command) override;
  void Close(size_t index) override;
  void Poll(Clock::time_point deadline, TransportEvents* events) override;
  void SleepUntil(Clock::time_point until) override;
  void Wake() override;

 private:
  struct Pending;
  struct Channel;

  Channel& ChannelAt(size_t channel);
  void TakeLogins(TransportEvents* events);
  void ServiceChannels(const std::vector<short>& revents, const std::vector<size_t>& owners,
                       TransportEvents* events);
  void DropPending(Channel& channel);
  // Builds the libiscsi task of one command, with `pending` as its callback data.
  using TaskMaker = std::function<scsi_task*(iscsi_context* iscsi, Pending* pending)>;
  Status Queue(size_t index, const BlockCommand& command, const TaskMaker& make);
  static void CommandCallback(iscsi_context* iscsi, int status, void* command_data, void* data);

  const ConnectionOptions options_;
  const LunInfo lun_;
  std::vector<uint8_t> zero_block_;  // WRITE SAME's one block of zeros, shared by every command
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Channel>> channels_;
  TransportEvents* collecting_ = nullptr;  // where callbacks put outcomes, during Poll

  std::mutex mu_;  // guards logins_
  struct Login {
    size_t channel;
    Result<std::unique_ptr<Connection>> result;
  };
  std::vector<Login> logins_;
};

}  // namespace wanbackup::initiator::internal
