// What an S3 request's failure means and whether to send it again: pure functions, decided in
// this one place (the client only reads them), unit-tested. Thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace wanbackup::pipeline::internal {

// How a request ended, in terms that do not name libcurl: a transport failure (no HTTP
// answer) or an HTTP status with the service's error code ("SlowDown", "NoSuchKey", ...).
struct S3Outcome {
  enum class Transport {
    kNone,      // an HTTP answer arrived
    kConnect,   // could not connect or resolve
    kTimeout,   // no progress within the deadline
    kConnLost,  // sent or received part, then the connection broke
    kTls,       // certificate or TLS handshake refused
    kOther,     // anything else (a bug, out of memory)
  };
  Transport transport = Transport::kNone;
  long http_status = 0;    // when transport == kNone
  std::string error_code;  // <Code> of the error body, if any
  std::string detail;      // libcurl's message or the <Message>, for the one-line error
};

struct S3RetryPolicy {
  int max_attempts = 6;  // the first try included
  std::chrono::milliseconds first_backoff{200};
  std::chrono::milliseconds max_backoff{10'000};
};

// True when the outcome is a success (2xx; 206 for a ranged GET).
bool S3Succeeded(const S3Outcome& outcome);

// True when sending the same request again may succeed: connection failures, timeouts, lost
// connections, HTTP 500/502/503/504, 429, the "SlowDown"/"RequestTimeout" codes, and a refused
// checksum (BadDigest: what arrived was not what we sent; a retry sends it again from our
// buffer). Never for authentication or a missing object.
bool S3Transient(const S3Outcome& outcome);

// The wait before attempt `attempt` (2 = the first retry): exponential from first_backoff,
// capped at max_backoff, with `jitter` in [0, 1) taking up to half of it away.
std::chrono::milliseconds S3Backoff(const S3RetryPolicy& policy, int attempt, double jitter);

// Whether attempt `attempt` (1 = the first) that ended with `outcome` is followed by another.
bool S3ShouldRetry(const S3RetryPolicy& policy, int attempt, const S3Outcome& outcome);

// The failure as a Status with one line: "<what>: <why>" (AuthFailed for 401/403 and the
// signature codes, NotFound for 404, Unavailable/Timeout for the transport, Corruption for a
// refused checksum, IoError otherwise). Never contains credentials.
Status S3OutcomeStatus(const S3Outcome& outcome, const std::string& what);

}  // namespace wanbackup::pipeline::internal
