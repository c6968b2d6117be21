// Running one configured job (`wanbackup run JOB`): snapshot → replicate → forget (the job's
// keep_* rules, for its source) → prune (when due) → verify a share of the repository, as one unit
// with one outcome, one log line per step, and a row in the repository's job history. A step that
// fails stops the run (a failed snapshot never leads to forgetting older ones; a failed replicate
// does not). Each step takes the repository lock it needs (writer, then exclusive, then shared),
// waiting up to the job's lock_wait. Runs on the calling thread.
//
// What the steps are, their order, what each decides (which snapshots to forget, whether prune
// is due, which share to verify) and what is recorded is decided here. What reaches outside —
// the repository opened with the job's credentials, a source or replica opened with its target
// settings, lines for people — comes through a JobEnvironment: the CLI's opens iSCSI targets and
// prints on the console; a test's can be a local file and a local repository.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/status.h"
#include "jobs/config.h"
#include "jobs/job_history.h"
#include "pipeline/snapshotter.h"
#include "repository/repository.h"

namespace wanbackup::jobs {

struct StepOutcome {
  std::string step;    // "snapshot", "replicate", "forget", "prune", "verify"
  std::string status;  // "ok", "failed", "skipped", "interrupted"
  std::string summary;
  double seconds = 0;
  std::string json;  // the step's figures, a JSON object
};

struct JobOutcome {
  catalog::JobRun run;  // as recorded in the history (id 0 when it could not be)
  std::vector<StepOutcome> steps;
  Status status;  // every failing step's message; the first one's code, or verify's damage
};

// One replica brought up to date by the replicate step.
struct ReplicaUpdate {
  std::string summary;         // one line for people
  std::string json;            // its figures, one JSON object
  uint64_t bytes_written = 0;  // on the replica
};

// What one job's run needs from outside this module, for that job (its repository, source,
// replicas and their settings). Its lines for people: Reporter. Called on the run's thread.
class JobEnvironment : public Reporter {
 public:
  // Refuses a repository that is not the one the config names (its pinned id, this client's
  // trust anchor, an unencrypted one not allowed) before anything is read or written.
  virtual Status CheckRepositoryBeforeUse() = 0;
  // The job's repository, opened with its credentials and lock_wait.
  virtual Result<std::unique_ptr<pipeline::Repository>> OpenRepository(pipeline::OpenMode mode) = 0;
  // A snapshot of the job's source into `repo` (opened for writing).
  virtual Result<pipeline::SnapshotResult> Snapshot(pipeline::Repository& repo) = 0;
  // Brings replica `to` up to `snapshot`.
  virtual Result<ReplicaUpdate> Replicate(pipeline::Repository& repo,
                                          const catalog::SnapshotInfo& snapshot,
                                          const std::string& to) = 0;
  // After the forget step: warns about replicas whose base snapshot was forgotten.
  virtual void WarnReplicasLosingBase(pipeline::Repository& repo,
                                      const std::vector<int64_t>& forgotten) = 0;
  // PlanJob's checks: the job's tuning keys as the snapshot step reads them, and the write
  // guard's answer for replica `to`.
  virtual Status CheckTuning() = 0;
  virtual Status CheckReplicaTarget(pipeline::Repository& repo, const std::string& to) = 0;
};

JobOutcome RunJob(const Config& config, const JobConfig& job, JobEnvironment& env);

// What RunJob would do, one line per step, after the checks the run makes that need neither the
// source's target nor a replica: the repository opens with the job's credentials, the tuning keys,
// a local source opens, the metrics file's directory exists. Changes nothing.
Result<std::vector<std::string>> PlanJob(const Config& config, const JobConfig& job,
                                         JobEnvironment& env);

// The job history of `repository` without its credentials (the catalog only; job_history.h).
// Runs still marked running whose process is gone on this host come back as "failed" or
// "interrupted".
Result<std::vector<catalog::JobRun>> JobHistory(const RepositoryConfig& repository,
                                                const std::string& job, int limit,
                                                Reporter& reporter);

}  // namespace wanbackup::jobs
