#include "cli/repo_flags.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "cli/console.h"
#include "common/safe_path.h"
#include "common/units.h"
#include "guard/identity.h"
#include "guard/write_guard.h"
#include "repository/repository_trust.h"
#include "repository/trust_anchor.h"
#include "store/s3_pack_store.h"

namespace wanbackup::cli {
namespace {

std::string EnvOr(const std::string& value, const char* env) {
  if (!value.empty()) return value;
  const char* v = std::getenv(env);
  return v != nullptr ? v : "";
}

// Reads one line from the terminal with echo off.
Result<Secret> PromptSecret(const std::string& prompt) {
  const int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return Status::InvalidArgument(
        "no passphrase given and no terminal to ask for one: use --password-file FILE or "
        "$WANBACKUP_PASSWORD");
  }
  termios old{};
  const bool tty = ::tcgetattr(fd, &old) == 0;
  if (tty) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(fd, TCSAFLUSH, &quiet);
  }
  (void)!::write(fd, prompt.data(), prompt.size());
  Result<Secret> line = ReadSecretLine(fd);  // into locked memory, byte by byte
  if (tty) ::tcsetattr(fd, TCSAFLUSH, &old);
  (void)!::write(fd, "\n", 1);
  ::close(fd);
  if (!line.ok()) return line.status();
  Secret s = std::move(line).value();
  if (s.empty()) return Status::InvalidArgument("empty passphrase");
  return s;
}

// An unencrypted repository is used on purpose only, and never with secrets: a passphrase or
// key file given for it means it is not the repository they were meant for (swapped in).
Status CheckUnencryptedUse(const RepoFlags& flags, const RepoFlags& resolved,
                           const std::string& path) {
  if (!flags.insecure_no_encryption) {
    return Status::Corruption("repository " + path +
                              " is not encrypted: anyone who can write its storage can change "
                              "what it restores; " +
                              flags.insecure_setting + " to use it anyway");
  }
  const char* env_pass = std::getenv("WANBACKUP_PASSWORD");
  const bool passphrase =
      !resolved.password_file.empty() || (env_pass != nullptr && *env_pass != '\0');
  if (passphrase || !resolved.key_file.empty()) {
    return Status::Corruption(
        "repository " + path + " is not encrypted and takes no passphrase or key file, yet " +
        (passphrase ? "a passphrase" : "a key file") +
        " was given (flag or environment): if it was encrypted, it has been replaced");
  }
  return Status::Ok();
}

// What config.json alone decides, before anything is unlocked, read or written: the id a job
// config pins, the trust anchor's id, location and encryption, and the rules for an unencrypted
// repository.
Status CheckConfigBeforeUse(const RepoFlags& flags, const std::string& path,
                            const pipeline::RepositoryConfig& config,
                            const pipeline::TrustAnchorStore& anchors,
                            const std::string& location) {
  if (!flags.expected_repository_id.empty() && config.id != flags.expected_repository_id) {
    return Status::Corruption("repository " + path + " has id " + config.id +
                              ", but the config file pins repository_id " +
                              flags.expected_repository_id + ": it is another repository");
  }
  if (!flags.skip_trust_checks) {
    WB_RETURN_IF_ERROR(pipeline::CheckRepositoryIdentity(anchors, config, location));
  }
  if (config.mode == pipeline::EncryptionMode::kNone) {
    WB_RETURN_IF_ERROR(CheckUnencryptedUse(flags, WithEnvironment(flags), path));
  }
  return Status::Ok();
}

}  // namespace

RepoFlags WithEnvironment(RepoFlags flags) {
  if (flags.key_file.empty() && flags.password_file.empty()) {
    flags.key_file = EnvOr("", "WANBACKUP_KEY_FILE");
    flags.password_file = EnvOr("", "WANBACKUP_PASSWORD_FILE");
  }
  return flags;
}

