// The job history of one repository, as `run` writes it and `jobs` reads it: the catalog's
// job_runs table opened on its own (no repository lock: each row is a single-statement write
// that SQLite serialises), best effort — a run without it still runs.
//
// Every run is in the history whatever its exit: a row that cannot be written when the run ends
// (the catalog held by another process's long transaction) goes to a file in
// REPO/job-runs.pending/, created exclusively, which the next History imports into the catalog.
// A row still marked running is live only while its process is: same host, same pid and the
// same process start time (/proc/PID/stat field 22), so a pid reused by another process does not
// keep a killed run "running". Not thread-safe; one per command.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace wanbackup::jobs {

// Where a job's lines for people go (the CLI's console: info unless --quiet, warnings on
// stderr). Called on the thread that runs the job or reads the history.
class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void Info(const std::string& line) = 0;
  virtual void Warning(const std::string& line) = 0;
};

class RunHistory {
 public:
  // Statements that find the catalog busy give up after `busy_timeout`. Warnings (a row that
  // cannot be written) go to `reporter`, which must outlive the history.
  RunHistory(const std::string& repo_path, std::chrono::milliseconds busy_timeout,
             Reporter& reporter);
  bool ok() const { return cat_ != nullptr; }

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
  std::string repo_path_;
  Reporter& reporter_;
  std::unique_ptr<catalog::Catalog> cat_;
  bool busy_ = false;  // a write found the catalog busy: wait no more until Finish
};

// This process's start time in clock ticks after boot (/proc/self/stat field 22; 0: unknown).
int64_t OwnStartTime();

}  // namespace wanbackup::jobs
