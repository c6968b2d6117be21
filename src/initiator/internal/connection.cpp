#include "initiator/internal/connection.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "common/cancel.h"
#include "common/trace.h"
#include "initiator/internal/scsi_error.h"

namespace wanbackup::initiator::internal {
namespace {

// libiscsi's log callback carries no user pointer, so the keys the target sends during a login
// are collected through this thread's current login (logins run on the thread that opens).
thread_local std::map<std::string, std::string>* t_login_keys = nullptr;

void CaptureLoginLog(int /*level*/, const char* message) {
  if (t_login_keys == nullptr || message == nullptr) return;
  static constexpr std::string_view kPrefix = "TargetLoginReply: ";
  std::string_view line(message);
  if (!line.starts_with(kPrefix)) return;
  line.remove_prefix(kPrefix.size());
  // libiscsi appends " [<target name>]" to every log line.
  if (line.ends_with("]")) {
    const size_t bracket = line.rfind(" [");
    if (bracket != std::string_view::npos) line = line.substr(0, bracket);
  }
  const size_t eq = line.find('=');
  if (eq == std::string_view::npos) return;
  std::string key(line.substr(0, eq));
  // CHAP exchanges carry challenges and responses; they are not parameters and stay out.
  if (key.starts_with("CHAP_")) return;
  (*t_login_keys)[key] = std::string(line.substr(eq + 1));
}

uint32_t KeyNumber(const std::map<std::string, std::string>& keys, const char* key,
                   uint32_t fallback) {
  auto it = keys.find(key);
  if (it == keys.end()) return fallback;
  char* end = nullptr;
  const unsigned long v = std::strtoul(it->second.c_str(), &end, 10);
  return (end != it->second.c_str()) ? static_cast<uint32_t>(v) : fallback;
}

bool KeyYes(const std::map<std::string, std::string>& keys, const char* key, bool fallback) {
  auto it = keys.find(key);
  if (it == keys.end()) return fallback;
  return it->second == "Yes";
}

NegotiatedParams ComputeNegotiated(std::map<std::string, std::string> keys) {
  NegotiatedParams n;
  n.max_burst_length =
      std::min(kInitiatorBurstLength, KeyNumber(keys, "MaxBurstLength", kInitiatorBurstLength));
  n.first_burst_length =
      std::min(kInitiatorBurstLength, KeyNumber(keys, "FirstBurstLength", kInitiatorBurstLength));
  n.initiator_max_recv_data_segment_length = kInitiatorBurstLength;
  n.target_max_recv_data_segment_length = KeyNumber(keys, "MaxRecvDataSegmentLength", 8192);
  n.immediate_data = KeyYes(keys, "ImmediateData", true);
  n.initial_r2t = KeyYes(keys, "InitialR2T", false);
  auto digest = keys.find("HeaderDigest");
  n.header_digest_crc32c = digest != keys.end() && digest->second == "CRC32C";
  n.max_connections = std::min<uint32_t>(1, KeyNumber(keys, "MaxConnections", 1));
  n.max_outstanding_r2t = std::min<uint32_t>(1, KeyNumber(keys, "MaxOutstandingR2T", 1));
  n.error_recovery_level = std::min<uint32_t>(0, KeyNumber(keys, "ErrorRecoveryLevel", 0));
  n.target_keys = std::move(keys);
  return n;
}

struct CommandWait {
  bool done = false;
  int status = SCSI_STATUS_ERROR;
};

void CommandCallback(iscsi_context* /*iscsi*/, int status, void* /*command_data*/, void* data) {
  auto* wait = static_cast<CommandWait*>(data);
  wait->status = status;
  wait->done = true;
}

bool AllDone(const std::vector<CommandWait>& waits) {
  return std::all_of(waits.begin(), waits.end(), [](const CommandWait& w) { return w.done; });
}

// One round of ExecuteAll: the commands issues[todo[k]] in flight, each with its wait and task
// (null when it could not be queued).
struct CommandRound {
  explicit CommandRound(std::vector<size_t> indices)
      : todo(std::move(indices)), waits(todo.size()), tasks(todo.size()) {}
  std::vector<size_t> todo;
  std::vector<CommandWait> waits;
  std::vector<ScsiTaskPtr> tasks;
};

// Queues every command of the round; one that cannot be queued fails at once.
void IssueRound(iscsi_context* iscsi, const std::vector<Connection::IssueFn>& issues,
                std::string_view what, CommandRound* round,
                std::vector<Result<ScsiTaskPtr>>* results) {
  for (size_t k = 0; k < round->todo.size(); ++k) {
    round->tasks[k].reset(issues[round->todo[k]](iscsi, CommandCallback, &round->waits[k]));
    if (!round->tasks[k]) {
      round->waits[k].done = true;
      (*results)[round->todo[k]] =
          Status::Internal(std::string(what) + ": cannot queue command: " + iscsi_get_error(iscsi));
    }
  }
}

// A UNIT ATTENTION reports an event (new nexus, reset, capacity change) instead of running
// the command; it is delivered once, so such commands are simply sent again.
constexpr int kMaxUnitAttentions = 10;

// Stores the result of each finished command of the round; returns the commands to send again
// (those that met a unit attention, for the first kMaxUnitAttentions rounds, but for the first
// `once` commands).
std::vector<size_t> CollectRound(iscsi_context* iscsi, int round_number, std::string_view what,
                                 size_t once, CommandRound* round,
                                 std::vector<Result<ScsiTaskPtr>>* results) {
  std::vector<size_t> again;
  for (size_t k = 0; k < round->todo.size(); ++k) {
    ScsiTaskPtr& task = round->tasks[k];
    if (!task) continue;
    const int status = round->waits[k].status;
    const bool attention =
        status == SCSI_STATUS_CHECK_CONDITION && task->sense.key == SCSI_SENSE_UNIT_ATTENTION;
    if (attention && round->todo[k] < once) {  // a TEST UNIT READY of ExecuteAllFirst took it
      WB_TRACE("%.*s: UNIT ATTENTION (ASC/ASCQ 0x%04x) taken by TEST UNIT READY",
               static_cast<int>(what.size()), what.data(), static_cast<unsigned>(task->sense.ascq));
    } else if (attention && round_number < kMaxUnitAttentions) {
      WB_TRACE("%.*s: UNIT ATTENTION (ASC/ASCQ 0x%04x), sending command %zu of the batch again",
               static_cast<int>(what.size()), what.data(), static_cast<unsigned>(task->sense.ascq),
               round->todo[k] - once);
      again.push_back(round->todo[k]);
      continue;
    }
    Status s = TaskStatus(status, task.get(), iscsi, what);
    if (s.ok()) {
      (*results)[round->todo[k]] = std::move(task);
    } else {
      (*results)[round->todo[k]] = s;
    }
  }
  return again;
}

// Connect, then login: the same callback serves both steps.
struct LoginWait {
  bool connected = false;
  bool done = false;
  int status = SCSI_STATUS_ERROR;
  std::string portal;
};

void LoginCallback(iscsi_context* iscsi, int status, void* /*command_data*/, void* data) {
  auto* wait = static_cast<LoginWait*>(data);
  if (!wait->connected && status == SCSI_STATUS_GOOD) {
    wait->connected = true;
    if (iscsi_login_async(iscsi, LoginCallback, wait) == 0) return;
    status = SCSI_STATUS_ERROR;
  }
  wait->status = status;
  wait->done = true;
}

struct DiscoveryWait {
  bool done = false;
  int status = SCSI_STATUS_ERROR;
  std::vector<DiscoveredTarget> targets;
};

void DiscoveryCallback(iscsi_context* /*iscsi*/, int status, void* command_data, void* data) {
  auto* wait = static_cast<DiscoveryWait*>(data);
  wait->status = status;
  wait->done = true;
  if (status != SCSI_STATUS_GOOD || command_data == nullptr) return;
  for (auto* addr = static_cast<iscsi_discovery_address*>(command_data); addr != nullptr;
       addr = addr->next) {
    DiscoveredTarget target;
    target.name = addr->target_name != nullptr ? addr->target_name : "";
    for (auto* portal = addr->portals; portal != nullptr; portal = portal->next) {
      if (portal->portal != nullptr) target.portals.emplace_back(portal->portal);
    }
    wait->targets.push_back(std::move(target));
  }
}

// A header digest asked for explicitly must be in force: libiscsi accepts the target's "None"
// to its CRC32C offer and logs in without one. Unsupported, not Unavailable: trying again gets
// the same answer.
Status DigestRefusal(HeaderDigest asked, const NegotiatedParams& n, const std::string& where) {
  if (asked != HeaderDigest::kCrc32c || n.header_digest_crc32c) return Status::Ok();
  auto answer = n.target_keys.find("HeaderDigest");
  const std::string answered =
      answer == n.target_keys.end() ? "no HeaderDigest" : "HeaderDigest=" + answer->second;
  return Status::Unsupported("cannot log in to " + where +
                             " with CRC32C header digests: the target refused them (it answered " +
                             answered + "); --header-digest auto accepts that");
}

}  // namespace

void ScsiTaskDeleter::operator()(scsi_task* task) const {
  scsi_free_scsi_task(task);
}

Connection::Connection(const ConnectionOptions& options) : options_(options.Clone()) {}

Connection::~Connection() {
  Logout();
  Abort();
}

std::string Connection::where() const {
  IscsiUrl url;
  url.host = options_.host;
  url.port = options_.port;
  return options_.target.empty() ? url.Portal() : options_.target + " at " + url.Portal();
}

Result<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options,
                                                     const std::atomic<bool>* abort) {
  std::unique_ptr<Connection> conn(new Connection(options));
  conn->abort_ = abort;
  Status status = conn->Login();
  if (!status.ok()) return status;
  return conn;
}

