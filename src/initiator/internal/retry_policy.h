// What to do when a SCSI command did not succeed: the one place where retry decisions live.
// Pure functions over plain SCSI numbers (SAM status, sense key, ASC/ASCQ); thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace wanbackup::initiator::internal {

// How a command ended, in libiscsi's terms (status values are SAM status bytes, plus libiscsi's
// pseudo statuses for cancelled/error/timeout).
struct CommandOutcome {
  int status = 0;
  int sense_key = 0;
  int asc_ascq = 0;             // (ASC << 8) | ASCQ
  bool short_transfer = false;  // GOOD, but fewer bytes than asked
};

enum class RetryAction {
  kDone,           // succeeded
  kRetryNow,       // send again at once (unit attention)
  kRetryLater,     // send again after `delay` (busy, not ready, short transfer)
  kReconnect,      // the connection is unusable: tear it down, re-issue elsewhere
  kRetryThenFail,  // a medium error: a few more tries, then give up on the range
  kFail,           // permanent: give up on the range now
};

struct RetryDecision {
  RetryAction action = RetryAction::kDone;
  std::chrono::milliseconds delay{0};
};

// `attempt` counts previous tries of this command (0 on the first failure).
RetryDecision DecideRetry(const CommandOutcome& outcome, int attempt);

// Back-off before reconnecting after `failures` consecutive failed attempts: 0.5 s doubling
// to 30 s.
std::chrono::milliseconds ReconnectDelay(int failures);

// A medium error is retried this many times before the range is reported unreadable.
inline constexpr int kMediumErrorRetries = 2;

}  // namespace wanbackup::initiator::internal
