#include "store/internal/s3_retry.h"

#include <catch2/catch.hpp>

using namespace wanbackup;
using namespace wanbackup::pipeline::internal;
using std::chrono::milliseconds;

namespace {

S3Outcome S3Http(long status, std::string code = "") {
  S3Outcome o;
  o.http_status = status;
  o.error_code = std::move(code);
  return o;
}

S3Outcome S3Transport(S3Outcome::Transport t) {
  S3Outcome o;
  o.transport = t;
  o.detail = "Connection refused";
  return o;
}

}  // namespace

TEST_CASE("s3 retry: server errors, throttling and lost connections are retried", "[s3][retry]") {
  const S3RetryPolicy policy;
  CHECK(S3ShouldRetry(policy, 1, S3Http(500)));
  CHECK(S3ShouldRetry(policy, 1, S3Http(503, "SlowDown")));
  CHECK(S3ShouldRetry(policy, 1, S3Http(429)));
  CHECK(S3ShouldRetry(policy, 1, S3Http(400, "RequestTimeout")));
  CHECK(S3ShouldRetry(policy, 1, S3Http(400, "BadDigest")));
  CHECK(S3ShouldRetry(policy, 1, S3Transport(S3Outcome::Transport::kConnect)));
  CHECK(S3ShouldRetry(policy, 1, S3Transport(S3Outcome::Transport::kTimeout)));
  CHECK(S3ShouldRetry(policy, 1, S3Transport(S3Outcome::Transport::kConnLost)));
}

TEST_CASE("s3 retry: refusals, missing objects, TLS failures and successes are not retried",
          "[s3][retry]") {
  const S3RetryPolicy policy;
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Http(200)));
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Http(206)));
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Http(403, "SignatureDoesNotMatch")));
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Http(404, "NoSuchKey")));
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Http(400, "InvalidArgument")));
  CHECK_FALSE(S3ShouldRetry(policy, 1, S3Transport(S3Outcome::Transport::kTls)));
}

TEST_CASE("s3 retry: attempts stop at the policy's maximum", "[s3][retry]") {
  S3RetryPolicy policy;
  policy.max_attempts = 3;
  CHECK(S3ShouldRetry(policy, 2, S3Http(503)));
  CHECK_FALSE(S3ShouldRetry(policy, 3, S3Http(503)));
}

TEST_CASE("s3 retry: backoff doubles from the first wait up to the cap, jitter takes at most half",
          "[s3][retry]") {
  S3RetryPolicy policy;
  policy.first_backoff = milliseconds(200);
  policy.max_backoff = milliseconds(1000);
  CHECK(S3Backoff(policy, 2, 0.0) == milliseconds(200));
  CHECK(S3Backoff(policy, 3, 0.0) == milliseconds(400));
  CHECK(S3Backoff(policy, 4, 0.0) == milliseconds(800));
  CHECK(S3Backoff(policy, 5, 0.0) == milliseconds(1000));
  CHECK(S3Backoff(policy, 50, 0.0) == milliseconds(1000));
  CHECK(S3Backoff(policy, 2, 0.999) >= milliseconds(100));
  CHECK(S3Backoff(policy, 2, 0.5) == milliseconds(150));
}

TEST_CASE("s3 retry: failures become one line with the status code that fits", "[s3][retry]") {
  const Status auth = S3OutcomeStatus(S3Http(403, "SignatureDoesNotMatch"), "listing s3:x/b");
  CHECK(auth.code() == StatusCode::kAuthFailed);
  CHECK(auth.message().find("listing s3:x/b: ") == 0);
  CHECK(auth.message().find("SignatureDoesNotMatch") != std::string::npos);
  CHECK(auth.message().find('\n') == std::string::npos);
  CHECK(S3OutcomeStatus(S3Http(404, "NoSuchBucket"), "w").code() == StatusCode::kNotFound);
  CHECK(S3OutcomeStatus(S3Http(400, "BadDigest"), "w").code() == StatusCode::kCorruption);
  CHECK(S3OutcomeStatus(S3Http(503), "w").code() == StatusCode::kUnavailable);
  CHECK(S3OutcomeStatus(S3Http(400, "InvalidArgument"), "w").code() == StatusCode::kIoError);
  CHECK(S3OutcomeStatus(S3Transport(S3Outcome::Transport::kConnect), "w").code() ==
        StatusCode::kUnavailable);
  CHECK(S3OutcomeStatus(S3Transport(S3Outcome::Transport::kTimeout), "w").code() ==
        StatusCode::kTimeout);
}
