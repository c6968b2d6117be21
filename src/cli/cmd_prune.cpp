// wanbackup prune: reclaim the space of data no snapshot needs.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "common/units.h"
#include "repository/prune.h"

namespace wanbackup::cli {
namespace {

struct PruneCommandOptions {
  std::string max_unused = "5%";
  bool dry_run = false;
  bool json = false;
  RepoFlags repo;
};

void PrintJsonReport(const pipeline::PruneReport& r, bool dry_run) {
  nlohmann::json j = {{"dry_run", dry_run},
                      {"snapshots", r.snapshots},
                      {"packs", r.packs},
                      {"total_bytes", r.total_bytes},
                      {"live_bytes", r.live_bytes},
                      {"unused_bytes", r.unused_bytes},
                      {"orphan_packs", r.orphan_packs},
                      {"orphan_bytes", r.orphan_bytes},
                      {"unfinished_uploads", r.unfinished_uploads},
                      {"packs_removed", r.packs_removed},
                      {"packs_rewritten", r.packs_rewritten},
                      {"packs_written", r.packs_written},
                      {"records_copied", r.records_copied},
                      {"records_dropped", r.records_dropped},
                      {"bytes_copied", r.bytes_copied},
                      {"bytes_freed", r.bytes_freed},
                      {"unused_after", r.unused_after},
                      {"abandoned_runs", r.abandoned_runs},
                      {"missing_packs", r.missing_packs}};
  OutputJson(j, 2);
}

void PrintReport(const pipeline::PruneReport& r, const PruneCommandOptions& opts) {
  for (const std::string& name : r.missing_packs)
    PrintWarning("pack " + name + " is named by the catalog but missing; run 'wanbackup verify'");
  const std::string verb = opts.dry_run ? "would " : "";
  PrintInfo(std::to_string(r.packs) + " packs, " + FormatBytes(r.total_bytes) + ": " +
            FormatBytes(r.live_bytes) + " used by " + std::to_string(r.snapshots) +
            " snapshot(s), " + FormatBytes(r.unused_bytes) + " unused");
  if (r.orphan_packs > 0) {
    PrintInfo(verb + (opts.dry_run ? "remove " : "removed ") + std::to_string(r.orphan_packs) +
              " pack(s) no catalog entry names (" + FormatBytes(r.orphan_bytes) +
              ", left by an interrupted run)");
  }
  if (r.unfinished_uploads > 0) {
    PrintInfo("abandoned " + std::to_string(r.unfinished_uploads) +
              " unfinished upload(s) of packs (left by an interrupted run)");
  }
  PrintInfo((opts.dry_run ? "would remove " : "removed ") + std::to_string(r.packs_removed) +
            " pack(s) with nothing in use, " + (opts.dry_run ? "rewrite " : "rewrote ") +
            std::to_string(r.packs_rewritten) + " (copying " + FormatBytes(r.bytes_copied) +
            " still in use); " + (opts.dry_run ? "would free " : "freed ") +
            FormatBytes(r.bytes_freed) + ", " + FormatBytes(r.unused_after) +
            " unused left (--max-unused " + opts.max_unused + ")" +
            (opts.dry_run ? " (dry run: nothing was changed)" : ""));
}

Status RunPrune(const PruneCommandOptions& opts) {
  pipeline::PruneOptions options;
  Result<pipeline::UnusedLimit> max_unused = pipeline::ParseUnusedLimit(opts.max_unused);
  if (!max_unused.ok()) return max_unused.status().WithContext("--max-unused");
  options.max_unused = *max_unused;
  options.dry_run = opts.dry_run;
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kExclusive));
  ProgressLine progress(!opts.json);
  options.on_progress = [&progress](uint64_t done, uint64_t total) {
    progress.Update("copied " + FormatBytes(done) + " of " + FormatBytes(total) + " still used");
  };
  Result<pipeline::PruneReport> result = pipeline::Prune(*repo, options);
  progress.Clear();
  if (!result.ok()) {
    if (result.status().code() == StatusCode::kCancelled) {
      return Status::Cancelled(
          "prune interrupted; every snapshot is intact, and the next prune "
          "finishes the job");
    }
    return result.status();
  }
  if (opts.json) {
    PrintJsonReport(*result, opts.dry_run);
  } else {
    PrintReport(*result, opts);
  }
  return Status::Ok();
}

}  // namespace

void RegisterPrune(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<PruneCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("prune", "Reclaim the space of data no snapshot needs (after forget)");
  cmd->add_option("--max-unused", opts->max_unused,
                  "unused space to tolerate: a share of the repository (5%), a size (200M), or "
                  "'unlimited' (only remove packs with nothing in use); 0 rewrites every pack "
                  "with anything unused")
      ->capture_default_str();
  cmd->add_flag("-n,--dry-run", opts->dry_run, "report what would be freed; change nothing");
  cmd->add_flag("--json", opts->json, "print a JSON report");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nData stays in the repository until no snapshot needs it and prune runs. Prune finds\n"
      "what complete snapshots still use (chunks, their sealed records and maps, forget\n"
      "records), removes packs that hold nothing in use, and rewrites the emptiest packs -\n"
      "copying only what is in use into new packs - until the unused space left is within\n"
      "--max-unused. Packs are never changed in place: new packs are written and made\n"
      "durable, the catalog is committed, and only then are old packs removed. Killed at any\n"
      "moment, every snapshot stays restorable and the next prune finishes the job (it also\n"
      "removes packs an interrupted snapshot, forget or prune left behind). Interrupted\n"
      "snapshot runs are closed first. Takes the repository alone (waits for readers and\n"
      "writers up to --lock-wait).\n"
      "\nEXAMPLES:\n"
      "  wanbackup forget --repo /backup/db --keep-daily 14 && wanbackup prune --repo /backup/db\n"
      "  wanbackup prune --repo /backup/db --dry-run\n"
      "  wanbackup prune --repo /backup/db --max-unused 0 --lock-wait 1h");
  cmd->callback([opts, runner] { *runner = [opts] { return RunPrune(*opts); }; });
}

}  // namespace wanbackup::cli
