// The job_runs table (schema 3): the history of `wanbackup run`, behind Catalog's job methods.
// Not thread-safe: called on the catalog's thread with its Db.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/internal/sqlite.h"

namespace wanbackup::catalog::internal {

// Inserts `run`, then deletes the job's runs that are not running and not among its newest `keep`.
Result<int64_t> AddJobRun(const Db& db, const JobRun& run, int keep);
Status UpdateJobRun(const Db& db, const JobRun& run);
Result<std::vector<JobRun>> JobRuns(const Db& db, const std::string& job, int limit);

}  // namespace wanbackup::catalog::internal
