// ReadEngine: the IscsiSource implementation (see iscsi_source.h for the contract).
//
// Threads and who touches what:
//   consumer thread  Submit/Wait/Stats: takes mu_, appends to submitted_, takes from done_.
//   I/O thread       Run(): owns slots_, commands and ready_; polls every connection's socket
//                    plus wake_fd_; libiscsi callbacks run here, inside Connection::Service.
//   connector threads one per login in progress: Connection::Open + VerifySameLun, then hand
//                    the connection to the I/O thread through connected_ (under mu_).
// Command objects live until the engine is destroyed, after every context is destroyed, so
// libiscsi's cancel callbacks always find them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "initiator/internal/connection.h"
#include "initiator/iscsi_source.h"

struct scsi_task;

namespace wanbackup::initiator::internal {

class ReadEngine final : public IscsiSource {
 public:
  ReadEngine(IscsiSourceOptions options, std::unique_ptr<Connection> first, LunInfo lun,
             std::chrono::nanoseconds rtt, TuningPlan plan);
  ~ReadEngine() override;

  // BlockSource
  const SourceGeometry& geometry() const override { return geometry_; }
  uint64_t preferred_request_size() const override { return plan_.io_size; }
  size_t preferred_in_flight() const override;
  Status Submit(const ReadRequest& request) override;
  Result<ReadCompletion> Wait() override;
  SourceStats Stats() const override;

  // IscsiSource
  const LunInfo& lun() const override { return lun_; }
  const TuningPlan& plan() const override { return plan_; }
  const NegotiatedParams& negotiated() const override { return negotiated_; }

  void Start();

 private:
  using Clock = std::chrono::steady_clock;
  struct Request;
  struct Command;
  struct Slot;

  // I/O thread.
  void Run();
  void TakeSubmissions();
  Command* NewCommand();
  void ManageConnections(Clock::time_point now);
  void StartConnector(size_t slot_index, bool reconnect);
  void IssueCommands(Clock::time_point now);
  int CommandBudget() const;  // C x N: commands in flight over all connections
  int PickConnection();       // the slot for the next command, or -1
  void EstimateRates(Clock::time_point now);
  void PollAndService(Clock::time_point now);
  void TearDown(size_t slot_index, const Status& why);
  void OnCommandDone(Command* cmd, int status, scsi_task* task);
  void Requeue(Command* cmd, Clock::time_point not_before);
  void FinishPart(Command* cmd, const Status& status);
  void FailAll(const Status& status);
  void MeasureAndScale(Clock::time_point now);
  Status NoProgressStatus() const;
  static void ReadCallback(iscsi_context* iscsi, int status, void* command_data, void* data);

  const IscsiSourceOptions options_;
  const LunInfo lun_;
  const std::chrono::nanoseconds rtt_;
  TuningPlan plan_;
  const int per_connection_limit_;  // most commands on one connection (autotune.h)
  SourceGeometry geometry_;
  NegotiatedParams negotiated_;

  // Shared with the consumer and the connectors.
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<ReadRequest> submitted_;  // GUARDED_BY(mu_)
  std::deque<ReadCompletion> done_;    // GUARDED_BY(mu_)
  Status fatal_;                       // GUARDED_BY(mu_)
  struct Connected {
    size_t slot;
    Result<std::unique_ptr<Connection>> result;
  };
  std::vector<Connected> connected_;  // GUARDED_BY(mu_)
  size_t outstanding_requests_ = 0;   // GUARDED_BY(mu_)
  int wake_fd_ = -1;
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
