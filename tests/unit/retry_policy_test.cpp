#include "initiator/internal/retry_policy.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wanbackup::initiator::internal::CommandOutcome;
using wanbackup::initiator::internal::DecideRetry;
using wanbackup::initiator::internal::ReconnectDelay;
using wanbackup::initiator::internal::RetryAction;

namespace {

CommandOutcome Sense(int key, int asc_ascq = 0) {
  return {0x02, key, asc_ascq, false};
}

}  // namespace

TEST_CASE("retry: good status is done and a short transfer is retried", "[retry]") {
  CHECK(DecideRetry({0, 0, 0, false}, 0).action == RetryAction::kDone);
  CHECK(DecideRetry({0, 0, 0, true}, 0).action == RetryAction::kRetryLater);
}

TEST_CASE("retry: unit attention is answered by sending again at once", "[retry]") {
  CHECK(DecideRetry(Sense(0x6, 0x2900), 0).action == RetryAction::kRetryNow);
}

TEST_CASE("retry: busy and task set full back off longer each time up to 2 s", "[retry]") {
  const auto first = DecideRetry({0x08, 0, 0, false}, 0);
  const auto later = DecideRetry({0x28, 0, 0, false}, 5);
  const auto much_later = DecideRetry({0x08, 0, 0, false}, 30);
  CHECK(first.action == RetryAction::kRetryLater);
  CHECK(later.delay > first.delay);
  CHECK(much_later.delay == 2000ms);
}

TEST_CASE("retry: timeouts and transport errors mean a new connection", "[retry]") {
  CHECK(DecideRetry({0x0f000002, 0, 0, false}, 0).action == RetryAction::kReconnect);
  CHECK(DecideRetry({0x0f000001, 0, 0, false}, 0).action == RetryAction::kReconnect);
  CHECK(DecideRetry({0x0f000000, 0, 0, false}, 0).action == RetryAction::kReconnect);
}

TEST_CASE("retry: medium errors are retried a little and never ignored", "[retry]") {
  CHECK(DecideRetry(Sense(0x3, 0x1100), 0).action == RetryAction::kRetryThenFail);
  CHECK(DecideRetry(Sense(0x4), 0).action == RetryAction::kRetryThenFail);
}

TEST_CASE("retry: an illegal request or write protection fails at once", "[retry]") {
  CHECK(DecideRetry(Sense(0x5, 0x2100), 0).action == RetryAction::kFail);
  CHECK(DecideRetry(Sense(0x7, 0x2700), 0).action == RetryAction::kFail);
}

TEST_CASE("retry: reconnecting backs off from half a second to 30 s", "[retry]") {
  CHECK(ReconnectDelay(1) == 500ms);
  CHECK(ReconnectDelay(2) == 1000ms);
  CHECK(ReconnectDelay(20) == 30000ms);
}
