// wanbackup key change: new passphrase or key file, or a higher Argon2id cost; the data stays
// as it is.
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"
#include "common/units.h"

namespace wanbackup::cli {
namespace {

struct KeyChangeOptions {
  RepoFlags repo;
  std::string new_password_file;
  std::string new_key_file;
  std::string kdf_memory;  // empty: keep the repository's
  uint64_t kdf_ops = 0;    // 0: keep the repository's
};

std::string CostText(const pipeline::KdfParams& kdf) {
  return "Argon2id " + FormatBytes(kdf.memlimit) + ", " + std::to_string(kdf.opslimit) + " passes";
}

bool CostAsked(const KeyChangeOptions& opts) {
  return !opts.kdf_memory.empty() || opts.kdf_ops != 0;
}

// The cost asked for, from `base` (what the passphrase would get without --kdf-*); refused when
// it would lower it or leave the allowed range.
Result<pipeline::KdfParams> RequestedCost(const KeyChangeOptions& opts,
                                          const pipeline::KdfParams& base) {
  if (!opts.new_key_file.empty()) {
    return Status::InvalidArgument(
        "--kdf-memory and --kdf-ops set a passphrase's cost; a key file has none");
  }
  pipeline::KdfParams cost = base;
  if (!opts.kdf_memory.empty()) {
    Result<uint64_t> memory = ParseSize(opts.kdf_memory);
    if (!memory.ok()) return memory.status().WithContext("--kdf-memory");
    cost.memlimit = *memory;
  }
  if (opts.kdf_ops != 0) cost.opslimit = opts.kdf_ops;
  WB_RETURN_IF_ERROR(pipeline::CheckKdfRaise(base, cost));
  return cost;
}

Status RunKeyChange(const KeyChangeOptions& opts) {
  if (!opts.new_key_file.empty() && !opts.new_password_file.empty()) {
    return Status::InvalidArgument("give --new-password-file or --new-key-file, not both");
  }
  if (!opts.new_password_file.empty()) {
    WB_ASSIGN_OR_RETURN(const std::string path, RepoPath(opts.repo));
    // A new passphrase read from one of a repository's own files (config.json's first line is
    // "{") is a slip that locks the repository with a guessable passphrase.
    if (InRepository(opts.new_password_file, path)) {
      return Status::InvalidArgument("--new-password-file " + opts.new_password_file +
                                     " is a file of a repository, not a passphrase file. Nothing "
                                     "was changed");
    }
  }
  if (!opts.new_key_file.empty()) {
    WB_ASSIGN_OR_RETURN(const std::string path, RepoPath(opts.repo));
    WB_RETURN_IF_ERROR(CheckNewKeyFile("--new-key-file", opts.new_key_file, path));
  }
  // A cost that is refused is refused before the current passphrase is asked for; under a key
  // file (nothing to ask) the base is the catalog's floor, known once the repository is open.
  std::optional<pipeline::KdfParams> cost;
  if (CostAsked(opts)) {
    WB_ASSIGN_OR_RETURN(std::string path, RepoPath(opts.repo));
    WB_ASSIGN_OR_RETURN(pipeline::RepositoryConfig config, pipeline::Repository::ReadConfig(path));
    if (config.mode == pipeline::EncryptionMode::kPassphrase || !opts.new_key_file.empty()) {
      WB_ASSIGN_OR_RETURN(cost, RequestedCost(opts, config.kdf));
    }
  }
  pipeline::Credentials current;
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kWrite, &current));
  if (CostAsked(opts) && !cost.has_value()) {
    WB_ASSIGN_OR_RETURN(const pipeline::KdfParams base, repo->PassphraseCost());
    WB_ASSIGN_OR_RETURN(cost, RequestedCost(opts, base));
  }
  pipeline::Credentials next;
  pipeline::EncryptionMode mode = pipeline::EncryptionMode::kPassphrase;
  const char* new_env = std::getenv("WANBACKUP_NEW_PASSWORD");
  const bool keep_passphrase = cost.has_value() && opts.new_password_file.empty() &&
                               (new_env == nullptr || *new_env == '\0') &&
                               repo->config().mode == pipeline::EncryptionMode::kPassphrase;
  if (!opts.new_key_file.empty()) {
    mode = pipeline::EncryptionMode::kKeyFile;
    next.key_file = opts.new_key_file;
  } else if (keep_passphrase) {
    next.passphrase = std::move(current.passphrase);  // only the cost changes
  } else {
    WB_ASSIGN_OR_RETURN(
        next.passphrase,
        ReadNewPassphrase(opts.new_password_file, "WANBACKUP_NEW_PASSWORD", "New passphrase: "));
  }
  WB_RETURN_IF_ERROR(repo->ChangeKey(mode, next, cost));
  const std::string by = mode == pipeline::EncryptionMode::kKeyFile
                             ? "key file " + opts.new_key_file
                         : keep_passphrase ? "the same passphrase, " + CostText(repo->config().kdf)
                                           : "the new passphrase, " + CostText(repo->config().kdf);
  PrintInfo("changed the key of " + repo->path() + ": now unlocked by " + by);
  return Status::Ok();
}

