// What to do when a SCSI command did not succeed: the one place where retry decisions live.
// Pure functions over plain SCSI numbers (SAM status, sense key, ASC/ASCQ); thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace wanbackup::initiator::internal {

// SAM status bytes, libiscsi's pseudo statuses (iscsi.h) and SPC sense keys, by name, for code
// that must not include libiscsi (the engines, their tests).
namespace scsi {
inline constexpr int kGood = 0x00, kCheckCondition = 0x02, kConditionMet = 0x04, kBusy = 0x08;
inline constexpr int kReservationConflict = 0x18, kTaskSetFull = 0x28, kTaskAborted = 0x40;
inline constexpr int kCancelled = 0x0f000000, kError = 0x0f000001, kTimeout = 0x0f000002;
inline constexpr int kSenseNotReady = 0x2, kSenseMediumError = 0x3, kSenseHardwareError = 0x4;
inline constexpr int kSenseIllegalRequest = 0x5, kSenseUnitAttention = 0x6;
inline constexpr int kSenseAbortedCommand = 0xb;
}  // namespace scsi

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
