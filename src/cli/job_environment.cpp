#include "cli/job_environment.h"

#include <cstdlib>

#include "cli/console.h"
#include "cli/replicate_target.h"
#include "cli/tuning_flags.h"
#include "cli/write_target.h"
#include "initiator/iscsi_source.h"
#include "store/s3_pack_store.h"

namespace wanbackup::cli {
namespace {

RepoFlags RepoFlagsFor(const jobs::RepositoryConfig& repo, const jobs::JobConfig& job) {
  RepoFlags flags;
  flags.repo = repo.path;
  flags.password_file = repo.password_file;
  flags.key_file = repo.key_file;
  flags.expected_repository_id = repo.repository_id;
  flags.s3_credentials_file = repo.s3_credentials_file;
  flags.cache_dir = repo.cache_dir;
  flags.insecure_no_encryption = repo.insecure_no_encryption;
  flags.insecure_setting =
      "set insecure_no_encryption = true in [repositories." + repo.name + "] of the config file";
  flags.lock_wait = job.lock_wait;
  flags.lock_wait_setting = "lock_wait in the config file";
  flags.command = "run " + job.name;
  return flags;
}

SnapshotRequest SnapshotRequestFor(const jobs::JobConfig& job, const jobs::RepositoryConfig& repo) {
  SnapshotRequest r;
  r.upload_memory = repo.upload_memory;
  r.source = job.source;
  r.tag = job.tag;
  r.job = job.name;
  r.target.chap_user = job.chap_user;
  r.target.chap_secret_file = job.chap_secret_file;
  r.target.target_chap_user = job.target_chap_user;
  r.target.target_chap_secret_file = job.target_chap_secret_file;
  r.target.initiator_name = job.initiator_name;
  r.target.header_digest = job.header_digest;
  r.target.login_timeout = job.login_timeout;
  r.target.command_timeout = job.command_timeout;
  r.tuning.connections = job.connections;
  r.tuning.queue_depth = job.queue_depth;
  r.tuning.io_size = job.io_size;
  r.tuning.max_memory = job.max_memory;
  r.tuning.retry_timeout = job.retry_timeout;
  r.tuning.limit_rate = job.limit_rate;
  r.tuning.congestion_control = job.congestion_control;
  return r;
}

}  // namespace

void UseS3CredentialsOf(const jobs::RepositoryConfig& repo) {
  static const char* const given = std::getenv(pipeline::kS3CredentialsFileEnv);
  static const std::string original = given != nullptr ? given : "";
  if (!repo.s3_credentials_file.empty()) {
    ::setenv(pipeline::kS3CredentialsFileEnv, repo.s3_credentials_file.c_str(), 1);
  } else if (given != nullptr) {
    ::setenv(pipeline::kS3CredentialsFileEnv, original.c_str(), 1);
  } else {
    ::unsetenv(pipeline::kS3CredentialsFileEnv);
  }
}

void ConsoleReporter::Info(const std::string& line) {
  PrintInfo(line);
}

void ConsoleReporter::Warning(const std::string& line) {
  PrintWarning(line);
}

CliJobEnvironment::CliJobEnvironment(const jobs::Config& config, const jobs::JobConfig& job)
    : config_(config),
      job_(job),
      repo_(RepoFlagsFor(config.repositories.at(job.repository), job)),
      snapshot_(SnapshotRequestFor(job, config.repositories.at(job.repository))) {}

Status CliJobEnvironment::CheckRepositoryBeforeUse() {
  return cli::CheckRepositoryBeforeUse(repo_);
}

Result<std::unique_ptr<pipeline::Repository>> CliJobEnvironment::OpenRepository(
    pipeline::OpenMode mode) {
  return cli::OpenRepository(repo_, mode);
}

Result<pipeline::SnapshotResult> CliJobEnvironment::Snapshot(pipeline::Repository& repo) {
  return SnapshotSource(repo, snapshot_);
}

// The replica with the job's target settings and replica_chap_* credentials (the source's
// target_chap_* are not the replica's).
Result<jobs::ReplicaUpdate> CliJobEnvironment::Replicate(pipeline::Repository& repo,
                                                         const catalog::SnapshotInfo& snapshot,
                                                         const std::string& to) {
  ReplicateRequest request;
  request.progress = false;
  request.config = &config_;
  request.tuning = snapshot_.tuning;
  request.target = snapshot_.target;
  request.target.chap_user = job_.replica_chap_user;
  request.target.chap_secret_file = job_.replica_chap_secret_file;
  request.target.target_chap_user.clear();
  request.target.target_chap_secret_file.clear();
  request.to = to;
  WB_ASSIGN_OR_RETURN(ReplicateOutcome r, ReplicateSnapshot(repo, snapshot, request));
  return jobs::ReplicaUpdate{r.summary, r.json, r.result.bytes_written};
}

void CliJobEnvironment::WarnReplicasLosingBase(pipeline::Repository& repo,
                                               const std::vector<int64_t>& forgotten) {
  cli::WarnReplicasLosingBase(repo, forgotten, false);
}

Status CliJobEnvironment::CheckTuning() {
  initiator::IscsiSourceOptions options;
  WB_RETURN_IF_ERROR(LimitRate(snapshot_.tuning).status());
  return ApplyTuningFlags(snapshot_.tuning, &options);
}

Status CliJobEnvironment::CheckReplicaTarget(pipeline::Repository& repo, const std::string& to) {
  WriteTarget target;
  target.to = to;
  target.repo = &repo;
  target.config = &config_;
  target.replicate_source = job_.source;
  return RefuseWriteTarget(target);
}

void CliJobEnvironment::Info(const std::string& line) {
  PrintInfo(line);
}

void CliJobEnvironment::Warning(const std::string& line) {
  PrintWarning(line);
}

}  // namespace wanbackup::cli