Status Connection::Configure() {
  const std::string initiator =
      options_.initiator_name.empty() ? DefaultInitiatorName() : options_.initiator_name;
  iscsi_ = iscsi_create_context(initiator.c_str());
  if (iscsi_ == nullptr) return Status::Internal("cannot create an iSCSI context");

  const bool discovery = options_.target.empty();
  iscsi_set_session_type(iscsi_, discovery ? ISCSI_SESSION_DISCOVERY : ISCSI_SESSION_NORMAL);
  if (!discovery && iscsi_set_targetname(iscsi_, options_.target.c_str()) != 0) {
    return Status::InvalidArgument(std::string("bad target name: ") + iscsi_get_error(iscsi_));
  }
  switch (options_.header_digest) {
    case HeaderDigest::kNone:
      iscsi_set_header_digest(iscsi_, ISCSI_HEADER_DIGEST_NONE);
      break;
    case HeaderDigest::kCrc32c:
      iscsi_set_header_digest(iscsi_, ISCSI_HEADER_DIGEST_CRC32C);
      break;
    case HeaderDigest::kTargetChooses:
      break;
  }
  if (!options_.chap.user.empty()) {
    if (options_.chap.secret.empty()) {
      return Status::InvalidArgument("CHAP user '" + options_.chap.user +
                                     "' given without a secret");
    }
    if (iscsi_set_initiator_username_pwd(iscsi_, options_.chap.user.c_str(),
                                         options_.chap.secret.c_str()) != 0) {
      return Status::InvalidArgument(std::string("CHAP: ") + iscsi_get_error(iscsi_));
    }
    if (!options_.chap.target_user.empty() &&
        iscsi_set_target_username_pwd(iscsi_, options_.chap.target_user.c_str(),
                                      options_.chap.target_secret.c_str()) != 0) {
      return Status::InvalidArgument(std::string("mutual CHAP: ") + iscsi_get_error(iscsi_));
    }
  } else if (!options_.chap.target_user.empty()) {
    return Status::InvalidArgument("mutual CHAP needs the initiator's CHAP user and secret too");
  }
  // We decide about reconnecting ourselves (the reader re-issues exactly what was outstanding).
  iscsi_set_noautoreconnect(iscsi_, 1);
  const int timeout_s = static_cast<int>(std::max<int64_t>(
      1, std::chrono::ceil<std::chrono::seconds>(options_.command_timeout).count()));
  iscsi_set_timeout(iscsi_, timeout_s);
  return Status::Ok();
}

