// ReadEngine: the IscsiSource implementation (see iscsi_source.h for the contract): READs over
// the shared CommandEngine (command_engine.h), which decides which READ goes on which channel of
// the Transport seam (transport.h), retries, reconnects and scales. IscsiSource::Open pairs it
// with an IscsiTransport; the unit tests (tests/unit/read_engine_test.cpp) with a scripted fake
// on a virtual clock.
//
// Threading: as BlockSource (one consumer thread; Stats() from any thread); the engine's I/O
// thread is CommandEngine's.
#pragma once

#include <memory>

#include "initiator/internal/command_engine.h"
#include "initiator/internal/lba_status_query.h"
#include "initiator/internal/transport.h"
#include "initiator/iscsi_source.h"

namespace wanbackup::initiator::internal {

struct ReadEngineConfig {
  SourceGeometry geometry;  // from `lun`, named for messages
  LunInfo lun;
  NegotiatedParams negotiated;  // of the first session
  std::chrono::nanoseconds rtt{0};
  TuningPlan plan;
  std::chrono::milliseconds retry_timeout{300000};  // no progress this long: give up
};

class ReadEngine final : public IscsiSource {
 public:
  // Channel 0 of `transport` is open; more are opened as the plan asks. `lba_status`, when
  // given (a thin LUN that reads deallocated blocks as zeros), answers DeallocatedRanges.
  ReadEngine(std::unique_ptr<Transport> transport, ReadEngineConfig config,
             std::unique_ptr<LbaStatusQuery> lba_status = nullptr);

  // BlockSource
  const SourceGeometry& geometry() const override { return config_.geometry; }
  uint64_t preferred_request_size() const override { return config_.plan.io_size; }
  size_t preferred_in_flight() const override { return engine_.preferred_in_flight(); }
  Status Submit(const ReadRequest& request) override;
  Result<ReadCompletion> Wait() override;
  SourceStats Stats() const override { return engine_.Stats(); }
  Result<std::vector<ByteRange>> DeallocatedRanges(uint64_t offset, uint64_t length) override;

  // IscsiSource
  const LunInfo& lun() const override { return config_.lun; }
  const TuningPlan& plan() const override { return config_.plan; }
  const NegotiatedParams& negotiated() const override { return config_.negotiated; }

  // Starts the I/O thread.
  void Start() { engine_.Start(); }

 private:
  const ReadEngineConfig config_;
  CommandEngine engine_;
  std::unique_ptr<LbaStatusQuery> lba_status_;  // consumer thread
};

}  // namespace wanbackup::initiator::internal
