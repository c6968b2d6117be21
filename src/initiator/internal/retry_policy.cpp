#include "initiator/internal/retry_policy.h"

#include <algorithm>

namespace wanbackup::initiator::internal {
namespace {

// SAM status bytes and libiscsi's pseudo statuses (iscsi.h).
constexpr int kGood = 0x00, kCheckCondition = 0x02, kConditionMet = 0x04, kBusy = 0x08;
constexpr int kReservationConflict = 0x18, kTaskSetFull = 0x28, kTaskAborted = 0x40;
constexpr int kCancelled = 0x0f000000, kError = 0x0f000001, kTimeout = 0x0f000002;
// Sense keys (SPC).
constexpr int kNotReady = 0x2, kMediumError = 0x3, kHardwareError = 0x4, kUnitAttention = 0x6;
constexpr int kAbortedCommand = 0xb;

std::chrono::milliseconds Backoff(int attempt) {
  // 10 ms doubling to 2 s: a busy target usually clears within a few commands.
  const int shift = std::min(attempt, 8);
  return std::chrono::milliseconds(std::min(2000, 10 << shift));
}

}  // namespace

RetryDecision DecideRetry(const CommandOutcome& o, int attempt) {
  switch (o.status) {
    case kGood:
    case kConditionMet:
      if (o.short_transfer) return {RetryAction::kRetryLater, Backoff(attempt)};
      return {RetryAction::kDone, {}};
    case kBusy:
    case kTaskSetFull:
    case kReservationConflict:
    case kTaskAborted:
      return {RetryAction::kRetryLater, Backoff(attempt)};
    case kCancelled:
    case kError:
    case kTimeout:
      return {RetryAction::kReconnect, {}};
    case kCheckCondition:
      switch (o.sense_key) {
        case kUnitAttention:
          return {RetryAction::kRetryNow, {}};
        case kNotReady:
        case kAbortedCommand:
          return {RetryAction::kRetryLater, Backoff(attempt)};
        case kMediumError:
        case kHardwareError:
          return {RetryAction::kRetryThenFail, Backoff(attempt)};
        default:
          return {RetryAction::kFail, {}};
      }
    default:
      return {RetryAction::kReconnect, {}};
  }
}

std::chrono::milliseconds ReconnectDelay(int failures) {
  const int shift = std::clamp(failures - 1, 0, 6);
  return std::chrono::milliseconds(std::min(30000, 500 << shift));
}

}  // namespace wanbackup::initiator::internal
