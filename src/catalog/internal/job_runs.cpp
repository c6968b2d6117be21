#include "catalog/internal/job_runs.h"

namespace wanbackup::catalog::internal {
namespace {

// The columns after id, in the order Bind and the SELECT use them.
void BindRun(Stmt& s, const JobRun& run) {
  s.Bind(1, run.job)
      .Bind(2, run.started_unix_ms)
      .Bind(3, run.finished_unix_ms)
      .Bind(4, run.status)
      .Bind(5, run.pid)
      .Bind(6, run.host)
      .Bind(7, run.snapshot_id)
      .Bind(8, static_cast<int64_t>(run.bytes))
      .Bind(9, run.steps)
      .Bind(10, run.error)
      .Bind(11, run.pid_started);
}

}  // namespace

Result<int64_t> AddJobRun(const Db& db, const JobRun& run, int keep) {
  WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db,
                                            "INSERT INTO job_runs (job, started, finished, "
                                            "status, pid, host, snapshot_id, bytes, steps, error, "
                                            "pid_started) "
                                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  BindRun(s, run);
  WB_RETURN_IF_ERROR(s.Run());
  const int64_t id = sqlite3_last_insert_rowid(db.get());
  WB_ASSIGN_OR_RETURN(Stmt old, Stmt::Prepare(db,
                                              "DELETE FROM job_runs WHERE job = ?1 AND "
                                              "status <> 'running' AND id NOT IN (SELECT id "
                                              "FROM job_runs WHERE job = ?1 ORDER BY id DESC "
                                              "LIMIT ?2)"));
  old.Bind(1, run.job).Bind(2, keep);
  WB_RETURN_IF_ERROR(old.Run());
  return id;
}

Status UpdateJobRun(const Db& db, const JobRun& run) {
  WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db,
                                            "UPDATE job_runs SET job = ?, started = ?, "
                                            "finished = ?, status = ?, pid = ?, host = ?, "
                                            "snapshot_id = ?, bytes = ?, steps = ?, error = ?, "
                                            "pid_started = ? WHERE id = ?"));
  BindRun(s, run);
  s.Bind(12, run.id);
  WB_RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db.get()) != 1) {
    return Status::NotFound("no job run " + std::to_string(run.id));
  }
  return Status::Ok();
}

Result<std::vector<JobRun>> JobRuns(const Db& db, const std::string& job, int limit) {
  WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db,
                                            "SELECT id, job, started, finished, status, pid, "
                                            "host, snapshot_id, bytes, steps, error, pid_started "
                                            "FROM job_runs WHERE ?1 = '' OR job = ?1 "
                                            "ORDER BY id DESC LIMIT ?2"));
  s.Bind(1, job).Bind(2, limit);
  std::vector<JobRun> runs;
  for (;;) {
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return runs;
    JobRun r;
    r.id = s.Int(0);
    r.job = s.Text(1);
    r.started_unix_ms = s.Int(2);
    r.finished_unix_ms = s.Int(3);
    r.status = s.Text(4);
    r.pid = s.Int(5);
    r.host = s.Text(6);
    r.snapshot_id = s.Int(7);
    r.bytes = static_cast<uint64_t>(s.Int(8));
    r.steps = s.Text(9);
    r.error = s.Text(10);
    r.pid_started = s.Int(11);
    runs.push_back(std::move(r));
  }
}

}  // namespace wanbackup::catalog::internal