std::string ChangeFooter() {
  const pipeline::KdfParams defaults;
  return "\nThe current passphrase or key file unlocks the repository (--password-file,\n"
         "--key-file, or asked for); the master key is then wrapped under the new one.\n"
         "\nKDF COST: a passphrase goes through Argon2id, at a cost stored in config.json\n"
         "(new repositories: " +
         FormatBytes(defaults.memlimit) + ", " + std::to_string(defaults.opslimit) +
         " passes). --kdf-memory and --kdf-ops raise it: each\n"
         "guess then costs an attacker more, and each unlock takes longer and needs that much\n"
         "memory free on every machine that opens the repository (the restore host too).\n"
         "The cost can only be raised, never lowered (exit status 2), up to " +
         FormatBytes(pipeline::kMaxKdfMemory) + "\nand " + std::to_string(pipeline::kMaxKdfOps) +
         " passes. A passphrase set after a key file starts at the highest cost\n"
         "an earlier passphrase had. With --kdf-* and no new passphrase (no\n"
         "--new-password-file, no $WANBACKUP_NEW_PASSWORD), the current passphrase stays,\n"
         "under the new cost.\n"
         "\nEXAMPLES:\n"
         "  wanbackup key change --repo /backup/db-repo\n"
         "  wanbackup key change --repo /backup/db-repo --kdf-memory 1G --kdf-ops 4\n"
         "  wanbackup key change --repo /backup/db-repo --new-key-file /etc/wanbackup/db.key\n";
}

}  // namespace

void RegisterKey(CLI::App& app, Runner* runner) {
  CLI::App* key = app.add_subcommand("key", "Manage the repository's passphrase or key file");
  key->require_subcommand(1);
  auto opts = std::make_shared<KeyChangeOptions>();
  CLI::App* change = key->add_subcommand(
      "change",
      "Replace the passphrase or key file, or raise the passphrase's cost (the data is not "
      "rewritten)");
  AddRepoFlags(change, &opts->repo);
  change->add_option(
      "--new-password-file", opts->new_password_file,
      "file with the new passphrase, mode 0600 (or $WANBACKUP_NEW_PASSWORD, or asked twice)");
  change->add_option("--new-key-file", opts->new_key_file,
                     "switch to this key file (created, mode 0600, if missing)");
  change->add_option("--kdf-memory", opts->kdf_memory,
                     "Argon2id memory for the passphrase, e.g. 256M or 1G (only higher than now)");
  change
      ->add_option("--kdf-ops", opts->kdf_ops,
                   "Argon2id passes for the passphrase (only more than now)")
      ->check(CLI::Range(pipeline::kMinKdfOps, pipeline::kMaxKdfOps));
  change->footer(ChangeFooter());
  change->callback([opts, runner] { *runner = [opts] { return RunKeyChange(*opts); }; });
}

}  // namespace wanbackup::cli
