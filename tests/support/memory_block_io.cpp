#include "support/memory_block_io.h"

#include <algorithm>
#include <cstring>

namespace wanbackup::testing {

MemorySource::MemorySource(std::vector<uint8_t> data, uint32_t block_size, size_t in_flight,
                           uint64_t request_size, uint64_t seed)
    : data_(std::move(data)), in_flight_(in_flight), request_size_(request_size), rng_(seed) {
  geometry_.name = "memory";
  geometry_.size_bytes = data_.size();
  geometry_.block_size = block_size;
}

Status MemorySource::Submit(const ReadRequest& r) {
  if (r.length == 0 || r.offset % geometry_.block_size != 0 ||
      r.length % geometry_.block_size != 0 || r.offset + r.length > data_.size()) {
    return Status::InvalidArgument("bad request");
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(r);
  request_sizes_.push_back(r.length);
  reads_.push_back(ByteRange{r.offset, r.length});
  max_outstanding_ = std::max(max_outstanding_, pending_.size());
  return Status::Ok();
}

Result<ReadCompletion> MemorySource::Wait() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.empty()) return Status::Internal("Wait() with nothing submitted");
  const size_t pick = rng_() % pending_.size();
  ReadRequest r = pending_[pick];
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(pick));
  for (const Failure& f : failures_) {
    if (r.offset < f.offset + f.length && f.offset < r.offset + r.length) {
      std::memset(r.buffer, 0xee, r.length);  // whatever a failed read leaves behind
      return ReadCompletion{r, f.status};
    }
  }
  std::memcpy(r.buffer, data_.data() + r.offset, r.length);
  bytes_read_ += r.length;
  return ReadCompletion{r, Status::Ok()};
}

Result<std::vector<ByteRange>> MemorySource::DeallocatedRanges(uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  deallocation_queries_.push_back(ByteRange{offset, length});
  if (!refusal_.ok()) return refusal_;
  std::vector<ByteRange> out;
  for (const ByteRange& d : deallocated_) {
    const uint64_t from = std::max(d.offset, offset);
    const uint64_t to = std::min(d.end(), offset + length);
    if (from < to) out.push_back(ByteRange{from, to - from});
  }
  return out;
}

void MemorySource::SetDeallocated(std::vector<ByteRange> ranges, Status refusal) {
  std::lock_guard<std::mutex> lock(mu_);
  deallocated_ = std::move(ranges);
  refusal_ = std::move(refusal);
}

std::vector<ByteRange> MemorySource::deallocation_queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deallocation_queries_;
}

std::vector<ByteRange> MemorySource::reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

SourceStats MemorySource::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SourceStats s;
  s.bytes_read = bytes_read_;
  s.connections = 1;
  return s;
}

void MemorySource::FailRange(uint64_t offset, uint64_t length, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back({offset, length, std::move(status)});
}

size_t MemorySource::max_outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_outstanding_;
}

std::vector<uint64_t> MemorySource::request_sizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return request_sizes_;
}

Status MemorySink::Write(uint64_t offset, const uint8_t* data, size_t length) {
  if (offset != next_) out_of_order_write = true;
  if (sequential_ && offset != next_) return Status::Internal("out of order");
  if (bytes.size() < offset + length) bytes.resize(offset + length);
  std::memcpy(bytes.data() + offset, data, length);
  next_ = offset + length;
  bytes_written += length;
  return Status::Ok();
}

Status MemorySink::Finish(uint64_t total_size) {
  bytes.resize(total_size);  // what was never written reads as zeros, like a hole
  finished = true;
  return Status::Ok();
}

}  // namespace wanbackup::testing
