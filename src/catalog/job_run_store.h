// The job history of `wanbackup run` as rows (JobRun), and where they are kept: a local
// repository's catalog (its job_runs table; Catalog is a JobRunStore), or, for a repository on
// S3, whose catalog is a per-host cache that a rebuild replaces, a SQLite file of its own in the
// cache directory holding that table alone (OpenFile; docs/format.md, "A repository on S3").
// Not thread-safe: one thread opens a store and makes every call.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup::catalog {

// One run of a configured job (`wanbackup run`): the job history `wanbackup jobs` shows. Not part
// of what the packs hold: rebuilding a local repository's catalog starts its history afresh.
struct JobRun {
  int64_t id = 0;
  std::string job;
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;  // 0 while running (or when the run was killed)
  std::string status;            // "running", "ok", "failed", "interrupted"
  int64_t pid = 0;               // of the process running it
  int64_t pid_started = 0;       // its start time, /proc/PID/stat field 22 (0: unknown)
  std::string host;
  int64_t snapshot_id = 0;  // the snapshot it took (0: none)
  uint64_t bytes = 0;       // read from the source
  std::string steps;        // JSON: [{"step": "snapshot", "status": "ok", ...}, ...]
  std::string error;        // the failing step's message
};

class JobRunStore {
 public:
  // Finished runs kept per job: AddJobRun forgets the older ones (a job every five minutes would
  // otherwise add 100,000 rows a year).
  static constexpr int kJobRunsKept = 1000;

  // The history file at `path`: created (with its table) when `create` and missing, else
  // NotFound. A file that holds no job history, or a newer one than this wanbackup knows, is
  // Corruption / Unsupported. A statement that finds it locked retries for `busy_timeout`, then
  // fails with Busy.
  static Result<std::unique_ptr<JobRunStore>> OpenFile(const std::string& path, bool create,
                                                       std::chrono::milliseconds busy_timeout);
  virtual ~JobRunStore() = default;

  // Adds `run` and returns its id; then forgets that job's finished runs beyond the newest
  // kJobRunsKept.
  virtual Result<int64_t> AddJobRun(const JobRun& run) = 0;
  // Rewrites the row `run.id`; NotFound when there is none.
  virtual Status UpdateJobRun(const JobRun& run) = 0;
  // The newest `limit` runs of `job` (every job when empty), newest first.
  virtual Result<std::vector<JobRun>> JobRuns(const std::string& job, int limit) = 0;
};

}  // namespace wanbackup::catalog