Status Connection::Login() {
  WB_RETURN_IF_ERROR(Configure());
  std::map<std::string, std::string> keys;
  t_login_keys = &keys;
  iscsi_set_log_fn(iscsi_, CaptureLoginLog);
  iscsi_set_log_level(iscsi_, 6);

  IscsiUrl portal_url;
  portal_url.host = options_.host;
  portal_url.port = options_.port;
  const std::string portal = portal_url.Portal();
  // TCP connect, then login, chained here rather than with iscsi_full_connect_async: that one
  // allocates state that only its callbacks free, and leaks when a login times out.
  LoginWait wait;
  wait.portal = portal;
  const auto start = Clock::now();
  Status status;
  if (iscsi_connect_async(iscsi_, portal.c_str(), LoginCallback, &wait) != 0) {
    status = LoginStatus(iscsi_get_error(iscsi_), portal, options_.target);
  } else if (!options_.congestion_control.empty()) {
    // Set while the socket connects, before the login's first byte. It was checked before the
    // first login (CheckCongestionControl), so this fails only if the host changed meanwhile.
    status = SetCongestionControl(iscsi_get_fd(iscsi_), options_.congestion_control);
  }
  if (status.ok()) {  // connecting, and the congestion control (if any) set
    status = RunUntil([&wait] { return wait.done; }, start + options_.login_timeout, "login");
    if (connect_errno_ != 0) {
      status = Status::FromErrno(connect_errno_, "cannot connect to " + portal);
    } else if (status.code() == StatusCode::kTimeout) {
      status = Status::Timeout("no answer from " + portal + " within " +
                               std::to_string(options_.login_timeout.count()) +
                               " ms (host down, wrong address, or a firewall drops iSCSI)");
    } else if (status.ok() && wait.status != SCSI_STATUS_GOOD) {
      status = LoginStatus(iscsi_get_error(iscsi_), portal, options_.target);
    }
  }
  if (iscsi_ != nullptr) iscsi_set_log_level(iscsi_, 0);
  t_login_keys = nullptr;
  if (!status.ok()) {
    Abort();
    if (status.code() == StatusCode::kAuthFailed && options_.chap.user.empty()) {
      return Status::AuthFailed("login to " + where() +
                                " refused: the target requires CHAP (give --chap-user and "
                                "--chap-secret-file, or $WANBACKUP_CHAP_SECRET)");
    }
    return status;
  }
  login_time_ = Clock::now() - start;
  negotiated_ = ComputeNegotiated(std::move(keys));
  status = DigestRefusal(options_.header_digest, negotiated_, where());
  if (!status.ok()) {
    Logout();
    Abort();
  }
  return status;
}

