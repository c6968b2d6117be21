// The locks of an S3 repository as objects (docs/durability.md, "Concurrency"), so that hosts
// that share the bucket keep out of each other as commands on one host do (repo_lock.h's kinds:
// readers shared, one appending writer beside them, removers alone). Each holder keeps one
// object PREFIX/locks/<kind>-<random>.json: {"kind", "host", "pid", "command", "holder",
// "since_unix", "refreshed_unix"}. To take a lock: write its object, then list locks/; another
// live holder whose kind conflicts means: remove ours, wait a second and try again, up to
// LockOptions::wait, then Busy naming that holder. Both of two racing holders may back off (no
// compare-and-swap on S3); neither ever proceeds beside the other.
//
// A lock is stale when its holder cannot be alive: on this host, when its pid is gone; on any
// host, when it was not refreshed for kS3LockStaleAfter (a holder rewrites its object every
// kS3LockRefreshEvery from a thread of its own). Stale locks are ignored and removed, and each is
// explained through LockOptions::on_note. Released (its object removed) when destroyed.
// Not thread-safe; one per open repository.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "repository/repo_lock.h"

namespace wanbackup::pipeline {

class S3Objects;

inline constexpr std::chrono::minutes kS3LockRefreshEvery{5};
inline constexpr std::chrono::minutes kS3LockStaleAfter{30};

// What one lock object says (parsed from its JSON; untrusted).
struct S3LockInfo {
  LockKind kind = LockKind::kShared;
  std::string host;
  int64_t pid = 0;
  std::string holder;  // "wanbackup pid 123 on host1 running 'prune' since …"
  int64_t refreshed_unix = 0;
};

// Whether a holder of `a` and a holder of `b` may run at once (repo_lock.h).
bool S3LocksCompatible(LockKind a, LockKind b);
// Why the lock `info` is stale at `now_unix` seen from host `here` ("" when it may be alive):
// `pid_alive` says whether a pid runs on this host.
std::string S3LockStaleReason(const S3LockInfo& info, const std::string& here, int64_t now_unix,
                              bool pid_alive);
// The object's JSON (none of it secret), and back; Corruption for anything else.
std::string S3LockJson(const S3LockInfo& info);
Result<S3LockInfo> ParseS3Lock(const std::string& text);

class S3RepoLock {
 public:
  static Result<std::unique_ptr<S3RepoLock>> Acquire(std::shared_ptr<S3Objects> s3, LockKind kind,
                                                     const LockOptions& options);
  ~S3RepoLock();  // stops refreshing, removes the object
  S3RepoLock(const S3RepoLock&) = delete;
  S3RepoLock& operator=(const S3RepoLock&) = delete;

 private:
  S3RepoLock(std::shared_ptr<S3Objects> s3, std::string name, S3LockInfo info);
  // "" when nothing keeps `kind` out, else the holder that does; stale locks removed.
  Result<std::string> Conflict(const LockOptions& options);
  void RefreshLoop();

  std::shared_ptr<S3Objects> s3_;
  std::string name_;  // locks/<kind>-<random>.json
  S3LockInfo info_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread refresher_;
};

}  // namespace wanbackup::pipeline