void AddRepoFlags(CLI::App* command, RepoFlags* flags) {
  const char* group = "Repository";
  command
      ->add_option("-r,--repo", flags->repo,
                   "repository directory, or s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX] with its "
                   "keys in $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (or $WANBACKUP_REPO)")
      ->group(group);
  command
      ->add_option("--cache-dir", flags->cache_dir,
                   "S3 repositories: the directory of the catalog cache (or $WANBACKUP_CACHE_DIR; "
                   "default ~/.cache/wanbackup/ID, /var/cache/wanbackup/ID for root)")
      ->group(group);
  command
      ->add_option("--s3-credentials-file", flags->s3_credentials_file,
                   "S3 repositories: an AWS shared-credentials file (mode 0600) whose [default] "
                   "profile holds the keys (or $WANBACKUP_S3_CREDENTIALS_FILE; else "
                   "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY)")
      ->group(group);
  command
      ->add_option("--password-file", flags->password_file,
                   "file whose first line is the passphrase (or $WANBACKUP_PASSWORD_FILE; "
                   "$WANBACKUP_PASSWORD holds the passphrase itself; else it is asked for)")
      ->group(group);
  command
      ->add_option("--key-file", flags->key_file,
                   "key file, for repositories made with 'init --key-file' (or "
                   "$WANBACKUP_KEY_FILE)")
      ->group(group);
  command
      ->add_option("--lock-wait", flags->lock_wait,
                   "when another command holds the repository, wait this long for it (e.g. 30s, "
                   "10m) before giving up with exit status 7")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& value) {
            // Checked while parsing, so also where no lock is taken (init): never ignored.
            const Result<std::chrono::nanoseconds> wait = ParseDuration(value, "s");
            return wait.ok() ? std::string() : wait.status().message();
          },
          "DURATION"))
      ->group(group);
  command
      ->add_flag("--insecure-no-encryption", flags->insecure_no_encryption,
                 "use a repository that is not encrypted (init: make one); without it one is "
                 "refused with exit status 3")
      ->group(group);
  flags->command = command->get_name();
  if (command->get_parent() != nullptr && command->get_parent()->get_parent() != nullptr) {
    flags->command = command->get_parent()->get_name() + " " + flags->command;
  }
}

Result<std::string> RepoPath(const RepoFlags& flags) {
  std::string path = EnvOr(flags.repo, "WANBACKUP_REPO");
  if (path.empty()) {
    return Status::InvalidArgument("no repository given: use --repo DIR or $WANBACKUP_REPO");
  }
  if (!flags.s3_credentials_file.empty()) {
    if (!pipeline::IsS3Url(path)) {
      return Status::InvalidArgument("--s3-credentials-file is for an s3: repository, and " + path +
                                     " is a directory");
    }
    ::setenv(pipeline::kS3CredentialsFileEnv, flags.s3_credentials_file.c_str(), 1);
  }
  return path;
}

Result<Secret> ReadPassphrase(const std::string& file, const char* env_var,
                              const std::string& prompt, bool confirm) {
  if (!file.empty()) {
    Result<Secret> s = ReadSecretFile(file);
    if (!s.ok()) return s.status().WithContext("password file");
    return s;
  }
  Secret env = SecretFromEnv(env_var);
  if (!env.empty()) return env;
  WB_ASSIGN_OR_RETURN(Secret first, PromptSecret(prompt));
  if (confirm) {
    WB_ASSIGN_OR_RETURN(Secret again, PromptSecret("Repeat it: "));
    if (again.reveal() != first.reveal()) return Status::InvalidArgument("the passphrases differ");
  }
  return first;
}

bool InRepository(const std::string& file, const std::string& repo) {
  guard::Destination as_target;
  as_target.name = file;
  as_target.identity = guard::Identify(file);
  std::vector<guard::Protected> protect;
  guard::AddRepository(repo, as_target.identity, &protect);
  guard::AddRepositoriesHolding(as_target.identity, &protect);
  return !guard::CheckWriteTarget(as_target, protect).ok();
}

