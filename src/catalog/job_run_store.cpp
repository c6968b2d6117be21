#include "catalog/job_run_store.h"

#include <sys/stat.h>

#include "catalog/internal/job_runs.h"
#include "catalog/internal/sqlite.h"

namespace wanbackup::catalog {
namespace {

// The history file's schema version (PRAGMA user_version). Its job_runs table has the columns
// of the catalog's (schema.cpp, versions 3 and 5), so both are read and written by the same
// statements (internal/job_runs.h).
constexpr int kFileVersion = 1;
constexpr const char kFileSchema[] = R"sql(
CREATE TABLE job_runs (
  id          INTEGER PRIMARY KEY,
  job         TEXT NOT NULL,
  started     INTEGER NOT NULL,
  finished    INTEGER NOT NULL DEFAULT 0,
  status      TEXT NOT NULL,
  pid         INTEGER NOT NULL,
  host        TEXT NOT NULL,
  snapshot_id INTEGER NOT NULL DEFAULT 0,
  bytes       INTEGER NOT NULL DEFAULT 0,
  steps       TEXT NOT NULL DEFAULT '[]',
  error       TEXT NOT NULL DEFAULT '',
  pid_started INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX job_runs_by_job ON job_runs (job, id);
PRAGMA user_version = 1;
)sql";

class JobRunFile final : public JobRunStore {
 public:
  explicit JobRunFile(internal::Db db) : db_(std::move(db)) {}

  Status Init(const std::string& path, bool create, std::chrono::milliseconds busy_timeout) {
    const std::string busy = "PRAGMA busy_timeout = " + std::to_string(busy_timeout.count());
    WB_RETURN_IF_ERROR(db_.Exec(busy.c_str()));
    // As the catalog: readers never block the writer, and a row is durable when written.
    WB_RETURN_IF_ERROR(db_.Exec("PRAGMA journal_mode = WAL"));
    WB_RETURN_IF_ERROR(db_.Exec("PRAGMA synchronous = FULL"));
    WB_ASSIGN_OR_RETURN(int version, Version());
    if (version == 0 && create) {
      WB_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
      // Another process may have made it meanwhile: only the first one creates the table.
      Result<int> again = Version();
      Status made = !again.ok()   ? again.status()
                    : *again == 0 ? db_.Exec(kFileSchema)
                                  : Status::Ok();
      if (!made.ok()) {
        (void)db_.Exec("ROLLBACK");
        return made.WithContext(path);
      }
      WB_RETURN_IF_ERROR(db_.Exec("COMMIT"));
      WB_ASSIGN_OR_RETURN(version, Version());
    }
    if (version == 0) return Status::Corruption(path + " holds no job history");
    if (version > kFileVersion) {
      return Status::Unsupported(path + ": job history version " + std::to_string(version) +
                                 " is newer than this wanbackup understands; upgrade wanbackup");
    }
    return Status::Ok();
  }

  Result<int64_t> AddJobRun(const JobRun& run) override {
    return internal::AddJobRun(db_, run, kJobRunsKept);
  }
  Status UpdateJobRun(const JobRun& run) override { return internal::UpdateJobRun(db_, run); }
  Result<std::vector<JobRun>> JobRuns(const std::string& job, int limit) override {
    return internal::JobRuns(db_, job, limit);
  }

 private:
  Result<int> Version() {
    WB_ASSIGN_OR_RETURN(internal::Stmt s, internal::Stmt::Prepare(db_, "PRAGMA user_version"));
    WB_ASSIGN_OR_RETURN(const bool row, s.Step());
    return row ? static_cast<int>(s.Int(0)) : 0;
  }

  internal::Db db_;
};

}  // namespace

Result<std::unique_ptr<JobRunStore>> JobRunStore::OpenFile(const std::string& path, bool create,
                                                           std::chrono::milliseconds busy_timeout) {
  struct stat st {};
  if (!create && ::lstat(path.c_str(), &st) != 0) {
    return Status::NotFound("no job history at " + path);
  }
  WB_ASSIGN_OR_RETURN(internal::Db db, internal::Db::Open(path, create));
  auto store = std::make_unique<JobRunFile>(std::move(db));
  WB_RETURN_IF_ERROR(store->Init(path, create, busy_timeout));
  return std::unique_ptr<JobRunStore>(std::move(store));
}

}  // namespace wanbackup::catalog
