#include "initiator/internal/write_engine.h"

#include <algorithm>
#include <cstring>

namespace wanbackup::initiator::internal {
namespace {

CommandEngineConfig EngineConfig(const WriteEngineConfig& config) {
  CommandEngineConfig c;
  c.geometry = config.geometry;
  c.rtt = config.rtt;
  c.plan = config.plan;
  c.retry_timeout = config.retry_timeout;
  c.activity = "writing";
  c.unfinished = "unwritten";
  c.round_trips_per_command = WriteRoundTrips(config.plan.io_size, config.negotiated);
  c.ramp_start_bytes = static_cast<uint32_t>(config.plan.io_size);
  // A target refuses a WRITE SAME longer than its Block Limits' MAXIMUM WRITE SAME LENGTH (and
  // the engine would then send the zeros as data): stay within it.
  const uint64_t ws_limit = config.lun.max_write_same_blocks * config.lun.block_size;
  if (ws_limit != 0) c.write_same_bytes = std::min(c.write_same_bytes, ws_limit);
  return c;
}

}  // namespace

Status CheckWriteTarget(const std::string& name, const LunInfo& lun, uint64_t image_bytes) {
  if (lun.write_protected) {
    return Status::InvalidArgument(name + " is write-protected (a read-only LUN); nothing written");
  }
  if (lun.block_size == 0 || image_bytes % lun.block_size != 0) {
    return Status::InvalidArgument(name + " has " + std::to_string(lun.block_size) +
                                   "-byte blocks, which do not divide the image's " +
                                   std::to_string(image_bytes) + " bytes; nothing written");
  }
  if (lun.size_bytes() < image_bytes) {
    return Status::InvalidArgument(name + " holds " + std::to_string(lun.size_bytes()) +
                                   " bytes, less than the image's " + std::to_string(image_bytes) +
                                   "; nothing written");
  }
  return Status::Ok();
}

WriteEngine::WriteEngine(std::unique_ptr<Transport> transport, WriteEngineConfig config)
    : config_(std::move(config)), engine_(std::move(transport), EngineConfig(config_)) {}

bool UnmapsZeros(const LunInfo& lun) {
  // Deallocated blocks must read as zeros, or UNMAP would not leave the range as written; and
  // where the Logical Block Provisioning page exists, it must list WRITE SAME(16) with UNMAP.
  if (!lun.deallocated_reads_zero()) return false;
  return !lun.has_provisioning_page || lun.write_same_unmap_supported;
}

Status WriteEngine::Submit(const WriteRequest& request) {
  if (request.data == nullptr) {
    return Status::InvalidArgument("write request [" + std::to_string(request.offset) + ", +" +
                                   std::to_string(request.length) + ") has no data");
  }
  EngineRequest r;
  r.offset = request.offset;
  r.length = request.length;
  r.tag = request.tag;
  // The engine only sends from the buffer of a WRITE (or of a refused WRITE SAME): never into it.
  r.buffer = const_cast<uint8_t*>(request.data);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  if (AllZero(request.data, request.length)) {
    r.op = BlockOp::kWriteZeros;  // no data over the WAN
    r.unmap = UnmapsZeros(config_.lun);
  } else {
    r.op = BlockOp::kWrite;
    r.fua = config_.fua;
  }
  Status queued = engine_.Submit(r);
  if (queued.ok()) ++outstanding_;
  return queued;
}

Result<WriteCompletion> WriteEngine::Wait() {
  WB_ASSIGN_OR_RETURN(EngineCompletion c, engine_.Wait());
  --outstanding_;
  WriteRequest request;
  request.offset = c.request.offset;
  request.length = c.request.length;
  request.data = c.request.buffer;
  request.tag = c.request.tag;
  return WriteCompletion{request, std::move(c.status)};
}

Status WriteEngine::Finish() {
  // SYNCHRONIZE CACHE covers only writes the target has completed: every one first.
  while (outstanding_ > 0) {
    WB_ASSIGN_OR_RETURN(WriteCompletion c, Wait());
    if (!c.status.ok() && first_error_.ok()) first_error_ = c.status;
  }
  if (!first_error_.ok()) return first_error_;
  EngineRequest sync;
  sync.op = BlockOp::kSynchronizeCache;
  WB_RETURN_IF_ERROR(engine_.Submit(sync));
  WB_ASSIGN_OR_RETURN(EngineCompletion done, engine_.Wait());
  return done.status.WithContext("making the writes to " + config_.geometry.name + " durable");
}

WriteStats WriteEngine::Stats() const {
  const SourceStats s = engine_.Stats();
  WriteStats w;
  w.bytes_written = s.bytes_read;  // the engine's bytes done, in either direction
  w.bytes_zeroed = engine_.bytes_zeroed();
  w.retries = s.retries;
  w.reconnects = s.reconnects;
  w.connections = s.connections;
  w.peak_connections = s.peak_connections;
  w.commands_in_flight = s.commands_in_flight;
  w.write_same_refused = engine_.write_same_refused();
  return w;
}

}  // namespace wanbackup::initiator::internal
