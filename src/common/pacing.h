// Pacing (--limit-rate): holds a data mover to an average number of bytes per second, across
// every connection and thread that moves data for it — WAN links are shared with daytime
// traffic. A token bucket: each transfer takes its size from the budget before it starts and
// waits while the budget is spent; up to kPacingBurst of unused budget is kept for later, so a
// consumer that was busy elsewhere for a moment does not lose its share, and no more.
//
// PacedSource wraps any BlockSource so that reads are submitted at the rate: the iSCSI engine,
// a local file or device alike. PacedSink does the same for writes (restore to a LUN); an
// all-zero write is not paced, since a LUN sink sends it as WRITE SAME (one block on the wire).
// Pacer is thread-safe; PacedSource and PacedSink have their interfaces' contracts.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "common/block_io.h"

namespace wanbackup {

inline constexpr std::chrono::milliseconds kPacingBurst{250};

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: bytes_per_second > 0.
  explicit Pacer(uint64_t bytes_per_second);
  virtual ~Pacer() = default;
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // Takes `bytes` from the budget, first waiting while it is spent. Cancelled when cancellation
  // is requested (common/cancel.h) during the wait; nothing is taken then.
  Status Take(uint64_t bytes);
  uint64_t bytes_per_second() const { return rate_; }

 protected:
  // The clock and the sleep, replaced by tests with virtual ones.
  virtual Clock::time_point Now() const { return Clock::now(); }
  virtual void SleepFor(std::chrono::nanoseconds d);

 private:
  const uint64_t rate_;
  std::mutex mu_;
  bool started_ = false;        // GUARDED_BY(mu_)
  Clock::time_point ready_at_;  // GUARDED_BY(mu_): when the budget taken so far is paid for
};

class PacedSource final : public BlockSource {
 public:
  PacedSource(std::unique_ptr<BlockSource> inner, std::shared_ptr<Pacer> pacer);

  const SourceGeometry& geometry() const override { return inner_->geometry(); }
  uint64_t preferred_request_size() const override { return inner_->preferred_request_size(); }
  size_t preferred_in_flight() const override { return inner_->preferred_in_flight(); }
  // Waits for the budget, then submits.
  Status Submit(const ReadRequest& request) override;
  Result<ReadCompletion> Wait() override { return inner_->Wait(); }
  SourceStats Stats() const override { return inner_->Stats(); }
  // Unpaced: what is deallocated is never read, so it costs no bandwidth.
  Result<std::vector<ByteRange>> DeallocatedRanges(uint64_t offset, uint64_t length) override {
    return inner_->DeallocatedRanges(offset, length);
  }

  BlockSource& inner() { return *inner_; }

 private:
  std::unique_ptr<BlockSource> inner_;
  std::shared_ptr<Pacer> pacer_;
};

class PacedSink final : public BlockSink {
 public:
  PacedSink(std::unique_ptr<BlockSink> inner, std::shared_ptr<Pacer> pacer);

  const std::string& name() const override { return inner_->name(); }
  bool sequential_only() const override { return inner_->sequential_only(); }
  bool zeros_are_free() const override { return inner_->zeros_are_free(); }
  // Waits for the budget (unless all of `data` is zero), then writes.
  Status Write(uint64_t offset, const uint8_t* data, size_t length) override;
  Status Finish(uint64_t total_size) override { return inner_->Finish(total_size); }

 private:
  std::unique_ptr<BlockSink> inner_;
  std::shared_ptr<Pacer> pacer_;
};

}  // namespace wanbackup
