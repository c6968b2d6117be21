#include "initiator/iscsi_sink.h"

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "initiator/internal/iscsi_transport.h"
#include "initiator/internal/lun_open.h"
#include "initiator/internal/write_engine.h"

namespace wanbackup::initiator {
namespace {

using internal::WriteEngine;

class LunSink final : public IscsiSink {
 public:
  LunSink(std::unique_ptr<WriteEngine> engine, LunInfo lun, std::chrono::nanoseconds rtt)
      : engine_(std::move(engine)), lun_(std::move(lun)), rtt_(rtt) {
    const TuningPlan& p = engine_->config().plan;
    limit_ =
        static_cast<uint64_t>(p.connections) * static_cast<uint64_t>(p.queue_depth + 1) * p.io_size;
  }

  // The engine goes first: its I/O thread may still be sending from the buffers.
  ~LunSink() override { engine_.reset(); }
  LunSink(const LunSink&) = delete;
  LunSink& operator=(const LunSink&) = delete;

  const std::string& name() const override { return engine_->config().geometry.name; }
  const LunInfo& lun() const override { return lun_; }
  const TuningPlan& plan() const override { return engine_->config().plan; }

  Status Write(uint64_t offset, const uint8_t* data, size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
    // Room first: at least two writes may be in flight whatever their size.
    while (!buffers_.empty() && held_ + length > std::max<uint64_t>(limit_, 2 * length)) {
      WB_RETURN_IF_ERROR(Reap());
    }
    std::vector<uint8_t> buffer(data, data + length);
    internal::WriteRequest request;
    request.offset = offset;
    request.length = length;
    request.data = buffer.data();
    request.tag = next_tag_++;
    Status queued = engine_->Submit(request);
    if (!queued.ok()) return Fail(queued);
    held_ += length;
    buffers_.emplace(request.tag, std::move(buffer));
    return Status::Ok();
  }

  Status Finish(uint64_t total_size) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
    if (total_size > lun_.size_bytes()) {
      return Fail(Status::InvalidArgument(name() + " is smaller than the " +
                                          std::to_string(total_size) + " bytes written"));
    }
    Status finished = engine_->Finish();  // every WRITE acknowledged, then SYNCHRONIZE CACHE
    buffers_.clear();
    held_ = 0;
    return finished.ok() ? finished : Fail(finished);
  }

  IscsiSinkStats Stats() const override {
    const internal::WriteStats w = engine_->Stats();
    IscsiSinkStats s;
    s.bytes_written = w.bytes_written;
    s.bytes_zeroed = w.bytes_zeroed;
    s.retries = w.retries;
    s.reconnects = w.reconnects;
    s.peak_connections = w.peak_connections;
    s.write_same_refused = w.write_same_refused;
    s.rtt = rtt_;
    return s;
  }

 private:
  // Waits for one completion and lets its buffer go. REQUIRES: mu_ held.
  Status Reap() {
    Result<internal::WriteCompletion> done = engine_->Wait();
    if (!done.ok()) return Fail(done.status());
    auto it = buffers_.find(done->request.tag);
    if (it != buffers_.end()) {
      held_ -= it->second.size();
      buffers_.erase(it);
    }
    return done->status.ok() ? Status::Ok() : Fail(done->status);
  }

  Status Fail(const Status& status) {
    if (failed_.ok()) failed_ = status;
    return failed_;
  }

  std::unique_ptr<WriteEngine> engine_;
  const LunInfo lun_;
  const std::chrono::nanoseconds rtt_;
  uint64_t limit_ = 0;  // bytes of buffers in flight
  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<uint8_t>> buffers_;  // GUARDED_BY(mu_), by tag
  uint64_t held_ = 0;                                           // GUARDED_BY(mu_)
  uint64_t next_tag_ = 1;                                       // GUARDED_BY(mu_)
  Status failed_;                                               // GUARDED_BY(mu_)
};

}  // namespace

Result<std::unique_ptr<IscsiSink>> IscsiSink::Open(IscsiSinkOptions options) {
  WB_ASSIGN_OR_RETURN(internal::OpenedLun opened,
                      internal::OpenDiskLun(options.connection, options.lun, "writing"));
  const LunInfo& lun = opened.lun;
  WB_RETURN_IF_ERROR(internal::CheckWriteTarget(opened.name, lun, options.image_size));
  TuningRequest tuning = options.tuning;
  tuning.rtt = opened.rtt;
  tuning.block_size = lun.block_size;
  tuning.lun_size = lun.size_bytes();
  tuning.max_transfer_bytes = uint64_t{lun.max_transfer_blocks} * lun.block_size;

  internal::WriteEngineConfig config;
  config.geometry.name = opened.name;
  config.geometry.size_bytes = lun.size_bytes();
  config.geometry.block_size = lun.block_size;
  config.negotiated = opened.conn->negotiated();
  config.rtt = opened.rtt;
  config.plan = PlanWrite(tuning, config.negotiated);
  config.retry_timeout = options.retry_timeout;
  config.lun = lun;
  const std::chrono::nanoseconds rtt = opened.rtt;
  auto transport = std::make_unique<internal::IscsiTransport>(
      options.connection.Clone(), std::move(opened.lun), std::move(opened.conn));
  auto engine = std::make_unique<WriteEngine>(std::move(transport), std::move(config));
  engine->Start();
  LunInfo described = engine->config().lun;
  return std::unique_ptr<IscsiSink>(
      std::make_unique<LunSink>(std::move(engine), std::move(described), rtt));
}

}  // namespace wanbackup::initiator
