// ReadEngine: the IscsiSource implementation (see iscsi_source.h for the contract), written
// against the Transport seam (transport.h): it decides which READ goes on which channel, how big
// each one is while a channel ramps up, when to retry, reconnect, add or drop channels and give
// up; the transport moves the bytes. IscsiSource::Open pairs it with an IscsiTransport; the
// unit tests (tests/unit/read_engine_test.cpp) with a scripted fake on a virtual clock.
//
// Threads and who touches what:
//   consumer thread  Submit/Wait/Stats: takes mu_, appends to submitted_, takes from done_.
//   I/O thread       Run(): owns slots_, commands and ready_, and is the only caller of the
//                    transport (but Wake). Stats() reads atomics from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

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
  // Channel 0 of `transport` is open; more are opened as the plan asks.
  ReadEngine(std::unique_ptr<Transport> transport, ReadEngineConfig config);
  ~ReadEngine() override;

  // BlockSource
  const SourceGeometry& geometry() const override { return config_.geometry; }
  uint64_t preferred_request_size() const override { return config_.plan.io_size; }
  size_t preferred_in_flight() const override;
  Status Submit(const ReadRequest& request) override;
  Result<ReadCompletion> Wait() override;
  SourceStats Stats() const override;

  // IscsiSource
  const LunInfo& lun() const override { return config_.lun; }
  const TuningPlan& plan() const override { return config_.plan; }
  const NegotiatedParams& negotiated() const override { return config_.negotiated; }

  // Starts the I/O thread.
  void Start();

 private:
  using Clock = Transport::Clock;
  struct Request;
  struct Command;
  struct Slot;

  // I/O thread.
  void Run();
  void Step(TransportEvents* events);
  void TakeSubmissions();
  Command* NewCommand();
  void ManageConnections(Clock::time_point now);
  void OnConnected(const ConnectDone& done, Clock::time_point now);
  void RetireExtraConnections();
  void IssueCommands(Clock::time_point now);
  Command* SplitToRamp(size_t ready_index, uint32_t limit);
  int CommandBudget() const;  // C x N: commands in flight over all connections
  int PickConnection();       // the slot for the next command, or -1
  void EstimateRates(Clock::time_point now);
  Clock::time_point PollDeadline(Clock::time_point now) const;
  void HandleEvents(const TransportEvents& events);
  void TearDown(size_t slot_index, const Status& why);
  void OnCommandDone(const CommandDone& done);
  void OnCommandFailed(Command* cmd, Slot& slot, const CommandDone& done);
  void Requeue(Command* cmd, Clock::time_point not_before);
  void FinishPart(Command* cmd, const Status& status);
  void FailAll(const Status& status);
  void MeasureAndScale(Clock::time_point now);
  std::string Range(uint64_t lba, uint32_t bytes) const;
  Status NoProgressStatus() const;

  const std::unique_ptr<Transport> transport_;
  ReadEngineConfig config_;
  const int per_connection_limit_;  // most commands on one connection (autotune.h)

  // Shared with the consumer.
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<ReadRequest> submitted_;  // GUARDED_BY(mu_)
  std::deque<ReadCompletion> done_;    // GUARDED_BY(mu_)
  Status fatal_;                       // GUARDED_BY(mu_)
  size_t outstanding_requests_ = 0;    // GUARDED_BY(mu_)
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancel_requested_{false};
  std::thread io_thread_;

  // Counters read by Stats() from any thread.
  std::atomic<uint64_t> bytes_read_{0}, bytes_in_flight_{0}, retries_{0}, reconnects_{0};
  std::atomic<uint32_t> live_connections_{0}, peak_connections_{1}, commands_in_flight_{0};
  std::atomic<int> target_connections_{0};

  // I/O thread only.
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<std::unique_ptr<Request>> requests_;
  std::vector<std::unique_ptr<Command>> commands_;  // every command ever made, for stable addresses
  std::vector<Command*> free_commands_;
  std::deque<Command*> ready_;
  std::unordered_map<uint64_t, Command*> in_flight_;  // by the id the transport knows it by
  uint64_t next_command_id_ = 1;
  Clock::time_point last_progress_;
  Clock::time_point rate_tick_{};
  std::chrono::nanoseconds service_interval_{0};  // coalescing of completions (autotune.h)
  Clock::time_point last_service_{};
  std::vector<ConnectionLoad> loads_;  // PickConnection's scratch
  Status last_error_;
  bool failed_ = false;
  // Connection scaling.
  ConnectionScaler scaler_;
  Clock::time_point window_start_;
  uint64_t window_bytes_ = 0;
  bool window_valid_ = false;
  bool window_warm_ = false;
};

}  // namespace wanbackup::initiator::internal
