// Repository locks: which commands may run together, so that no reader sees and no writer leaves
// a half state (docs/durability.md, "Concurrency").
//
//   kShared     readers (restore, verify, snapshots): any number at once, and alongside one
//               appending writer; kept out only while an exclusive writer runs
//   kWriter     appending writers (snapshot, key change): one at a time; packs only grow, so
//               readers may run alongside
//   kExclusive  writers that remove things (forget, prune, repair, migrate): alone
//
// Two lock files, both flock()ed, so a lock dies with its process (a SIGKILLed holder blocks
// nobody): REPO/lock (every writer, exclusive; holds the holder's line: pid, host, command,
// since) and REPO/lock.shared (readers shared, exclusive writers exclusive). Each reader also
// keeps its own line in REPO/readers/ (flocked while it runs; a file nobody holds is stale and
// removed), so a writer kept waiting can name who holds it. A lock is tried every 100 ms up to
// `wait`, then refused with Busy naming the holder. An exclusive writer that readers keep
// waiting lets the writer lock go between its tries, so appending writers are not held up. On a
// read-only file system readers take no lock (nobody can write there). Not thread-safe; one per
// open repository.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"

namespace wanbackup::pipeline {

enum class LockKind { kShared, kWriter, kExclusive };

struct LockOptions {
  std::string command = "wanbackup";         // named in the holder line ("prune", "restore" ...)
  std::chrono::milliseconds wait{0};         // how long to keep trying before giving up
  std::string wait_setting = "--lock-wait";  // where the user sets `wait` (named on giving up)
  // Told one line per stale lock that was ignored and removed (S3 lock objects, s3_lock.h).
  std::function<void(const std::string&)> on_note;
  // Told one line of information about what opening did (an S3 repository's catalog cache
  // refreshed: how, and what it read; cache_refresh.h).
  std::function<void(const std::string&)> on_info;
};

class RepoLock {
 public:
  static Result<std::unique_ptr<RepoLock>> Acquire(const std::string& repo_path, LockKind kind,
                                                   const LockOptions& options);
  ~RepoLock();  // releases
  RepoLock(const RepoLock&) = delete;
  RepoLock& operator=(const RepoLock&) = delete;

  LockKind kind() const { return kind_; }

 private:
  RepoLock() = default;
  LockKind kind_ = LockKind::kShared;
  int writer_fd_ = -1;       // REPO/lock
  int shared_fd_ = -1;       // REPO/lock.shared
  int readers_dir_fd_ = -1;  // REPO/readers, opened O_NOFOLLOW
  int reader_fd_ = -1;       // REPO/readers/<pid>-<n>.reader
  std::string reader_name_;
};

// Whether some process holds REPO/lock now (a writer is running). false when the lock file
// cannot be opened. A snapshot the catalog calls running while no writer is alive was killed.
// The probe holds a shared lock on REPO/lock for an instant, and a writer starting in that
// instant with no --lock-wait is refused: call it only when a running row needs the answer.
bool WriterRunning(const std::string& repo_path);

// The readers holding REPO now, as their holder lines ("wanbackup pid 7 on host1 running 'mount'
// since …"; at most three, then "and N more"); "" when none. Stale reader lines are removed.
std::string ReadersHolding(const std::string& repo_path);

// "wanbackup pid 123 on host1 running 'prune' since 2026-05-01T10:00:00Z" for this process.
std::string HolderLine(const std::string& command);

}  // namespace wanbackup::pipeline
