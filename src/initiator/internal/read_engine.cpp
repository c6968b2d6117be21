#include "initiator/internal/read_engine.h"

namespace wanbackup::initiator::internal {
namespace {

CommandEngineConfig EngineConfig(const ReadEngineConfig& config) {
  CommandEngineConfig c;
  c.geometry = config.geometry;
  c.rtt = config.rtt;
  c.plan = config.plan;
  c.retry_timeout = config.retry_timeout;
  c.activity = "reading";
  c.unfinished = "unread";
  return c;
}

}  // namespace

ReadEngine::ReadEngine(std::unique_ptr<Transport> transport, ReadEngineConfig config,
                       std::unique_ptr<LbaStatusQuery> lba_status)
    : config_(std::move(config)),
      engine_(std::move(transport), EngineConfig(config_)),
      lba_status_(std::move(lba_status)) {}

Result<std::vector<ByteRange>> ReadEngine::DeallocatedRanges(uint64_t offset, uint64_t length) {
  if (!lba_status_) return std::vector<ByteRange>{};
  return lba_status_->Deallocated(offset, length);
}

Status ReadEngine::Submit(const ReadRequest& request) {
  EngineRequest r;
  r.op = BlockOp::kRead;
  r.offset = request.offset;
  r.length = request.length;
  r.buffer = request.buffer;
  r.tag = request.tag;
  return engine_.Submit(r);
}

Result<ReadCompletion> ReadEngine::Wait() {
  WB_ASSIGN_OR_RETURN(EngineCompletion c, engine_.Wait());
  ReadRequest request;
  request.offset = c.request.offset;
  request.length = c.request.length;
  request.buffer = c.request.buffer;
  request.tag = c.request.tag;
  return ReadCompletion{request, std::move(c.status)};
}

}  // namespace wanbackup::initiator::internal
