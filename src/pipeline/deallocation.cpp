#include "pipeline/deallocation.h"

#include <algorithm>

namespace wanbackup::pipeline {

RangeClass ClassifyRange(const std::vector<ByteRange>& deallocated, uint64_t offset,
                         uint64_t length) {
  const uint64_t end = offset + length;
  // The first extent that ends after `offset`.
  auto it = std::upper_bound(deallocated.begin(), deallocated.end(), offset,
                             [](uint64_t at, const ByteRange& r) { return at < r.end(); });
  if (it == deallocated.end() || it->offset >= end) return RangeClass{false, length};
  if (it->offset > offset) return RangeClass{false, it->offset - offset};
  return RangeClass{true, std::min(it->end(), end) - offset};
}

DeallocationLookahead::DeallocationLookahead(BlockSource& source, uint64_t begin, uint64_t end,
                                             uint64_t window)
    : source_(source),
      end_(end),
      window_(std::max<uint64_t>(window, 1)),
      known_begin_(begin),
      known_end_(begin) {}

void DeallocationLookahead::Refill(uint64_t offset) {
  extents_.clear();
  known_begin_ = offset;
  known_end_ = std::min(end_, offset + window_);
  if (failed_) return;  // nothing known: everything is read
  ++queries_;
  Result<std::vector<ByteRange>> got = source_.DeallocatedRanges(offset, known_end_ - offset);
  if (!got.ok()) {
    failed_ = true;
    return;
  }
  extents_ = std::move(got).value();
  window_ = std::min(kMaxWindow, window_ * 2);
}

RangeClass DeallocationLookahead::Classify(uint64_t offset, uint64_t length) {
  if (offset < known_begin_ || offset >= known_end_) Refill(offset);
  RangeClass c = ClassifyRange(extents_, offset, length);
  // Past what the source described, nothing is known: only the described part may be skipped.
  if (c.deallocated) c.length = std::min(c.length, known_end_ - offset);
  return c;
}

}  // namespace wanbackup::pipeline
