// The private parts of CommandEngine (command_engine.h) that both of its source files use:
// command_engine.cpp (requests, commands, issuing, completions, retries) and
// command_engine_connections.cpp (connections: logins, teardown, rates, scaling).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "initiator/internal/command_engine.h"

namespace wanbackup::initiator::internal {

// A new connection's READs start this small and double with each completion up to the planned
// size (a slow start of our own). A cold TCP connection cannot carry megabytes at once anyway,
// and a target that writes each Data-In PDU in one go (tgt 1.0.85 spins until the socket takes
// it, stalling its other connections) never finds the socket too small.
constexpr uint32_t kRampStartBytes = 32 << 10;

struct CommandEngine::Request {
  EngineRequest req;
  uint32_t parts_left = 0;
  Status status;
};

struct CommandEngine::Command {
  Request* request = nullptr;
  BlockOp op = BlockOp::kRead;
  uint64_t lba = 0;
  uint32_t bytes = 0;
  uint8_t* buffer = nullptr;
  uint64_t id = 0;  // while in flight: the id the transport knows it by
  int slot = -1;    // while in flight: the channel carrying it
  int attempts = 0;
  int medium_attempts = 0;
  Clock::time_point not_before{};
  Clock::time_point issued{};  // while in flight: when it was sent
};

struct CommandEngine::Slot {
  enum class State { kDown, kConnecting, kUp };
  State state = State::kDown;
  int outstanding = 0;
  int failures = 0;  // consecutive failed logins or broken connections without progress
  uint32_t ramp_bytes = kRampStartBytes;  // largest READ this connection is ready for
  uint64_t delivered = 0;                 // bytes completed since the last rate estimate
  double rate = 0;                        // bytes/s, smoothed; 0 = not known yet
  double last_sample = 0;                 // bytes/s, the latest estimate's sample
  bool ever_up = false;
  bool broken = false;
  Status broken_reason;
  Clock::time_point retry_at{};
};

}  // namespace wanbackup::initiator::internal
