// Deallocated ranges ahead of the reader: the snapshot pipeline and the copier ask their
// BlockSource (BlockSource::DeallocatedRanges) which ranges a thin LUN has deallocated, a window
// at a time just ahead of where they read, and do not read those ranges: they are zeros. A
// source that does not know (a local file, a LUN that is not thin, a refused GET LBA STATUS)
// reports nothing, and everything is read as before.
//
// Not thread-safe: the one thread that submits reads to the source uses it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/block_io.h"

namespace wanbackup::pipeline {

// The longest prefix of a range that is either wholly deallocated or holds no deallocated byte.
struct RangeClass {
  bool deallocated = false;
  uint64_t length = 0;
};

// Classifies [offset, offset + length) against `deallocated` (sorted, disjoint).
RangeClass ClassifyRange(const std::vector<ByteRange>& deallocated, uint64_t offset,
                         uint64_t length);

class DeallocationLookahead {
 public:
  // Asks `source` about [begin, end): first `window` bytes at a time, doubling up to
  // kMaxWindow while the source keeps answering (an empty LUN of many TiB then costs few round
  // trips). `window` should be a multiple of the caller's request or chunk size.
  DeallocationLookahead(BlockSource& source, uint64_t begin, uint64_t end, uint64_t window);

  static constexpr uint64_t kMaxWindow = 64ull << 30;

  // As ClassifyRange, for ranges visited in increasing offset order.
  RangeClass Classify(uint64_t offset, uint64_t length);
  // True when [offset, offset + length) is wholly deallocated.
  bool Deallocated(uint64_t offset, uint64_t length) {
    const RangeClass c = Classify(offset, length);
    return c.deallocated && c.length == length;
  }
  // Source GET LBA STATUS-like questions asked, and whether one failed (no more are asked).
  int queries() const { return queries_; }
  bool failed() const { return failed_; }

 private:
  void Refill(uint64_t offset);

  BlockSource& source_;
  const uint64_t end_;
  uint64_t window_;
  uint64_t known_begin_ = 0, known_end_ = 0;  // what extents_ describes
  std::vector<ByteRange> extents_;
  int queries_ = 0;
  bool failed_ = false;
};

}  // namespace wanbackup::pipeline
