#include "store/internal/s3_retry.h"

#include <algorithm>

namespace wanbackup::pipeline::internal {

bool S3Succeeded(const S3Outcome& outcome) {
  return outcome.transport == S3Outcome::Transport::kNone && outcome.http_status >= 200 &&
         outcome.http_status < 300;
}

bool S3Transient(const S3Outcome& outcome) {
  using T = S3Outcome::Transport;
  switch (outcome.transport) {
    case T::kConnect:
    case T::kTimeout:
    case T::kConnLost:
      return true;
    case T::kTls:
    case T::kOther:
      return false;
    case T::kNone:
      break;
  }
  if (outcome.error_code == "SlowDown" || outcome.error_code == "RequestTimeout" ||
      outcome.error_code == "InternalError" || outcome.error_code == "ServiceUnavailable" ||
      outcome.error_code == "BadDigest" || outcome.error_code == "XAmzContentSHA256Mismatch") {
    return true;
  }
  const long s = outcome.http_status;
  return s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

std::chrono::milliseconds S3Backoff(const S3RetryPolicy& policy, int attempt, double jitter) {
  std::chrono::milliseconds wait = policy.first_backoff;
  for (int i = 2; i < attempt && wait < policy.max_backoff; ++i)
    wait *= 2;
  wait = std::min(wait, policy.max_backoff);
  const double keep = 1.0 - std::clamp(jitter, 0.0, 0.999) / 2;
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(wait.count()) * keep));
}

bool S3ShouldRetry(const S3RetryPolicy& policy, int attempt, const S3Outcome& outcome) {
  return !S3Succeeded(outcome) && attempt < policy.max_attempts && S3Transient(outcome);
}

namespace {

std::string Why(const S3Outcome& o) {
  std::string why = "HTTP " + std::to_string(o.http_status);
  if (!o.error_code.empty()) why += " " + o.error_code;
  if (!o.detail.empty()) why += " (" + o.detail + ")";
  return why;
}

}  // namespace

Status S3OutcomeStatus(const S3Outcome& o, const std::string& what) {
  using T = S3Outcome::Transport;
  switch (o.transport) {
    case T::kConnect:
      return Status::Unavailable(what + ": cannot connect: " + o.detail);
    case T::kTimeout:
      return Status::Timeout(what + ": timed out: " + o.detail);
    case T::kConnLost:
      return Status::Unavailable(what + ": connection lost: " + o.detail);
    case T::kTls:
      return Status::AuthFailed(what + ": TLS refused: " + o.detail);
    case T::kOther:
      return Status::IoError(what + ": " + o.detail);
    case T::kNone:
      break;
  }
  const std::string& c = o.error_code;
  if (o.http_status == 401 || o.http_status == 403 || c == "SignatureDoesNotMatch" ||
      c == "InvalidAccessKeyId" || c == "AccessDenied") {
    return Status::AuthFailed(what +
                              ": refused by the S3 service, check AWS_ACCESS_KEY_ID and "
                              "AWS_SECRET_ACCESS_KEY: " +
                              Why(o));
  }
  if (o.http_status == 404) return Status::NotFound(what + ": not found: " + Why(o));
  if (c == "BadDigest" || c == "XAmzContentSHA256Mismatch" || c == "InvalidDigest") {
    return Status::Corruption(what + ": the data arrived damaged: " + Why(o));
  }
  if (S3Transient(o)) return Status::Unavailable(what + ": " + Why(o));
  return Status::IoError(what + ": " + Why(o));
}

}  // namespace wanbackup::pipeline::internal
