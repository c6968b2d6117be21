#include "repository/s3_lock.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "common/cancel.h"
#include "common/hex.h"
#include "common/text.h"
#include "store/s3_objects.h"

namespace wanbackup::pipeline {
namespace {

constexpr const char kLockDir[] = "locks/";

const char* KindName(LockKind kind) {
  switch (kind) {
    case LockKind::kShared:
      return "shared";
    case LockKind::kWriter:
      return "writer";
    case LockKind::kExclusive:
      return "exclusive";
  }
  return "exclusive";
}

int64_t NowUnix() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::string HostName() {
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

bool PidAlive(int64_t pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string RandomSuffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) | rd();
  return ToHex(reinterpret_cast<const uint8_t*>(&r), sizeof r);
}

}  // namespace

bool S3LocksCompatible(LockKind a, LockKind b) {
  if (a == LockKind::kExclusive || b == LockKind::kExclusive) return false;
  return !(a == LockKind::kWriter && b == LockKind::kWriter);
}

std::string S3LockStaleReason(const S3LockInfo& info, const std::string& here, int64_t now_unix,
                              bool pid_alive) {
  if (info.host == here && !pid_alive) {
    return "its process " + std::to_string(info.pid) + " on this host is gone";
  }
  const int64_t age = now_unix - info.refreshed_unix;
  const int64_t limit = std::chrono::duration_cast<std::chrono::seconds>(kS3LockStaleAfter).count();
  if (age > limit) {
    return "it was not refreshed for " + std::to_string(age / 60) +
           " minutes (a live holder refreshes it every " +
           std::to_string(kS3LockRefreshEvery.count()) + ")";
  }
  return "";
}

std::string S3LockJson(const S3LockInfo& info) {
  const nlohmann::json j = {{"kind", KindName(info.kind)},
                            {"host", info.host},
                            {"pid", info.pid},
                            {"holder", info.holder},
                            {"refreshed_unix", info.refreshed_unix}};
  return j.dump() + "\n";
}

Result<S3LockInfo> ParseS3Lock(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("host") ||
      !j["host"].is_string() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      !j.contains("refreshed_unix") || !j["refreshed_unix"].is_number_integer()) {
    return Status::Corruption("not a wanbackup lock object");
  }
  S3LockInfo info;
  const std::string kind = j["kind"].get<std::string>();
  info.kind = kind == "shared"   ? LockKind::kShared
              : kind == "writer" ? LockKind::kWriter
                                 : LockKind::kExclusive;
  info.host = EscapeControl(j["host"].get<std::string>());
  info.pid = j["pid"].get<int64_t>();
  if (j.contains("holder") && j["holder"].is_string()) {
    info.holder = EscapeControl(j["holder"].get<std::string>());
  }
  info.refreshed_unix = j["refreshed_unix"].get<int64_t>();
  return info;
}

S3RepoLock::S3RepoLock(std::shared_ptr<S3Objects> s3, std::string name, S3LockInfo info)
    : s3_(std::move(s3)), name_(std::move(name)), info_(std::move(info)) {}

Result<std::string> S3RepoLock::Conflict(const LockOptions& options) {
  WB_ASSIGN_OR_RETURN(const std::vector<S3Object> locks, s3_->List(kLockDir));
  const std::string here = HostName();
  for (const S3Object& object : locks) {
    if (object.name == name_) continue;
    Result<std::string> text = s3_->Get(object.name);
    if (text.status().code() == StatusCode::kNotFound) continue;  // released meanwhile
    WB_RETURN_IF_ERROR(text.status());
    Result<S3LockInfo> other = ParseS3Lock(*text);
    if (!other.ok()) {
      // Not ours to judge or remove: it keeps everybody out until someone looks.
      return s3_->Describe(object.name) + " (not a wanbackup lock object; remove it by hand)";
    }
    const std::string stale =
        S3LockStaleReason(*other, here, NowUnix(), other->host == here && PidAlive(other->pid));
    if (!stale.empty()) {
      if (options.on_note) {
        options.on_note("removed the stale lock " + s3_->Describe(object.name) + " of " +
                        (other->holder.empty() ? "an unknown holder" : other->holder) + ": " +
                        stale);
      }
      WB_RETURN_IF_ERROR(s3_->Remove(object.name));
      continue;
    }
    if (!S3LocksCompatible(info_.kind, other->kind)) {
      return (other->holder.empty() ? "an unnamed holder" : other->holder) + " (" +
             KindName(other->kind) + " lock " + object.name + ")";
    }
  }
  return std::string();
}

Result<std::unique_ptr<S3RepoLock>> S3RepoLock::Acquire(std::shared_ptr<S3Objects> s3,
                                                        LockKind kind, const LockOptions& options) {
  S3LockInfo info;
  info.kind = kind;
  info.host = HostName();
  info.pid = ::getpid();
  info.holder = HolderLine(options.command);
  while (!info.holder.empty() && info.holder.back() == '\n')
    info.holder.pop_back();
  const std::string name = std::string(kLockDir) + KindName(kind) + "-" + RandomSuffix() + ".json";
  std::unique_ptr<S3RepoLock> lock(new S3RepoLock(std::move(s3), name, info));
  const auto deadline = std::chrono::steady_clock::now() + options.wait;
  for (;;) {
    lock->info_.refreshed_unix = NowUnix();
    WB_RETURN_IF_ERROR(lock->s3_->Put(name, S3LockJson(lock->info_)));
    Result<std::string> conflict = lock->Conflict(options);
    if (conflict.ok() && conflict->empty()) break;
    (void)lock->s3_->Remove(name);
    WB_RETURN_IF_ERROR(conflict.status());
    if (std::chrono::steady_clock::now() >= deadline) {
      lock->name_.clear();  // nothing to remove any more
      return Status::Busy("repository " + lock->s3_->location().ToString() + " is locked by " +
                          *conflict + "; nothing was changed (" + options.wait_setting +
                          " DURATION waits for it)");
    }
    if (CancellationRequested()) {
      lock->name_.clear();
      return Status::Cancelled("interrupted while waiting for the repository's lock");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  lock->refresher_ = std::thread([raw = lock.get()] { raw->RefreshLoop(); });
  return lock;
}

void S3RepoLock::RefreshLoop() {
  std::unique_lock<std::mutex> guard(mu_);
  while (!wake_.wait_for(guard, kS3LockRefreshEvery, [this] { return stop_; })) {
    info_.refreshed_unix = NowUnix();
    (void)s3_->Put(name_, S3LockJson(info_));  // a failed refresh is tried again next time
  }
}

S3RepoLock::~S3RepoLock() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  if (!name_.empty()) (void)s3_->Remove(name_);
}

}  // namespace wanbackup::pipeline