Status CheckNewKeyFile(const std::string& flag, const std::string& file, const std::string& repo) {
  const std::filesystem::path where = std::filesystem::absolute(file).lexically_normal();
  const std::filesystem::path dir = std::filesystem::absolute(repo).lexically_normal();
  const bool below = where.string().starts_with(dir.string() + "/");  // repo not made yet
  if (below || InRepository(file, repo)) {
    return Status::InvalidArgument(flag + " " + file +
                                   " lies in a repository: a key kept beside the data it unlocks "
                                   "protects nothing; keep it elsewhere. Nothing was changed");
  }
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) return Status::Ok();  // read later, and checked then
  // A key file about to be created: in a directory nobody else can change (file_trust.h's rule),
  // checked before it is made, not after.
  Result<ResolvedPath> resolved = ResolveForWriting(file, PathPolicy::kTrusted);
  if (resolved.ok() || resolved.status().code() == StatusCode::kNotFound) return Status::Ok();
  return Status::PermissionDenied(flag + ": " + resolved.status().message());
}

Result<Secret> ReadNewPassphrase(const std::string& file, const char* env_var,
                                 const std::string& prompt) {
  WB_ASSIGN_OR_RETURN(Secret passphrase, ReadPassphrase(file, env_var, prompt, true));
  if (passphrase.reveal().size() < kMinPassphraseBytes) {
    return Status::InvalidArgument(
        "the new passphrase has " + std::to_string(passphrase.reveal().size()) +
        " characters; give at least " + std::to_string(kMinPassphraseBytes) +
        " (whoever copies the repository can try short ones offline, without limit)");
  }
  return passphrase;
}

Status CheckRepositoryBeforeUse(const RepoFlags& flags) {
  WB_ASSIGN_OR_RETURN(std::string path, RepoPath(flags));
  WB_ASSIGN_OR_RETURN(pipeline::RepositoryConfig config, pipeline::Repository::ReadConfig(path));
  const pipeline::TrustAnchorStore anchors(pipeline::DefaultSecurityDir());
  return CheckConfigBeforeUse(flags, path, config, anchors, pipeline::CanonicalLocation(path));
}

namespace {

// Why a new repository may not be made at `path`: inside another repository (whose prune and
// repair would take its files for their own) or inside the trust anchor directory; "" if neither.
std::string InsideSomethingElse(const std::string& path) {
  guard::Destination at;
  at.name = path;
  at.identity = guard::Identify(path);
  std::vector<guard::Protected> holding;
  guard::AddRepositoriesHolding(at.identity, &holding);
  if (!guard::CheckWriteTarget(at, holding).ok() && !holding.empty()) return holding[0].what;
  namespace fs = std::filesystem;
  const std::string security =
      fs::weakly_canonical(fs::absolute(pipeline::DefaultSecurityDir())).string();
  const std::string spelled = at.identity.spelling;
  if (spelled == security || spelled.starts_with(security + "/")) {
    return "the trust anchor directory " + security;
  }
  return "";
}

}  // namespace

