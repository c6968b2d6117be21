// The seams between data movers: a BlockSource reads a device (iSCSI LUN, local file or block
// device) asynchronously into caller-owned buffers; a BlockSink writes one. The copier and the
// snapshot pipeline see only these interfaces, so they do not care where blocks come from.
//
// Threading: one consumer thread calls Submit/Wait on a source (implementations use their own
// threads inside and document them); Stats() may be called from any thread at any time (the
// snapshot's progress reports run on the coordinator while the reader waits). A sink whose
// sequential_only() is true gets its writes in order, one at a time, though not always from the
// same thread (restore's workers take turns, restorer.h); otherwise from several at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup {

struct SourceGeometry {
  std::string name;         // for messages: a URL without secrets, or a path
  uint64_t size_bytes = 0;  // a multiple of block_size
  uint32_t block_size = 512;
};

struct ReadRequest {
  uint64_t offset = 0;        // bytes, a multiple of the block size
  uint64_t length = 0;        // bytes, a multiple of the block size, > 0
  uint8_t* buffer = nullptr;  // `length` bytes; untouched by the caller until completion
  uint64_t tag = 0;           // returned with the completion
};

// A byte range of a device, [offset, offset + length).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t end() const { return offset + length; }
  bool operator==(const ByteRange&) const = default;
};

struct ReadCompletion {
  ReadRequest request;
  Status status;  // not OK: this range could not be read (the message names it); never zeros
};

// Counters a source keeps about itself, for progress displays and summaries.
struct SourceStats {
  uint64_t bytes_read = 0;
  uint64_t bytes_in_flight = 0;
  uint32_t connections = 0;       // live connections now (1 for local sources)
  uint32_t peak_connections = 0;  // most connections live at once
  uint32_t commands_in_flight = 0;
  uint64_t retries = 0;
  uint64_t reconnects = 0;
  std::chrono::nanoseconds rtt{0};  // measured round trip (0 for local sources)
  uint32_t io_size = 0;             // bytes per command in use
  uint32_t queue_depth = 0;         // commands per connection in use
};

class BlockSource {
 public:
  virtual ~BlockSource() = default;
  virtual const SourceGeometry& geometry() const = 0;
  // The request size and number of outstanding requests at which the source runs at full
  // speed; the caller should keep about that many submitted. May grow while reading.
  virtual uint64_t preferred_request_size() const = 0;
  virtual size_t preferred_in_flight() const = 0;
  // Queues a read. Fails only for a malformed request or after a fatal failure.
  virtual Status Submit(const ReadRequest& request) = 0;
  // Waits for the next completion, in any order. Fails when the source has failed for good or
  // was cancelled; every outstanding request is then abandoned, and the source guarantees that
  // it writes into none of their buffers any more (so the caller may free them).
  virtual Result<ReadCompletion> Wait() = 0;
  // Thread-safe (see above).
  virtual SourceStats Stats() const = 0;
  // The parts of [offset, offset + length) that the device says hold no data and read as zeros
  // (a thin LUN's deallocated blocks): sorted, disjoint, block-aligned, inside the range. What
  // is not listed may hold data and must be read. An error means "no information": the caller
  // reads everything, as it would from a source that never deallocates (the default). May take
  // a round trip; the caller asks ahead, a bounded range at a time. Consumer thread only.
  virtual Result<std::vector<ByteRange>> DeallocatedRanges(uint64_t offset, uint64_t length) {
    (void)offset;
    (void)length;
    return std::vector<ByteRange>{};
  }
};

class BlockSink {
 public:
  virtual ~BlockSink() = default;
  virtual const std::string& name() const = 0;
  // True when writes must arrive in offset order (a pipe or terminal).
  virtual bool sequential_only() const = 0;
  // True when skipping an all-zero range leaves zeros there (a new or truncated file).
  virtual bool zeros_are_free() const = 0;
  virtual Status Write(uint64_t offset, const uint8_t* data, size_t length) = 0;
  // Makes everything written durable (fsync) and sets the final size; last call.
  virtual Status Finish(uint64_t total_size) = 0;
};

}  // namespace wanbackup
