// WriteEngine: writes a LUN with many WRITE(16)s in flight over C connections — the mirror of
// ReadEngine, over the same CommandEngine (command_engine.h: scheduling, retry, reconnect,
// timeouts, connection scaling) and the same Transport seam (transport.h).
//
// What is a write's own:
//   - A WRITE counts as done only when the target answered GOOD; one lost with its connection,
//     or timed out, is sent again whole. Finish() waits for every WRITE, then sends
//     SYNCHRONIZE CACHE(16) over the whole LUN, and only its GOOD makes the run a success.
//   - An all-zero request goes as WRITE SAME(16) of one zero block (no data over the WAN), with
//     the UNMAP bit when the LUN is thin and reads unmapped blocks as zeros (LBPME and LBPRZ from
//     READ CAPACITY(16)) and, if it has a Logical Block Provisioning page, that page lists
//     WRITE SAME(16) with UNMAP (LBPWS); a target that refuses WRITE SAME gets WRITEs of zeros.
//   - Commands are sized and counted from what the login negotiated (PlanWrite, autotune.h):
//     with InitialR2T=Yes every burst past the immediate data costs an R2T round trip.
//   - CheckWriteTarget refuses a LUN smaller than the image, or whose block size does not divide
//     the image size, before anything is written.
//
// Threading: one consumer thread calls Submit/Wait/Finish; Stats() from any thread. The I/O
// thread is CommandEngine's.
#pragma once

#include <memory>
#include <string>

#include "common/block_io.h"
#include "initiator/autotune.h"
#include "initiator/connection_options.h"
#include "initiator/internal/command_engine.h"
#include "initiator/internal/transport.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator::internal {

// InvalidArgument (nothing written) when an image of `image_bytes` does not fit the LUN or is not
// a whole number of its blocks.
Status CheckWriteTarget(const std::string& name, const LunInfo& lun, uint64_t image_bytes);

// Whether all-zero writes may carry the UNMAP bit on `lun` (see above).
bool UnmapsZeros(const LunInfo& lun);

struct WriteEngineConfig {
  SourceGeometry geometry;  // the LUN, named for messages
  LunInfo lun;
  NegotiatedParams negotiated;  // of the first session
  std::chrono::nanoseconds rtt{0};
  TuningPlan plan;  // PlanWrite's
  std::chrono::milliseconds retry_timeout{300000};
  bool fua = false;  // every WRITE with FUA (SYNCHRONIZE CACHE still ends the run)
};

struct WriteRequest {
  uint64_t offset = 0;            // bytes, a multiple of the block size
  uint64_t length = 0;            // bytes, a multiple of the block size, > 0
  const uint8_t* data = nullptr;  // `length` bytes; the caller's until the completion
  uint64_t tag = 0;               // returned with the completion
};

struct WriteCompletion {
  WriteRequest request;
  Status status;  // not OK: the range may not hold the data (the message names it)
};

struct WriteStats {
  uint64_t bytes_written = 0;  // acknowledged, WRITE SAME's included
  uint64_t bytes_zeroed = 0;   // of them, by WRITE SAME (no data on the wire)
  uint64_t retries = 0, reconnects = 0;
  uint32_t connections = 0, peak_connections = 0, commands_in_flight = 0;
  bool write_same_refused = false;  // zeros went as data
};

class WriteEngine {
 public:
  // Channel 0 of `transport` is open; more are opened as the plan asks.
  WriteEngine(std::unique_ptr<Transport> transport, WriteEngineConfig config);

  const WriteEngineConfig& config() const { return config_; }
  uint64_t preferred_request_size() const { return config_.plan.io_size; }
  size_t preferred_in_flight() const { return engine_.preferred_in_flight(); }
  // Queues a write. Fails for a malformed request, or after a fatal failure.
  Status Submit(const WriteRequest& request);
  // The next completion, in any order (see CommandEngine::Wait).
  Result<WriteCompletion> Wait();
  // Waits for every write still outstanding, then makes them durable (SYNCHRONIZE CACHE). OK only
  // when every write since Start succeeded and the cache was synchronized; last call.
  Status Finish();
  WriteStats Stats() const;  // thread-safe

  // Starts the I/O thread.
  void Start() { engine_.Start(); }

 private:
  const WriteEngineConfig config_;
  CommandEngine engine_;
  size_t outstanding_ = 0;  // consumer thread
  Status first_error_;      // consumer thread: of a completion Finish() collected
};

}  // namespace wanbackup::initiator::internal
