#include "initiator/internal/retry_policy.h"

#include <algorithm>

namespace wanbackup::initiator::internal {
namespace {

using namespace scsi;
constexpr int kNotReady = kSenseNotReady, kMediumError = kSenseMediumError;
constexpr int kHardwareError = kSenseHardwareError, kUnitAttention = kSenseUnitAttention;
constexpr int kAbortedCommand = kSenseAbortedCommand;

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
