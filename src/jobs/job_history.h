// The job history of one repository, as `run` writes it and `jobs` reads it (no repository
// lock: each row is a single-statement write that SQLite serialises), best effort — a run
// without it still runs. Where it is (HistoryPlace): a local repository's in its catalog's
// job_runs table; an S3 repository's, whose catalog is a per-host cache that any rebuild
// replaces, in a file of its own in the cache directory (CACHE/job-history.db), so it is this
// host's history of its runs and survives the cache's rebuilds.
//
// Every run is in the history whatever its exit: a row that cannot be written when the run ends
// (the file held by another process's long transaction) goes to a file in
// DIR/job-runs.pending/, created exclusively, which the next History imports.
// A row still marked running is live only while its process is: same host, same pid and the
// same process start time (/proc/PID/stat field 22), so a pid reused by another process does not
// keep a killed run "running". Not thread-safe; one per command.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/job_run_store.h"
#include "common/result.h"
#include "jobs/config.h"

namespace wanbackup::jobs {

// Where a job's lines for people go (the CLI's console: info unless --quiet, warnings on
// stderr). Called on the thread that runs the job or reads the history.
class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void Info(const std::string& line) = 0;
  virtual void Warning(const std::string& line) = 0;
};

// Where a repository's job history is kept.
struct HistoryPlace {
  std::string dir;        // the repository directory, or an S3 repository's cache directory
  std::string file;       // DIR/catalog.db, or DIR/job-history.db
  bool own_file = false;  // the file holds the history alone (an S3 repository's)
};

// The file name of an S3 repository's job history in its cache directory.
inline constexpr const char kHistoryFile[] = "job-history.db";

// Where `repository` keeps its job history. An S3 repository's cache directory is its
// cache_dir, else $WANBACKUP_CACHE_DIR (as --cache-dir), else the default for its id: the
// pinned repository_id, or the id config.json holds (read from the store, with the keys the
// environment names: the only case that needs the store).
Result<HistoryPlace> HistoryPlaceOf(const RepositoryConfig& repository);

class RunHistory {
 public:
  // Statements that find the file busy give up after `busy_timeout`. Warnings (a row that
  // cannot be written) go to `reporter`, which must outlive the history. `create`: an S3
  // repository's history file (and its cache directory) is made when missing; else a missing
  // one leaves the history empty (ok() false).
  RunHistory(const HistoryPlace& place, std::chrono::milliseconds busy_timeout, Reporter& reporter,
             bool create);
  bool ok() const { return store_ != nullptr; }

  // Newest first, at most `limit`, of `job` ("" = every job), pending rows included. Rows still
  // marked running whose process is gone come back "failed" when a step they recorded failed,
  // else "interrupted", and are closed so in the catalog.
  std::vector<catalog::JobRun> Runs(const std::string& job, int limit);

  // Records the run (run->id set when it has a row). A failure is a warning.
  void Write(catalog::JobRun* run);
  // The run's last write: when the catalog cannot take it, a pending file keeps it.
  void Finish(catalog::JobRun* run);

 private:
  void ImportPending();
  std::string PendingDir() const;
  HistoryPlace place_;
  Reporter& reporter_;
  std::unique_ptr<catalog::JobRunStore> store_;
  bool busy_ = false;  // a write found the file busy: wait no more until Finish
};

// This process's start time in clock ticks after boot (/proc/self/stat field 22; 0: unknown).
int64_t OwnStartTime();

}  // namespace wanbackup::jobs
