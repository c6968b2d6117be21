// wanbackup trust: accept a repository as it is now, after the trust checks refused it.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"
#include "repository/repository_trust.h"
#include "repository/trust_anchor.h"

namespace wanbackup::cli {
namespace {

struct TrustOptions {
  RepoFlags repo;
};

Status RunTrust(TrustOptions opts) {
  opts.repo.skip_trust_checks = true;
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  const pipeline::TrustAnchorStore anchors(pipeline::DefaultSecurityDir());
  const std::string location = pipeline::CanonicalLocation(repo->path());
  WB_ASSIGN_OR_RETURN(const std::vector<std::string> changes,
                      pipeline::AcceptRepository(anchors, *repo, location));
  if (changes.empty()) {
    PrintInfo("repository " + repo->config().id + " at " + location +
              " is as this client knew it; nothing changed");
  } else {
    PrintInfo("repository " + repo->config().id + " at " + location + ":");
  }
  for (const std::string& c : changes)
    PrintInfo("trusted: " + c);
  return Status::Ok();
}

}  // namespace

void RegisterTrust(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<TrustOptions>();
  CLI::App* cmd = app.add_subcommand(
      "trust", "Accept a repository that changed since this client last used it");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nEvery command checks a repository against what this client remembers of it (its\n"
      "trust anchor): its id at this location, its encryption, a fingerprint of its key, and\n"
      "the highest head counter seen. A repository that was replaced, is suddenly not\n"
      "encrypted, has another key, or shows an older head is refused with exit status 3.\n"
      "When the change is intended (a repository re-created at the same path, the loss of the\n"
      "newest packs accepted after 'repair catalog'), this command makes the anchor say what\n"
      "the repository shows now, and prints what changed. It needs the repository's key, and\n"
      "changes nothing in the repository.\n"
      "\nAnchors live in $WANBACKUP_SECURITY_DIR, else /var/lib/wanbackup/security (root),\n"
      "else $XDG_STATE_HOME/wanbackup/security or ~/.local/state/wanbackup/security.\n"
      "\nEXAMPLES:\n"
      "  wanbackup trust --repo /backup/db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunTrust(*opts); }; });
}

}  // namespace wanbackup::cli
