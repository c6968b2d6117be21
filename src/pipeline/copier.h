// Copy: moves a range of a BlockSource to a BlockSink with bounded memory.
//
// Requests of the source's preferred size are kept submitted (about preferred_in_flight() of
// them, never more buffers than max_memory allows), and completions are written as they come:
// positioned, or in order through a reorder window for sinks that need it (a pipe). Near the
// end, requests shrink so that every connection finishes at about the same time instead of
// one carrying a long tail. All-zero stretches (64 KiB granules) are skipped when the sink
// gets zeros for free (a new file), leaving holes. Ranges the source reports deallocated (a thin
// LUN's, asked ahead in windows: deallocation.h) are not read: they are zeros, skipped like
// the zero granules or written as zeros (a LUN sink turns them into WRITE SAME). Not
// thread-safe; runs on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "common/block_io.h"
#include "common/result.h"

namespace wanbackup::pipeline {

struct CopyProgress {
  uint64_t bytes_done = 0;  // written (or skipped as zero) to the sink
  uint64_t bytes_total = 0;
  std::chrono::nanoseconds elapsed{0};
  SourceStats source;
};

struct CopyOptions {
  uint64_t offset = 0;  // in the source; the sink receives the data from its offset 0
  uint64_t length = 0;  // 0: to the end of the source
  uint64_t max_memory = 256ull << 20;
  uint64_t request_size = 0;  // 0: the source's preferred size
  bool sparse = true;
  std::chrono::milliseconds progress_interval{500};
  std::function<void(const CopyProgress&)> on_progress;  // called on this thread
};

struct CopyResult {
  uint64_t bytes = 0;
  uint64_t zero_bytes_skipped = 0;
  uint64_t bytes_deallocated = 0;  // reported deallocated by the source: never read
  std::chrono::nanoseconds elapsed{0};
  uint64_t peak_buffer_bytes = 0;
  SourceStats source;
  // The middle of the copy, from 10 % of the bytes done to 90 %: its rate leaves out the
  // start-up (logins, TCP slow start) and the last requests' tail, so it is what a long copy
  // runs at. Zero when one completion carried the copy past both marks.
  uint64_t steady_bytes = 0;
  std::chrono::nanoseconds steady_elapsed{0};
};

Result<CopyResult> Copy(BlockSource& source, BlockSink& sink, const CopyOptions& options);

}  // namespace wanbackup::pipeline