void Connection::Logout() {
  if (iscsi_ == nullptr || !iscsi_is_logged_in(iscsi_)) return;
  CommandWait wait;
  if (iscsi_logout_async(iscsi_, CommandCallback, &wait) != 0) return;
  // A logout is a courtesy to the target; never wait long for it.
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(options_.command_timeout,
                                                                           std::chrono::seconds(2));
  (void)RunUntil([&wait] { return wait.done; }, deadline, "logout");
}

void Connection::Abort() {
  if (iscsi_ == nullptr) return;
  iscsi_context* ctx = iscsi_;
  iscsi_ = nullptr;
  // Close with a reset, dropping what the socket has not delivered. A plain close leaves the
  // kernel retransmitting it: a WRITE given up on here (and sent again on another connection)
  // would then reach the target whenever the link lets it through, perhaps after newer data for
  // the same blocks, minutes later, in the next run. The target sees the reset and aborts what
  // this connection left incomplete.
  const int fd = iscsi_get_fd(ctx);
  if (fd >= 0) {
    const linger reset{1, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
  iscsi_destroy_context(ctx);
}

int Connection::fd() const {
  return iscsi_ != nullptr ? iscsi_get_fd(iscsi_) : -1;
}

short Connection::events() const {
  return iscsi_ != nullptr ? static_cast<short>(iscsi_which_events(iscsi_)) : 0;
}

Status Connection::Service(short revents) {
  if (iscsi_ == nullptr) return Status::Unavailable("connection to " + where() + " is closed");
  if ((revents & (POLLERR | POLLHUP)) != 0 && !iscsi_is_logged_in(iscsi_)) {
    // libiscsi reports a failed connect() only as its own reconnect text; keep the real reason.
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(iscsi_get_fd(iscsi_), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
      connect_errno_ = err;
    }
  }
  if (iscsi_service(iscsi_, revents) < 0) {
    Status status =
        Status::Unavailable("connection to " + where() + " failed: " + iscsi_get_error(iscsi_));
    return status;
  }
  return Status::Ok();
}

Status Connection::Step(std::chrono::milliseconds wait) {
  if (iscsi_ == nullptr) return Status::Unavailable("connection to " + where() + " is closed");
  pollfd pfd{};
  pfd.fd = iscsi_get_fd(iscsi_);
  pfd.events = static_cast<short>(iscsi_which_events(iscsi_));
  const int n = ::poll(&pfd, 1, static_cast<int>(wait.count()));
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return Status::FromErrno(errno, "poll");
  }
  return Service(n > 0 ? pfd.revents : 0);
}

Status Connection::RunUntil(const std::function<bool()>& done, Clock::time_point deadline,
                            std::string_view what) {
  while (!done()) {
    if (CancellationRequested() || (abort_ != nullptr && abort_->load())) {
      return Status::Cancelled(std::string(what) + ": interrupted");
    }
    const auto now = Clock::now();
    if (now >= deadline) return Status::Timeout(std::string(what) + ": timed out");
    // Wake at least once a second so libiscsi's own timeouts and our cancellation are seen.
    const auto wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(deadline - now),
                                 std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
    WB_RETURN_IF_ERROR(Step(wait));
  }
  return Status::Ok();
}

Result<ScsiTaskPtr> Connection::Execute(const IssueFn& issue, std::string_view what) {
  std::vector<Result<ScsiTaskPtr>> results = ExecuteAll({issue}, what);
  return std::move(results.front());
}

std::vector<Result<ScsiTaskPtr>> Connection::ExecuteAll(const std::vector<IssueFn>& issues,
                                                        std::string_view what) {
  return RunAll(issues, what, 0);
}

std::vector<Result<ScsiTaskPtr>> Connection::ExecuteAllFirst(int lun,
                                                             const std::vector<IssueFn>& issues,
                                                             std::string_view what) {
  std::vector<IssueFn> all;
  all.reserve(issues.size() + 1);
  all.push_back([lun](iscsi_context* iscsi, auto cb, void* data) {
    return iscsi_testunitready_task(iscsi, lun, cb, data);
  });
  all.insert(all.end(), issues.begin(), issues.end());
  std::vector<Result<ScsiTaskPtr>> results = RunAll(all, what, 1);
  results.erase(results.begin());  // the TEST UNIT READY's
  return results;
}

std::vector<Result<ScsiTaskPtr>> Connection::RunAll(const std::vector<IssueFn>& issues,
                                                    std::string_view what, size_t once) {
  std::vector<Result<ScsiTaskPtr>> results;
  results.reserve(issues.size());
  for (size_t i = 0; i < issues.size(); ++i) {
    results.emplace_back(Status::Internal(std::string(what) + ": not run"));
  }
  if (iscsi_ == nullptr) {
    for (auto& r : results)
      r = Status::Unavailable("connection to " + where() + " is closed");
    return results;
  }
  std::vector<size_t> todo(issues.size());
  for (size_t i = 0; i < todo.size(); ++i)
    todo[i] = i;
  for (int round_number = 0; !todo.empty(); ++round_number) {
    CommandRound round(std::move(todo));
    IssueRound(iscsi_, issues, what, &round, &results);
    const auto deadline = Clock::now() + options_.command_timeout;
    Status status = RunUntil([&round] { return AllDone(round.waits); }, deadline, what);
    if (!status.ok()) {
      Abort();  // the commands may still complete later; nobody must be waiting for them then
      if (status.code() == StatusCode::kTimeout) {
        status = Status::Timeout(std::string(what) + ": no answer from " + where() + " within " +
                                 std::to_string(options_.command_timeout.count()) + " ms");
      }
      for (size_t k = 0; k < round.todo.size(); ++k) {
        if (round.tasks[k]) results[round.todo[k]] = status;
      }
      return results;
    }
    todo = CollectRound(iscsi_, round_number, what, once, &round, &results);
  }
  return results;
}

std::chrono::nanoseconds Connection::MinRtt() const {
  if (iscsi_ == nullptr) return std::chrono::nanoseconds(0);
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(iscsi_get_fd(iscsi_), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
    return std::chrono::nanoseconds(0);
  }
  return std::chrono::microseconds(info.tcpi_min_rtt);
}

Result<std::vector<DiscoveredTarget>> Connection::Discover() {
  if (iscsi_ == nullptr) return Status::Unavailable("connection to " + where() + " is closed");
  DiscoveryWait wait;
  if (iscsi_discovery_async(iscsi_, DiscoveryCallback, &wait) != 0) {
    return Status::Internal(std::string("cannot start discovery: ") + iscsi_get_error(iscsi_));
  }
  Status status =
      RunUntil([&wait] { return wait.done; }, Clock::now() + options_.command_timeout, "discovery");
  if (!status.ok()) {
    Abort();
    return status;
  }
  if (wait.status != SCSI_STATUS_GOOD) {
    return Status::Unavailable("discovery at " + where() + " failed: " + iscsi_get_error(iscsi_));
  }
  return std::move(wait.targets);
}

}  // namespace wanbackup::initiator::internal
