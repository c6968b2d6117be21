// wanbackup init: create a repository.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/repo_flags.h"
#include "common/units.h"
#include "repository/repository_trust.h"
#include "repository/trust_anchor.h"
#include "store/s3_url.h"

namespace wanbackup::cli {
namespace {

struct InitCommandOptions {
  std::string repo_positional;
  RepoFlags repo;
  std::string chunk_size = "4M";
  int compression = 3;
  bool json = false;
};

// How the new repository at `path` is locked: no encryption (asked for in so many words), a key
// file (checked before it is made), or a new passphrase.
Status ChooseCredentials(RepoFlags flags, const std::string& path, pipeline::InitOptions* init) {
  if (flags.insecure_no_encryption) {
    if (!flags.key_file.empty() || !flags.password_file.empty()) {
      return Status::InvalidArgument("--insecure-no-encryption takes no passphrase or key file");
    }
    init->mode = pipeline::EncryptionMode::kNone;
    return Status::Ok();
  }
  flags = WithEnvironment(flags);
  if (!flags.key_file.empty()) {
    WB_RETURN_IF_ERROR(CheckNewKeyFile("--key-file", flags.key_file, path));
    init->mode = pipeline::EncryptionMode::kKeyFile;
    init->credentials.key_file = flags.key_file;
    return Status::Ok();
  }
  init->mode = pipeline::EncryptionMode::kPassphrase;
  WB_ASSIGN_OR_RETURN(init->credentials.passphrase,
                      ReadNewPassphrase(flags.password_file, "WANBACKUP_PASSWORD",
                                        "Passphrase for the new repository: "));
  return Status::Ok();
}

Status RunInit(InitCommandOptions opts) {
  if (!opts.repo_positional.empty()) {
    if (!opts.repo.repo.empty() && opts.repo.repo != opts.repo_positional) {
      return Status::InvalidArgument("repository given twice (argument and --repo)");
    }
    opts.repo.repo = opts.repo_positional;
  }
  WB_ASSIGN_OR_RETURN(std::string path, RepoPath(opts.repo));
  if (pipeline::IsS3Url(path)) {
    WB_RETURN_IF_ERROR(pipeline::ParseS3Url(path).status());  // a bad URL before any question
  } else {
    WB_RETURN_IF_ERROR(CheckNewRepositoryPlace(path));
  }
  pipeline::InitOptions init;
  WB_ASSIGN_OR_RETURN(uint64_t chunk, ParseSize(opts.chunk_size));
  init.chunk_size = static_cast<uint32_t>(std::min<uint64_t>(chunk, UINT32_MAX));
  init.zstd_level = opts.compression;
  WB_RETURN_IF_ERROR(ChooseCredentials(opts.repo, path, &init));
  WB_RETURN_IF_ERROR(pipeline::Repository::Init(path, init));
  WB_ASSIGN_OR_RETURN(pipeline::RepositoryConfig config, pipeline::Repository::ReadConfig(path));
  // This client made it: the location is this repository's from now on (repository_trust.h).
  WB_RETURN_IF_ERROR(
      pipeline::RecordNewRepository(pipeline::TrustAnchorStore(pipeline::DefaultSecurityDir()),
                                    config, pipeline::CanonicalLocation(path)));
  if (opts.json) {
    nlohmann::json j = {{"repository", pipeline::CanonicalLocation(path)},
                        {"id", config.id},
                        {"chunk_size", config.chunk_size},
                        {"compression_level", config.zstd_level},
                        {"encryption", pipeline::EncryptionModeName(config.mode)}};
    OutputJson(j);
  } else {
    std::string enc = config.mode == pipeline::EncryptionMode::kPassphrase
                          ? "passphrase (Argon2id), XChaCha20-Poly1305"
                      : config.mode == pipeline::EncryptionMode::kKeyFile
                          ? "key file " + init.credentials.key_file + ", XChaCha20-Poly1305"
                          : "NONE (anyone who can read the repository can read the data)";
    PrintInfo("created repository " + path + " (id " + config.id.substr(0, 8) + "): chunks of " +
              FormatBytes(config.chunk_size) + ", zstd level " + std::to_string(config.zstd_level) +
              ", encryption " + enc);
    if (config.mode == pipeline::EncryptionMode::kKeyFile) {
      PrintWarning("keep a copy of " + init.credentials.key_file +
                   " somewhere safe: without it the repository cannot be read");
    } else if (config.mode == pipeline::EncryptionMode::kPassphrase) {
      PrintInfo("keep the passphrase safe: without it the repository cannot be read");
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterInit(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<InitCommandOptions>();
  CLI::App* cmd = app.add_subcommand("init", "Create a repository");
  cmd->add_option("repository", opts->repo_positional, "directory to create (or --repo)");
  AddRepoFlags(cmd, &opts->repo);
  cmd->add_option("--chunk-size", opts->chunk_size,
                  "fixed chunk size, a power of two from 64K to 64M (LBA-aligned); fixed for "
                  "the repository's life")
      ->capture_default_str();
  cmd->add_option("--compression", opts->compression, "zstd level, 0 (none) to 19")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "print a JSON summary");
  cmd->footer(
      "\nThe repository's data is encrypted with a random master key, itself kept encrypted\n"
      "under your passphrase (Argon2id) or a key file: 'wanbackup key change' changes those\n"
      "without touching the data. With --key-file, a missing key file is created (mode 0600),\n"
      "never inside a repository. A passphrase has at least 8 characters. The repository's\n"
      "directory, and every one above it, must be root's or yours and writable by nobody else.\n"
      "\nEXAMPLES:\n"
      "  wanbackup init /backup/db-repo\n"
      "  WANBACKUP_PASSWORD_FILE=/etc/wanbackup/pass wanbackup init --repo /backup/db-repo\n"
      "  wanbackup init /backup/db-repo --key-file /etc/wanbackup/db-repo.key");
  cmd->callback([opts, runner] { *runner = [opts] { return RunInit(*opts); }; });
}

}  // namespace wanbackup::cli
