// Transport: the seam between an engine's logic (scheduling, windows, autotune, retry,
// reconnect) and the wire. The engine sees numbered channels (one iSCSI session each) that open,
// carry block commands and get lost; it never sees a socket, a libiscsi context or the clock.
// IscsiTransport (iscsi_transport.h) is the real one; tests drive the engine through a scripted
// fake with a virtual clock (tests/support/fake_transport.h), so the engine's decisions are
// tested in milliseconds without root.
//
// Threading: every method is called from the engine's I/O thread, except Wake() (any thread).
// Events are only delivered by Poll(): nothing calls back into the engine.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "initiator/internal/retry_policy.h"

namespace wanbackup::initiator::internal {

// What a command does. kRead: READ(16) of `bytes` into `buffer`. kWrite: WRITE(16) of `bytes`
// from `buffer` (not modified; FUA when `fua`). kWriteZeros: WRITE SAME(16) of one all-zero
// block over `bytes` (no buffer; the UNMAP bit when `unmap`). kSynchronizeCache:
// SYNCHRONIZE CACHE(16) of `bytes` from `lba`, 0 bytes meaning to the end of the LUN (with
// `legacy`, SYNCHRONIZE CACHE(10)).
enum class BlockOp : uint8_t { kRead, kWrite, kWriteZeros, kSynchronizeCache };

// The command's name as SCSI calls it, for messages ("READ(16)").
const char* OpName(BlockOp op);

// One command on one channel. `id` is the engine's; the transport returns it with the outcome.
struct BlockCommand {
  uint64_t id = 0;
  uint64_t lba = 0;
  uint32_t bytes = 0;
  uint8_t* buffer = nullptr;
  BlockOp op = BlockOp::kRead;
  bool fua = false;     // kWrite: the target writes through its cache before GOOD
  bool unmap = false;   // kWriteZeros: the target may deallocate the blocks (they read as zeros)
  bool legacy = false;  // kSynchronizeCache: the 10-byte CDB, for targets without the 16-byte one
};

struct CommandDone {
  uint64_t id = 0;
  CommandOutcome outcome;
  Status error;  // when the outcome is not GOOD: what went wrong, naming the command and range
};

struct ConnectDone {
  size_t channel = 0;
  Status status;  // OK: the channel is open and reaches the same LUN
};

struct ChannelLost {
  size_t channel = 0;
  Status why;
};

struct TransportEvents {
  std::vector<CommandDone> done;
  std::vector<ConnectDone> connected;
  std::vector<ChannelLost> lost;

  bool empty() const { return done.empty() && connected.empty() && lost.empty(); }
  void clear() {
    done.clear();
    connected.clear();
    lost.clear();
  }
};

class Transport {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~Transport() = default;

  virtual Clock::time_point Now() const = 0;
  // Starts opening channel `channel` (channels are numbered from 0; numbers are reused after
  // Close). With `reconnect`, the new session must prove it reaches the same device (serial and
  // designator), not just a LUN of the same size. The result arrives through Poll.
  virtual void Connect(size_t channel, bool reconnect) = 0;
  // Queue a command on an open channel, each one kind of `command.op` (see BlockOp). An error
  // means it could not be queued (the channel is unusable and should be closed); nothing was
  // sent then. The buffer of a READ or WRITE belongs to the transport until the outcome (or
  // Close).
  virtual Status Read(size_t channel, const BlockCommand& command) = 0;
  virtual Status Write(size_t channel, const BlockCommand& command) = 0;
  virtual Status WriteZeros(size_t channel, const BlockCommand& command) = 0;
  virtual Status SynchronizeCache(size_t channel, const BlockCommand& command) = 0;
  // Drops an open channel at once. Its commands end without an outcome, and none of them
  // writes into its buffer after Close returns.
  virtual void Close(size_t channel) = 0;
  // Waits until `deadline`, a Wake(), or activity, and appends what happened to `events`.
  // May return early with nothing.
  virtual void Poll(Clock::time_point deadline, TransportEvents* events) = 0;
  // Lets completions gather until `until` (the coalescing pause, autotune.h ServiceInterval).
  virtual void SleepUntil(Clock::time_point until) = 0;
  // Makes a Poll in progress (or the next one) return at once. Thread-safe.
  virtual void Wake() = 0;
};

// Queues `command` through the method its op names.
inline Status Send(Transport& transport, size_t channel, const BlockCommand& command) {
  switch (command.op) {
    case BlockOp::kRead:
      return transport.Read(channel, command);
    case BlockOp::kWrite:
      return transport.Write(channel, command);
    case BlockOp::kWriteZeros:
      return transport.WriteZeros(channel, command);
    case BlockOp::kSynchronizeCache:
      return transport.SynchronizeCache(channel, command);
  }
  return Status::Internal("unknown block command");
}

inline const char* OpName(BlockOp op) {
  switch (op) {
    case BlockOp::kRead:
      return "READ(16)";
    case BlockOp::kWrite:
      return "WRITE(16)";
    case BlockOp::kWriteZeros:
      return "WRITE SAME(16)";
    case BlockOp::kSynchronizeCache:
      return "SYNCHRONIZE CACHE(16)";
  }
  return "?";
}

}  // namespace wanbackup::initiator::internal
