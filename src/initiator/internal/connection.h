// Connection: owns one libiscsi context = one TCP connection carrying one iSCSI session
// (libiscsi has no multiple connections per session). Internal to the initiator module.
//
// Not thread-safe: one thread opens it, drives its event loop (Step/RunUntil/Execute, or an
// outside poll() over fd()/events() + Service()) and destroys it. Destruction logs out (bounded)
// and destroys the context; libiscsi then calls every pending command's callback with
// SCSI_STATUS_CANCELLED, so per-command state must outlive this object's destruction.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "initiator/connection_options.h"

struct iscsi_context;
struct scsi_task;

namespace wanbackup::initiator::internal {

struct ScsiTaskDeleter {
  void operator()(scsi_task* task) const;
};
using ScsiTaskPtr = std::unique_ptr<scsi_task, ScsiTaskDeleter>;

struct DiscoveredTarget {
  std::string name;
  std::vector<std::string> portals;
};

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  // Issues one SCSI command on `iscsi` with libiscsi's callback signature; returns the task or
  // null when it could not be queued.
  using IssueFn = std::function<scsi_task*(
      iscsi_context* iscsi, void (*cb)(iscsi_context*, int, void*, void*), void* private_data)>;

  // Connects and logs in within options.login_timeout: a normal session with a target, a
  // discovery session without one. Unit attentions are handled per command by Execute and
  // ExecuteAll (sent again), or taken by ExecuteAllFirst's TEST UNIT READY.
  // `abort`, when given, is polled like the cancellation flag: setting it makes Open give up.
  static Result<std::unique_ptr<Connection>> Open(const ConnectionOptions& options,
                                                  const std::atomic<bool>* abort = nullptr);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // The raw context, for the initiator's own command code. Null once broken.
  iscsi_context* context() const { return iscsi_; }
  bool broken() const { return iscsi_ == nullptr; }
  int fd() const;
  short events() const;
  // Handles `revents` from poll() (0 on a timer tick). A failure breaks the connection.
  Status Service(short revents);

  // Waits up to `wait` for socket readiness and services the context once.
  Status Step(std::chrono::milliseconds wait);
  // Steps until `done` returns true, the deadline passes (Timeout), cancellation is requested
  // (Cancelled) or the connection fails.
  Status RunUntil(const std::function<bool()>& done, Clock::time_point deadline,
                  std::string_view what);
  // Issues one command and waits for it (bounded by the command timeout). Returns the finished
  // task when it completed with GOOD status, else the mapped failure. On timeout the connection
  // is torn down (the command cannot be recalled), so later calls fail fast.
  Result<ScsiTaskPtr> Execute(const IssueFn& issue, std::string_view what);
  // Issues several commands at once (one round trip for all) and waits for every one; each
  // result is as Execute's. A timeout tears the connection down as in Execute.
  std::vector<Result<ScsiTaskPtr>> ExecuteAll(const std::vector<IssueFn>& issues,
                                              std::string_view what);
  // ExecuteAll for a session's first commands to `lun`, behind a TEST UNIT READY in the same
  // round trip. A new session's first command other than INQUIRY or REPORT LUNS meets a UNIT
  // ATTENTION (the target reports a power-on or reset to every new I_T nexus, once), which
  // ExecuteAll answers by sending that command again: one round trip more for every login. The
  // TEST UNIT READY takes the attention instead, and is neither sent again nor looked at (a LUN
  // that is not ready says so in the commands behind it); another attention still pending is met
  // and sent again as in ExecuteAll.
  std::vector<Result<ScsiTaskPtr>> ExecuteAllFirst(int lun, const std::vector<IssueFn>& issues,
                                                   std::string_view what);
  // The kernel's smallest round-trip sample on this connection's socket (TCP_INFO min_rtt), or
  // 0 when unknown. After login it reflects several clean round trips.
  std::chrono::nanoseconds MinRtt() const;
  // SendTargets discovery (discovery sessions only).
  Result<std::vector<DiscoveredTarget>> Discover();
  // Destroys the context now (no logout), cancelling everything outstanding.
  void Abort();

  const NegotiatedParams& negotiated() const { return negotiated_; }
  std::chrono::nanoseconds login_time() const { return login_time_; }
  const ConnectionOptions& options() const { return options_; }
  std::string where() const;

 private:
  // ExecuteAll; the first `once` commands are not sent again after a UNIT ATTENTION.
  std::vector<Result<ScsiTaskPtr>> RunAll(const std::vector<IssueFn>& issues, std::string_view what,
                                          size_t once);
  explicit Connection(const ConnectionOptions& options);
  // Creates the context and sets what the login will offer: session type, target, digest,
  // CHAP, no automatic reconnect, the command timeout.
  Status Configure();
  // Configure, then TCP connect + iSCSI login, keeping the negotiated keys.
  Status Login();
  void Logout();

  ConnectionOptions options_;
  iscsi_context* iscsi_ = nullptr;
  NegotiatedParams negotiated_;
  std::chrono::nanoseconds login_time_{0};
  int connect_errno_ = 0;  // why the TCP connect failed, when it did
  const std::atomic<bool>* abort_ = nullptr;
};

}  // namespace wanbackup::initiator::internal
