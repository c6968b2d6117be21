// wanbackup migrate: upgrade a repository to the current format.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"
#include "pipeline/migrate.h"

namespace wanbackup::cli {
namespace {

struct MigrateOptions {
  RepoFlags repo;
};

Status RunMigrate(const MigrateOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kMigrate));
  WB_ASSIGN_OR_RETURN(pipeline::MigrateReport report, pipeline::MigrateRepository(*repo));
  if (report.from_format == report.to_format) {
    PrintInfo(repo->path() + " already has format " + std::to_string(report.to_format) +
              "; nothing to do");
    return Status::Ok();
  }
  PrintInfo("upgraded " + repo->path() + " from format " + std::to_string(report.from_format) +
            " to " + std::to_string(report.to_format) + ": sealed " +
            std::to_string(report.sealed.size()) + " snapshot(s); no data was rewritten");
  return Status::Ok();
}

}  // namespace

void RegisterMigrate(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<MigrateOptions>();
  CLI::App* cmd = app.add_subcommand("migrate", "Upgrade a repository made by an older wanbackup");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nFormat 1 -> 2: writes each snapshot's sealed record (its metadata and chunk map,\n"
      "authenticated, in the packs), records the settings config.json must agree with in the\n"
      "catalog, and rewrites config.json authenticated. Chunks are not rewritten. Each chunk a\n"
      "snapshot names is checked against its pack first. Safe to interrupt and run again.\n"
      "Runs alone (exclusive lock). Other commands refuse a format-1 repository and name\n"
      "this one.\n"
      "\nEXAMPLES:\n"
      "  wanbackup migrate --repo /backup/db && wanbackup verify --repo /backup/db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunMigrate(*opts); }; });
}

}  // namespace wanbackup::cli
