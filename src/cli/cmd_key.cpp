// wanbackup key change: new passphrase or key file; the data stays as it is.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"

namespace wanbackup::cli {
namespace {

struct KeyChangeOptions {
  RepoFlags repo;
  std::string new_password_file;
  std::string new_key_file;
};

Status RunKeyChange(const KeyChangeOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kWrite));
  pipeline::Credentials next;
  pipeline::EncryptionMode mode = pipeline::EncryptionMode::kPassphrase;
  if (!opts.new_key_file.empty()) {
    if (!opts.new_password_file.empty()) {
      return Status::InvalidArgument("give --new-password-file or --new-key-file, not both");
    }
    mode = pipeline::EncryptionMode::kKeyFile;
    next.key_file = opts.new_key_file;
  } else {
    WB_ASSIGN_OR_RETURN(
        next.passphrase,
        ReadPassphrase(opts.new_password_file, "WANBACKUP_NEW_PASSWORD", "New passphrase: ", true));
  }
  WB_RETURN_IF_ERROR(repo->ChangeKey(mode, next));
  PrintInfo(std::string("changed the key of ") + repo->path() + ": now unlocked by " +
            (mode == pipeline::EncryptionMode::kKeyFile ? "key file " + opts.new_key_file
                                                        : std::string("the new passphrase")));
  return Status::Ok();
}

}  // namespace

void RegisterKey(CLI::App& app, Runner* runner) {
  CLI::App* key = app.add_subcommand("key", "Manage the repository's passphrase or key file");
  key->require_subcommand(1);
  auto opts = std::make_shared<KeyChangeOptions>();
  CLI::App* change = key->add_subcommand(
      "change", "Replace the passphrase or key file (the data is not rewritten)");
  AddRepoFlags(change, &opts->repo);
  change->add_option("--new-password-file", opts->new_password_file,
                     "file with the new passphrase (or $WANBACKUP_NEW_PASSWORD, or asked twice)");
  change->add_option("--new-key-file", opts->new_key_file,
                     "switch to this key file (created, mode 0600, if missing)");
  change->footer(
      "\nThe current passphrase or key file unlocks the repository (--password-file,\n"
      "--key-file, or asked for); the master key is then wrapped under the new one.\n");
  change->callback([opts, runner] { *runner = [opts] { return RunKeyChange(*opts); }; });
}

}  // namespace wanbackup::cli
