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

// One command on one channel: READ `bytes` from `lba` into `buffer`. `id` is the engine's;
// the transport returns it with the outcome.
struct BlockCommand {
  uint64_t id = 0;
  uint64_t lba = 0;
  uint32_t bytes = 0;
  uint8_t* buffer = nullptr;
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
  // Queues a READ on an open channel. An error means it could not be queued (the channel is
  // unusable and should be closed); nothing was sent then.
  virtual Status Read(size_t channel, const BlockCommand& command) = 0;
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

}  // namespace wanbackup::initiator::internal
