#include "common/pacing.h"

#include <algorithm>
#include <thread>

#include "common/cancel.h"

namespace wanbackup {
namespace {

// A waiting Take looks at the cancellation flag at least this often.
constexpr std::chrono::milliseconds kCancelCheck{100};

}  // namespace

Pacer::Pacer(uint64_t bytes_per_second) : rate_(std::max<uint64_t>(1, bytes_per_second)) {}

void Pacer::SleepFor(std::chrono::nanoseconds d) {
  std::this_thread::sleep_for(d);
}

Status Pacer::Take(uint64_t bytes) {
  const auto cost = std::chrono::nanoseconds(
      static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(rate_)));
  Clock::time_point start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Now();
    // Unused budget is kept for at most kPacingBurst; the very first transfer starts at once.
    if (!started_ || ready_at_ < now - kPacingBurst) {
      ready_at_ = started_ ? now - kPacingBurst : now;
      started_ = true;
    }
    start = ready_at_;
    ready_at_ += cost;
  }
  for (auto now = Now(); now < start; now = Now()) {
    if (CancellationRequested()) {
      std::lock_guard<std::mutex> lock(mu_);
      ready_at_ -= cost;  // give the budget back
      return Status::Cancelled("interrupted (while holding to the rate limit)");
    }
    SleepFor(std::min<std::chrono::nanoseconds>(start - now, kCancelCheck));
  }
  return Status::Ok();
}

PacedSource::PacedSource(std::unique_ptr<BlockSource> inner, std::shared_ptr<Pacer> pacer)
    : inner_(std::move(inner)), pacer_(std::move(pacer)) {}

Status PacedSource::Submit(const ReadRequest& request) {
  WB_RETURN_IF_ERROR(pacer_->Take(request.length));
  return inner_->Submit(request);
}

PacedSink::PacedSink(std::unique_ptr<BlockSink> inner, std::shared_ptr<Pacer> pacer)
    : inner_(std::move(inner)), pacer_(std::move(pacer)) {}

Status PacedSink::Write(uint64_t offset, const uint8_t* data, size_t length) {
  const bool zero = std::all_of(data, data + length, [](uint8_t b) { return b == 0; });
  if (!zero) WB_RETURN_IF_ERROR(pacer_->Take(length));
  return inner_->Write(offset, data, length);
}

}  // namespace wanbackup
