// Running one configured job (`wanbackup run JOB`): snapshot → forget (the job's keep_* rules,
// for its source) → prune (when due) → verify a share of the repository, as one unit with one
// outcome, one log line per step, and a row in the repository's job history. A step that fails
// stops the run (a failed snapshot never leads to forgetting older ones). Each step takes the
// repository lock it needs (writer, then exclusive, then shared), waiting up to the job's
// lock_wait. Runs on the calling thread.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/status.h"
#include "jobs/config.h"

namespace wanbackup::cli {

struct StepOutcome {
  std::string step;    // "snapshot", "forget", "prune", "verify"
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

JobOutcome RunJob(const jobs::Config& config, const jobs::JobConfig& job);

// What RunJob would do, one line per step, after the checks the run makes that need neither the
// source's target nor a replica: the repository opens with the job's credentials, the tuning keys,
// a local source opens, the metrics file's directory exists. Changes nothing.
Result<std::vector<std::string>> PlanJob(const jobs::Config& config, const jobs::JobConfig& job);

// The job history of `repository` without its credentials (the catalog only; job_history.h).
// Runs still marked running whose process is gone on this host come back as "failed" or
// "interrupted".
Result<std::vector<catalog::JobRun>> JobHistory(const jobs::RepositoryConfig& repository,
                                                const std::string& job, int limit);

}  // namespace wanbackup::cli
