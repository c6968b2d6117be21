// The CLI's side of a job's run (jobs::JobEnvironment, jobs/job_runner.h): the job's repository
// opened as `--repo` with its credential files would be, its source and replicas opened as
// `snapshot` and `replicate` open them, and lines for people on the console. It decides nothing
// about the job's steps. Not thread-safe; one per run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/repo_flags.h"
#include "cli/snapshot_source.h"
#include "jobs/config.h"
#include "jobs/job_runner.h"

namespace wanbackup::cli {

// Lines for people on the console (PrintInfo, PrintWarning).
class ConsoleReporter : public jobs::Reporter {
 public:
  void Info(const std::string& line) override;
  void Warning(const std::string& line) override;
};

// Makes `repo`'s s3_credentials_file the one the S3 store reads ($WANBACKUP_S3_CREDENTIALS_FILE),
// or, without one, what the environment named when the command started: for the reads of a
// repository outside a run (`jobs` finding an S3 repository's id for its history).
void UseS3CredentialsOf(const jobs::RepositoryConfig& repo);

class CliJobEnvironment final : public jobs::JobEnvironment {
 public:
  // REQUIRES: `config` outlives this; `job` is one of its jobs.
  CliJobEnvironment(const jobs::Config& config, const jobs::JobConfig& job);

  Status CheckRepositoryBeforeUse() override;
  Result<std::unique_ptr<pipeline::Repository>> OpenRepository(pipeline::OpenMode mode) override;
  Result<pipeline::SnapshotResult> Snapshot(pipeline::Repository& repo) override;
  Result<jobs::ReplicaUpdate> Replicate(pipeline::Repository& repo,
                                        const catalog::SnapshotInfo& snapshot,
                                        const std::string& to) override;
  void WarnReplicasLosingBase(pipeline::Repository& repo,
                              const std::vector<int64_t>& forgotten) override;
  Status CheckTuning() override;
  Status CheckReplicaTarget(pipeline::Repository& repo, const std::string& to) override;
  void Info(const std::string& line) override;
  void Warning(const std::string& line) override;

 private:
  const jobs::Config& config_;
  const jobs::JobConfig& job_;
  const RepoFlags repo_;
  const SnapshotRequest snapshot_;
};

}  // namespace wanbackup::cli
