// The configuration file (TOML) that names repositories and jobs for `wanbackup run`, `jobs`
// and `schedule`. Every key is documented in conf/wanbackup.toml.example; docs/operations.md
// walks through a first job.
//
// LoadConfig reads and checks the whole file before anything runs: unknown keys, wrong types,
// bad values, a job naming an unknown repository, a missing credential file, a credential file
// that others can read (as ssh refuses such a key) and a config file that others can write or
// read are all InvalidArgument with "FILE:LINE: key: why". What concerns one job only and
// need not stop the others (a one-off schedule that has passed) is in that job's `warnings`.
// Secrets themselves never appear in the file, only the paths of files that hold them. Pure data
// after loading; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "guard/write_guard.h"
#include "jobs/calendar.h"
#include "repository/retention.h"

namespace wanbackup::jobs {

inline constexpr const char kDefaultConfigPath[] = "/etc/wanbackup/wanbackup.toml";
inline constexpr const char kConfigEnv[] = "WANBACKUP_CONFIG";

struct RepositoryConfig {
  std::string name;
  std::string path;           // an absolute directory, or s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX]
  std::string password_file;  // one of these two
  std::string key_file;
  // The repository's id (config.json's repository_id, 32 hexadecimal digits): a repository
  // with another id at `path` is refused before anything is read or written. Empty: any.
  std::string repository_id;
  // An unencrypted repository is used on purpose (--insecure-no-encryption); without it, one is
  // refused. Takes no password_file or key_file.
  bool insecure_no_encryption = false;
  // An S3 repository only: the AWS shared-credentials file with its keys (a secret file, as
  // --s3-credentials-file; empty: the environment's), and the directory of its catalog cache
  // and job history (as --cache-dir; empty: $WANBACKUP_CACHE_DIR, else the default).
  std::string s3_credentials_file;
  std::string cache_dir;
  std::string upload_memory;  // as snapshot --upload-memory (S3 only; empty: the default)
};

struct JobConfig {
  std::string name;
  std::string repository;  // a [repositories.NAME]
  std::string source;      // iscsi://… or a file / block device
  std::string tag;
  std::string schedule;  // systemd OnCalendar; empty: run by hand only
  std::string randomized_delay = "10m";
  std::string lock_wait = "1h";  // for each step's repository lock
  // The source's iSCSI login (as the flags of `snapshot`).
  std::string chap_user;
  std::string chap_secret_file;
  std::string target_chap_user;
  std::string target_chap_secret_file;
  std::string initiator_name;
  std::string header_digest = "auto";
  std::string login_timeout = "15s";
  std::string command_timeout = "30s";
  // Tuning (0 / empty: autotune, as without the flag).
  int connections = 0;
  int queue_depth = 0;
  std::string io_size;
  std::string max_memory = "256MiB";
  std::string retry_timeout = "5m";
  std::string limit_rate;          // empty: unlimited
  std::string congestion_control;  // empty: the host's default
  // After the snapshot: standby copies brought to it (`replicate`), each an iSCSI URL, a block
  // device or a file; empty: no replicate step. Their login, when it differs from the source's.
  std::vector<std::string> replicate_to;
  std::string replica_chap_user;
  std::string replica_chap_secret_file;
  // Then retention.
  pipeline::RetentionPolicy retention;  // empty: no forget step
  std::string prune_interval = "7d";    // prune when the last one is older; "never"
  std::string max_unused = "5%";
  double verify_share = 0;  // share of the repository's chunks verified per run: 0, or
                            // kMinVerifyShare..1
  // What is wrong with this job but does not stop the others ("FILE:LINE: key: why"): a
  // schedule that can no longer elapse. `run` and `jobs` print them for the job concerned.
  std::vector<std::string> warnings;
};

// The smallest verify_share that is not 0: one part in 10,000 of the chunks per run.
inline constexpr double kMinVerifyShare = 1e-4;

struct Config {
  std::string path;
  std::map<std::string, RepositoryConfig> repositories;
  std::map<std::string, JobConfig> jobs;
  std::string metrics_textfile;  // node_exporter textfile collector file; empty: none
};

// --config, else $WANBACKUP_CONFIG, else kDefaultConfigPath.
std::string ConfigPath(const std::string& flag);

Result<Config> LoadConfig(const std::string& path);

// The trust anchor directory (repository/trust_anchor.h) and everything in it: no command
// writes there, whatever the config says.
void AddTrustAnchorDirectory(std::vector<guard::Protected>* protect);

// What the file forbids any command to write (guard/write_guard.h): every repository it names
// (its files too, by inode, when `to` is a file with other hard links), a repository `to` lies
// in that it does not name, every job's source, and the trust anchor directory.
void AddProtected(const Config& config, const guard::Identity& to,
                  std::vector<guard::Protected>* protect);

// The job, or NotFound naming the jobs the file has.
Result<const JobConfig*> FindJob(const Config& config, const std::string& name);

}  // namespace wanbackup::jobs
