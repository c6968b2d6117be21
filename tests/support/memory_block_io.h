// In-memory BlockSource and BlockSink for tests: the source completes requests in a shuffled
// order (like a multi-connection reader) and can fail chosen ranges; the sink records writes and
// can demand order. Deterministic for a given seed. The source keeps BlockSource's contract
// (one thread submits and waits, any thread may read Stats) under one mutex; the sink is
// single-threaded.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/block_io.h"

namespace wanbackup::testing {

class MemorySource : public BlockSource {
 public:
  MemorySource(std::vector<uint8_t> data, uint32_t block_size, size_t in_flight = 8,
               uint64_t request_size = 64 << 10, uint64_t seed = 1);

  const SourceGeometry& geometry() const override { return geometry_; }
  uint64_t preferred_request_size() const override { return request_size_; }
  size_t preferred_in_flight() const override { return in_flight_; }
  Status Submit(const ReadRequest& request) override;
  Result<ReadCompletion> Wait() override;
  SourceStats Stats() const override;
  // The parts of `deallocated` (see SetDeallocated) inside the range, or `refusal`.
  Result<std::vector<ByteRange>> DeallocatedRanges(uint64_t offset, uint64_t length) override;

  // Makes the source report `ranges` (sorted, disjoint) as deallocated, as a thin LUN would;
  // with a `refusal` (not OK), every question fails with it instead.
  void SetDeallocated(std::vector<ByteRange> ranges, Status refusal = Status::Ok());
  // Questions DeallocatedRanges answered (or refused), in order.
  std::vector<ByteRange> deallocation_queries() const;
  // Every read submitted, in order.
  std::vector<ByteRange> reads() const;
  // Requests overlapping [offset, offset + length) complete with `status`.
  void FailRange(uint64_t offset, uint64_t length, Status status);
  // For assertions after the reading is done.
  size_t max_outstanding() const;
  std::vector<uint64_t> request_sizes() const;

 private:
  mutable std::mutex mu_;  // guards everything below geometry_, data_ and in_flight_
  SourceGeometry geometry_;
  std::vector<uint8_t> data_;
  size_t in_flight_;
  uint64_t request_size_;
  std::mt19937_64 rng_;
  std::deque<ReadRequest> pending_;
  struct Failure {
    uint64_t offset, length;
    Status status;
  };
  std::vector<Failure> failures_;
  size_t max_outstanding_ = 0;
  uint64_t bytes_read_ = 0;
  std::vector<uint64_t> request_sizes_;
  std::vector<ByteRange> reads_;
  std::vector<ByteRange> deallocated_;
  Status refusal_;
  std::vector<ByteRange> deallocation_queries_;
};

class MemorySink : public BlockSink {
 public:
  MemorySink(bool sequential, bool zeros_free) : sequential_(sequential), zeros_free_(zeros_free) {}
  const std::string& name() const override { return name_; }
  bool sequential_only() const override { return sequential_; }
  bool zeros_are_free() const override { return zeros_free_; }
  Status Write(uint64_t offset, const uint8_t* data, size_t length) override;
  Status Finish(uint64_t total_size) override;

  std::vector<uint8_t> bytes;
  uint64_t bytes_written = 0;
  bool finished = false;
  bool out_of_order_write = false;

 private:
  std::string name_ = "memory";
  bool sequential_;
  bool zeros_free_;
  uint64_t next_ = 0;
};

}  // namespace wanbackup::testing