Status CheckNewRepositoryPlace(const std::string& path) {
  if (const std::string other = InsideSomethingElse(path); !other.empty()) {
    return Status::InvalidArgument(path + " lies in " + other +
                                   ": a repository there would be taken for its files; give a "
                                   "directory outside it. Nothing was changed");
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  Result<ResolvedPath> where =
      ResolveForWriting(exists ? path + "/config.json" : path, PathPolicy::kTrusted);
  if (where.ok() || where.status().code() == StatusCode::kNotFound) return Status::Ok();
  return Status::PermissionDenied(where.status().message());
}

Result<std::unique_ptr<pipeline::Repository>> OpenRepository(const RepoFlags& flags,
                                                             pipeline::OpenMode mode,
                                                             pipeline::Credentials* used) {
  WB_ASSIGN_OR_RETURN(std::string path, RepoPath(flags));
  pipeline::LockOptions lock;
  lock.command = flags.command.empty() ? "wanbackup" : flags.command;
  Result<std::chrono::nanoseconds> wait = ParseDuration(flags.lock_wait, "s");
  if (!wait.ok()) return wait.status().WithContext("--lock-wait");
  lock.wait = std::chrono::duration_cast<std::chrono::milliseconds>(*wait);
  lock.wait_setting = flags.lock_wait_setting;
  lock.on_note = [](const std::string& line) { PrintWarning(line); };
  lock.on_info = [](const std::string& line) { PrintInfo(line); };
  WB_ASSIGN_OR_RETURN(pipeline::RepositoryConfig config, pipeline::Repository::ReadConfig(path));
  const pipeline::TrustAnchorStore anchors(pipeline::DefaultSecurityDir());
  const std::string location = pipeline::CanonicalLocation(path);
  WB_RETURN_IF_ERROR(CheckConfigBeforeUse(flags, path, config, anchors, location));
  pipeline::Credentials credentials;
  const RepoFlags resolved = WithEnvironment(flags);
  credentials.key_file = resolved.key_file;
  if (config.mode == pipeline::EncryptionMode::kPassphrase) {
    Result<Secret> passphrase = ReadPassphrase(resolved.password_file, "WANBACKUP_PASSWORD",
                                               "Passphrase for " + path + ": ", false);
    if (!passphrase.ok() && !resolved.key_file.empty() && resolved.password_file.empty()) {
      // The key file given is not what this repository takes: say that, not only what is missing.
      return passphrase.status().WithContext(path +
                                             " is unlocked by a passphrase, not a key file "
                                             "(--key-file or $WANBACKUP_KEY_FILE is not used)");
    }
    if (!passphrase.ok()) return passphrase.status();
    credentials.passphrase = std::move(*passphrase);
  }
  auto repo = pipeline::Repository::Open(path, credentials, mode, lock,
                                         EnvOr(flags.cache_dir, "WANBACKUP_CACHE_DIR"));
  if (repo.ok() && !flags.skip_trust_checks) {
    WB_RETURN_IF_ERROR(pipeline::CheckOpenedRepository(anchors, **repo, location,
                                                       mode != pipeline::OpenMode::kRepair));
  }
  if (repo.ok() && used != nullptr) *used = std::move(credentials);
  if (repo.ok() && config.mode == pipeline::EncryptionMode::kNone) {
    PrintWarning("repository " + path +
                 (mode != pipeline::OpenMode::kRead
                      ? " is NOT encrypted: anyone who can read its files can read the data"
                      : " is NOT encrypted: anyone who can write its files can change what it "
                        "restores"));
  }
  return repo;
}

Result<catalog::SnapshotInfo> ResolveSnapshot(pipeline::Repository& repo, const std::string& name) {
  if (name == "latest") {
    WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(false));
    if (all.empty()) return Status::NotFound("the repository holds no snapshot yet");
    return all.back();
  }
  char* end = nullptr;
  const long long id = std::strtoll(name.c_str(), &end, 10);
  if (name.empty() || *end != '\0' || id <= 0) {
    return Status::InvalidArgument("'" + name + "' is not a snapshot number or 'latest'");
  }
  Result<catalog::SnapshotInfo> snap = repo.catalog().GetSnapshot(id);
  // Only an absent row is "no snapshot"; a damaged catalog says so (exit 3, as `snapshots`).
  if (snap.status().code() == StatusCode::kNotFound) {
    return Status::NotFound("no snapshot " + name + " (see 'wanbackup snapshots')");
  }
  if (!snap.ok()) return snap.status();
  if (snap->status != catalog::SnapshotStatus::kComplete) {
    return Status::NotFound("snapshot " + name + " did not complete; it cannot be restored");
  }
  return snap;
}

}  // namespace wanbackup::cli
