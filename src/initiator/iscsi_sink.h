// IscsiSink: a BlockSink that writes one LUN over C iSCSI connections with many WRITE(16)s in
// flight (internal/write_engine.h has the rules: sizes from the negotiated burst lengths,
// WRITE SAME for all-zero writes, retries and reconnects as for reads, SYNCHRONIZE CACHE before
// success).
//
// Write() copies the data into a buffer of the sink's own and returns once it is queued, so the
// caller may reuse its buffer at once; it blocks while the buffers in flight are at their
// bound (the plan's C x (N + 1) x B, at least two writes). A WRITE that failed for good is
// reported by a later Write() or by Finish(), never dropped: Finish() succeeds only when every
// write was acknowledged GOOD by the target and its cache was synchronized.
//
// Threading: Write() may be called from several threads at once (the restorer's workers); they
// take turns on one mutex. Finish() after every Write() returned. Stats() from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/block_io.h"
#include "common/result.h"
#include "initiator/autotune.h"
#include "initiator/connection_options.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator {

struct IscsiSinkOptions {
  ConnectionOptions connection;
  int lun = 0;
  TuningRequest tuning;  // user overrides (connections, queue depth, io size, memory cap)
  std::chrono::milliseconds retry_timeout{300000};
  // The image to be written: a LUN smaller than this, or whose block size does not divide it,
  // is refused (InvalidArgument) before anything is written.
  uint64_t image_size = 0;
};

// What the sink did, for summaries.
struct IscsiSinkStats {
  uint64_t bytes_written = 0;  // acknowledged by the target, zeroed ranges included
  uint64_t bytes_zeroed = 0;   // by WRITE SAME: no data on the wire
  uint64_t retries = 0, reconnects = 0;
  uint32_t peak_connections = 0;
  bool write_same_refused = false;
  std::chrono::nanoseconds rtt{0};
};

class IscsiSink : public BlockSink {
 public:
  // Logs in, checks the LUN (a disk, large enough, compatible block size), measures the round
  // trip, plans the WRITEs from what was negotiated and starts the I/O thread.
  static Result<std::unique_ptr<IscsiSink>> Open(IscsiSinkOptions options);

  bool sequential_only() const override { return false; }
  bool zeros_are_free() const override { return false; }  // what the LUN held stays otherwise

  virtual const LunInfo& lun() const = 0;
  virtual const TuningPlan& plan() const = 0;
  virtual IscsiSinkStats Stats() const = 0;
};

}  // namespace wanbackup::initiator
