// wanbackup migrate: upgrade a repository to the current format.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/repo_flags.h"
#include "repository/migrate.h"

namespace wanbackup::cli {
namespace {

struct MigrateCommandOptions {
  RepoFlags repo;
  bool assume_format1 = false;
};

Status RunMigrate(const MigrateCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kMigrate));
  pipeline::MigrateOptions options;
  options.assume_format1 = opts.assume_format1;
  WB_ASSIGN_OR_RETURN(pipeline::MigrateReport report, pipeline::MigrateRepository(*repo, options));
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
  auto opts = std::make_shared<MigrateCommandOptions>();
  CLI::App* cmd = app.add_subcommand("migrate", "Upgrade a repository made by an older wanbackup");
  AddRepoFlags(cmd, &opts->repo);
  cmd->add_flag("--assume-format-1", opts->assume_format1,
                "take a format-1 config.json at its word although the catalog or packs look "
                "newer (only to finish a migrate of yours that was interrupted)");
  cmd->footer(
      "\nFormat 1 -> 2: writes each snapshot's sealed record (its metadata and chunk map,\n"
      "authenticated, in the packs), records the settings config.json must agree with in the\n"
      "catalog, and rewrites config.json authenticated. Chunks are not rewritten. Each chunk a\n"
      "snapshot names is first read from its pack, authenticated and its digest recomputed.\n"
      "Runs alone (exclusive lock). Other commands refuse a format-1 repository and name\n"
      "this one.\n"
      "\nA format-1 config.json is not authenticated. When the catalog or the packs show a\n"
      "newer format (catalog schema 2 or later, repository settings, sealed records), the\n"
      "config.json was turned back, and migrate refuses (exit 3, nothing changed): sealing\n"
      "would bless whatever the catalog says. Put back a config.json you trust. An interrupted\n"
      "migrate leaves the same signs: only then, and only for a repository you know an old\n"
      "wanbackup wrote, finish it with --assume-format-1.\n"
      "\nEXAMPLES:\n"
      "  wanbackup migrate --repo /backup/db && wanbackup verify --repo /backup/db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunMigrate(*opts); }; });
}

}  // namespace wanbackup::cli
