// Flags every repository command shares, and turning them into an open Repository.
//
// Repository: --repo or $WANBACKUP_REPO, a directory or an S3 URL (s3:http[s]://HOST[:PORT]/
// BUCKET[/PREFIX], its keys from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, its catalog
// cached in --cache-dir or $WANBACKUP_CACHE_DIR). --lock-wait DURATION: how long to wait for a lock
// another command holds (repo_lock.h) before giving up with exit 7 naming it; default 0. Secrets,
// first found wins: --key-file
// ($WANBACKUP_KEY_FILE) for key-file repositories; for passphrase repositories --password-file
// ($WANBACKUP_PASSWORD_FILE), then $WANBACKUP_PASSWORD, then a prompt on the terminal (echo off).
// Without a terminal and none of these, a clear error instead of waiting for input.
// An unencrypted repository needs --insecure-no-encryption and no secrets at all; every command
// that opens one warns on stderr.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "repository/repository.h"

namespace CLI {
class App;
}

namespace wanbackup::cli {

struct RepoFlags {
  std::string repo;
  std::string password_file;
  std::string key_file;
  // --cache-dir: where an S3 repository's catalog cache is (empty: pipeline::DefaultCacheDir).
  std::string cache_dir;
  // --s3-credentials-file: an S3 repository's keys, in an AWS shared-credentials file.
  std::string s3_credentials_file;
  std::string lock_wait = "0";  // --lock-wait: how long to wait for another command's lock
  std::string lock_wait_setting = "--lock-wait";  // where lock_wait came from (for messages)
  std::string command;                            // the verb, named in the lock's holder line
  // `wanbackup trust`: open without checking the repository against the trust anchor.
  bool skip_trust_checks = false;
  // --insecure-no-encryption: an unencrypted repository is opened only with it (and with no
  // credentials at all: given some, it is not the repository they were meant for).
  bool insecure_no_encryption = false;
  // How to give insecure_no_encryption, for the refusal's message.
  std::string insecure_setting = "pass --insecure-no-encryption";
  // A job config's repository_id: a repository with another id is refused (empty: any).
  std::string expected_repository_id;
};

void AddRepoFlags(CLI::App* command, RepoFlags* flags);

// `flags` with what the environment supplies where no flag was given. A flag beats any variable,
// and a key file beats a passphrase file only when both come from the same place.
RepoFlags WithEnvironment(RepoFlags flags);
// The repository --repo or $WANBACKUP_REPO names. For an S3 repository it also puts
// --s3-credentials-file where the S3 store looks ($WANBACKUP_S3_CREDENTIALS_FILE, a path): every
// command finds its repository here first.
Result<std::string> RepoPath(const RepoFlags& flags);

// Reads a passphrase: `file`, else $`env_var`, else the terminal (asking twice when `confirm`).
Result<Secret> ReadPassphrase(const std::string& file, const char* env_var,
                              const std::string& prompt, bool confirm);
// Whether `file` is, or would lie in, a repository: `repo` or any other one, known by its files
// (the write guard's repository rule, guard/identity.h), whatever the file is called.
bool InRepository(const std::string& file, const std::string& repo);
// A key file `flag` names for a repository (init --key-file, key change --new-key-file):
// InvalidArgument when it is, or would lie, in a repository (`repo`, which may not exist yet,
// or another: a key beside the data it unlocks protects nothing); PermissionDenied when it does
// not exist yet and a directory on its way is one another user can change.
Status CheckNewKeyFile(const std::string& flag, const std::string& file, const std::string& repo);

// Where `init` may make a repository: every directory on the way to it (and it, when it exists)
// is root's or the user's and writable by nobody else, and no link another user planted is on
// the way (common/safe_path.h, kTrusted). PermissionDenied naming the directory otherwise: that
// user could later plant links in the repository that make root act outside it.
Status CheckNewRepositoryPlace(const std::string& path);

// The shortest passphrase a new repository or `key change` accepts, in bytes.
inline constexpr size_t kMinPassphraseBytes = 8;
// A passphrase that will lock a repository (init, key change): as ReadPassphrase, asking twice,
// and InvalidArgument when shorter than kMinPassphraseBytes.
Result<Secret> ReadNewPassphrase(const std::string& file, const char* env_var,
                                 const std::string& prompt);

// What OpenRepository checks from config.json alone, before it unlocks anything: the pinned
// id (expected_repository_id), the trust anchor's id and encryption for this location, and the
// rules for an unencrypted repository. Corruption (exit 3) when one fails. `wanbackup run`
// calls it before it reads or writes the repository's job history.
Status CheckRepositoryBeforeUse(const RepoFlags& flags);

// Opens the repository with the secrets `flags` and the environment name. With `used`, hands
// back the credentials that unlocked it (key change re-wraps for the same passphrase). Every
// repository passes the trust checks here (repository/repository_trust.h): its id, encryption and
// key against this client's trust anchor, and its catalog against its sealed head.
Result<std::unique_ptr<pipeline::Repository>> OpenRepository(const RepoFlags& flags,
                                                             pipeline::OpenMode mode,
                                                             pipeline::Credentials* used = nullptr);

// "latest" or a snapshot number, resolved against the catalog (complete snapshots only).
Result<catalog::SnapshotInfo> ResolveSnapshot(pipeline::Repository& repo, const std::string& name);

}  // namespace wanbackup::cli
