// CommandEngine: many block commands in flight over C channels of a Transport (transport.h) —
// the part the READ and WRITE engines share (read_engine.h, write_engine.h). It splits requests
// into commands, decides which command goes on which channel, how big each one is while a
// channel ramps up, when to retry (retry_policy.h), reconnect, add or drop channels
// (ConnectionScaler, autotune.h) and give up, and on a WAN paces READs (ReadPacer, autotune.h);
// the transport moves the bytes. Its commands live in command_engine.cpp, its connections in
// command_engine_connections.cpp; command_engine_parts.h holds what both see.
//
// Commands of one run may be READs, WRITEs, WRITE SAMEs (all-zero ranges) and SYNCHRONIZE
// CACHEs. A WRITE is done only when the target answered GOOD; one lost with its connection is
// sent again, whole, on another (a WRITE is idempotent as long as no two requests in flight
// overlap, which the callers guarantee). A WRITE SAME the target refuses (ILLEGAL REQUEST: not
// implemented, or not with UNMAP) is sent again as WRITEs of zeros, and so is every later one.
//
// Threads and who touches what:
//   consumer thread  Submit/Wait/Stats: takes mu_, appends to submitted_, takes from done_.
//   I/O thread       Run(): owns slots_, commands and ready_, and is the only caller of the
//                    transport (but Wake). Stats() reads atomics from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/block_io.h"
#include "initiator/autotune.h"
#include "initiator/internal/transport.h"

namespace wanbackup::initiator::internal {

// True when `length` bytes at `data` are all zero (a WRITE of them can go as WRITE SAME).
inline bool AllZero(const uint8_t* data, uint64_t length) {
  return length == 0 || (data[0] == 0 && std::memcmp(data, data + 1, length - 1) == 0);
}

// One request of the consumer: `op` over [offset, offset + length) bytes of the LUN, split into
// commands of at most the plan's io_size (WRITE SAMEs: write_same_bytes).
struct EngineRequest {
  BlockOp op = BlockOp::kRead;
  uint64_t offset = 0;        // bytes, a multiple of the block size
  uint64_t length = 0;        // bytes, a multiple of the block size; kSynchronizeCache: 0 = all
  uint8_t* buffer = nullptr;  // kRead: filled; kWrite: sent. The caller's until completion.
  uint64_t tag = 0;           // returned with the completion
  bool fua = false;           // kWrite
  bool unmap = false;         // kWriteZeros
};

struct EngineCompletion {
  EngineRequest request;
  Status status;  // not OK: the range was not done (the message names it)
};

struct CommandEngineConfig {
  SourceGeometry geometry;  // named for messages
  std::chrono::nanoseconds rtt{0};
  TuningPlan plan;
  std::chrono::milliseconds retry_timeout{300000};  // no progress this long: give up
  std::string activity = "reading";                 // for messages: "reading X: interrupted"
  std::string unfinished = "unread";                // "no progress ...; unread from LBA ..."
  uint64_t write_same_bytes = 8 << 20;              // largest WRITE SAME
  // Round trips one command of io_size costs (a READ 1; a WRITE 1 + its R2T bursts, see
  // write_plan.h): what one connection can carry alone is queue_depth x io_size per this many.
  int round_trips_per_command = 1;
  // A new connection's commands start this small and double per completion up to io_size
  // (command_engine.cpp, kRampStartBytes). 0: the default ramp, for READs. WRITEs start at full
  // size: our own TCP paces their data, and a small WRITE costs the same round trips as a full one.
  uint32_t ramp_start_bytes = 0;
};

class CommandEngine {
 public:
  // Channel 0 of `transport` is open; more are opened as the plan asks.
  CommandEngine(std::unique_ptr<Transport> transport, CommandEngineConfig config);
  ~CommandEngine();
  CommandEngine(const CommandEngine&) = delete;
  CommandEngine& operator=(const CommandEngine&) = delete;

  const CommandEngineConfig& config() const { return config_; }
  // Commands to keep submitted for full speed (see BlockSource::preferred_in_flight).
  size_t preferred_in_flight() const;
  // Queues a request. Fails for a malformed one, or after a fatal failure.
  Status Submit(const EngineRequest& request);
  // The next completion, in any order. Fails when the engine failed for good or was cancelled;
  // no command then touches any outstanding request's buffer any more.
  Result<EngineCompletion> Wait();
  // bytes_read counts the bytes every command carried (or zeroed), in either direction.
  SourceStats Stats() const;
  uint64_t bytes_zeroed() const { return bytes_zeroed_.load(); }  // by WRITE SAME
  bool write_same_refused() const { return write_same_refused_.load(); }

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
  void PaceRound(Clock::time_point now);       // ReadPacer's rounds and the token bucket
  bool Warming() const;                        // a connection is logging in or ramping up
  std::chrono::nanoseconds RoundTrip() const;  // the login's RTT, or the quickest READ if longer
  void IssueCommands(Clock::time_point now);
  void SplitRequest(Request* request, BlockOp op);
  uint8_t* ZeroData();  // io_size bytes of zeros
  Command* SplitToRamp(size_t ready_index, uint32_t limit);
  bool FallBackToWrite(Command* cmd, const CommandDone& done);
  bool FallBackToSync10(Command* cmd, const CommandDone& done);
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
  CommandEngineConfig config_;
  const int per_connection_limit_;  // most commands on one connection (autotune.h)

  // Shared with the consumer.
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<EngineRequest> submitted_;  // GUARDED_BY(mu_)
  std::deque<EngineCompletion> done_;    // GUARDED_BY(mu_)
  Status fatal_;                         // GUARDED_BY(mu_)
  size_t outstanding_requests_ = 0;      // GUARDED_BY(mu_)
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancel_requested_{false};
  std::thread io_thread_;

  // Counters read by Stats() from any thread.
  std::atomic<uint64_t> bytes_done_{0}, bytes_in_flight_{0}, retries_{0}, reconnects_{0};
  std::atomic<uint64_t> bytes_zeroed_{0};
  std::atomic<bool> write_same_refused_{false};
  std::atomic<bool> sync16_refused_{false};  // SYNCHRONIZE CACHE goes as the 10-byte CDB
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
  std::vector<uint8_t> zeros_;  // the data of WRITE SAMEs sent as WRITEs (FallBackToWrite)
  bool failed_ = false;
  // Pacing READs (autotune.h, ReadPacer): a token bucket of bytes filled at pacer_.rate().
  ReadPacer pacer_;
  Clock::time_point round_start_{};
  uint64_t round_bytes_ = 0;        // READ bytes delivered in this round
  bool round_app_limited_ = false;  // this round ran out of READs to issue
  std::chrono::nanoseconds round_min_latency_ = std::chrono::nanoseconds::max();  // for traces
  std::chrono::nanoseconds min_read_latency_ = std::chrono::nanoseconds::max();   // of the run
  double pace_rate_ = 0;    // bytes/s, as of the last PaceRound
  double pace_tokens_ = 0;  // bytes; below 0 after a READ larger than what was left
  Clock::time_point pace_refill_{};
  Clock::time_point pace_wake_{};  // when the bucket has room for the next READ
  // Connection scaling.
  ConnectionScaler scaler_;
  Clock::time_point window_start_;
  uint64_t window_bytes_ = 0;
  bool window_valid_ = false;
  bool window_warm_ = false;
};

}  // namespace wanbackup::initiator::internal
