// wanbackup repair catalog: rebuild catalog.db from the packs alone.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "common/units.h"
#include "repository/catalog_rebuild.h"

namespace wanbackup::cli {
namespace {

struct RepairCatalogOptions {
  RepoFlags repo;
  bool json = false;
  bool allow_missing_packs = false;
};

std::string IdList(const std::vector<int64_t>& ids) {
  std::string text;
  for (int64_t id : ids)
    text += (text.empty() ? "" : " ") + std::to_string(id);
  return text.empty() ? "none" : text;
}

// What a new head (RebuildReport::new_head) means for the operator.
std::string NewHeadLine(const pipeline::RebuildReport& r) {
  std::string line = "the repository's newest head ";
  if (!r.lost.empty()) {
    line += "listed snapshot(s) " + IdList(r.lost) + ", which could not be rebuilt and are gone";
  }
  if (!r.lost.empty() && !r.unlisted.empty()) line += ", and it ";
  if (r.lost.empty() && r.unlisted.empty()) line += "did not list the snapshot(s) renumbered above";
  if (!r.unlisted.empty()) {
    line += "did not list snapshot(s) " + IdList(r.unlisted) +
            ", complete and sealed (by a wanbackup before heads, or a snapshot interrupted "
            "before its commit), which are kept";
  }
  return line + "; sealed a new head (counter " + std::to_string(r.head_counter) +
         ") listing the " + std::to_string(r.snapshots.size()) + " rebuilt snapshot(s)";
}

// The packs an earlier catalog named that are not there (--allow-missing-packs).
std::string MissingPacksLine(const pipeline::RebuildReport& r) {
  return std::to_string(r.missing_packs.size()) +
         " pack(s) an earlier catalog named are not there (" + r.missing_packs.front() +
         (r.missing_packs.size() > 1 ? ", ..." : "") +
         "), and a snapshot whose record one holds may use chunks of the packs that are: prune "
         "removes nothing until they are back (then 'wanbackup repair catalog' again) or "
         "'wanbackup forget --lost-packs' gives them up for good";
}

void PrintReport(const pipeline::RebuildReport& r, double seconds, bool json) {
  if (json) {
    nlohmann::json j = {{"complete", r.complete()},
                        {"packs", r.packs},
                        {"records", r.records},
                        {"duplicates", r.duplicates},
                        {"damaged_records", r.damaged_records},
                        {"torn_bytes", r.torn_bytes},
                        {"snapshots", r.snapshots},
                        {"problems", r.problems},
                        {"head_counter", r.head_counter},
                        {"new_head", r.new_head},
                        {"lost", r.lost},
                        {"unlisted", r.unlisted},
                        {"renumbered", r.renumbered},
                        {"missing_packs", r.missing_packs},
                        {"missing_records", r.missing_records},
                        {"old_catalog", r.old_catalog},
                        {"seconds", seconds}};
    OutputJson(j, 2);
    return;
  }
  for (const std::string& p : r.problems)
    PrintWarning(p);
  for (const std::string& line : r.renumbered)
    PrintWarning(line);
  const std::string ids = IdList(r.snapshots);
  PrintInfo("rebuilt the catalog from " + std::to_string(r.packs) + " packs in " +
            FormatDuration(std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(seconds))) +
            ": " + std::to_string(r.records) + " records, " + std::to_string(r.snapshots.size()) +
            " snapshots (" + ids + ")");
  if (r.new_head) PrintWarning(NewHeadLine(r));
  if (!r.missing_packs.empty()) PrintWarning(MissingPacksLine(r));
  if (!r.missing_records.empty()) {
    PrintWarning(std::to_string(r.missing_records.size()) +
                 " sealed snapshot record(s) the repository's head or this client knew are not in "
                 "the packs (snapshot " +
                 r.missing_records.front().substr(0, r.missing_records.front().find(':')) +
                 (r.missing_records.size() > 1 ? ", ..." : "") +
                 "): the pack that holds each is missing, and prune removes nothing until it is "
                 "back (then 'wanbackup repair catalog' again) or 'wanbackup forget --lost-packs' "
                 "gives them up for good");
  }
  if (!r.old_catalog.empty()) PrintInfo("the old catalog is kept as " + r.old_catalog);
  PrintInfo("the job history is not in the packs and starts afresh; run 'wanbackup verify'");
}

Status RunRepairCatalog(const RepairCatalogOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRepair));
  ProgressLine progress(!opts.json);
  pipeline::RebuildOptions options;
  options.allow_missing_packs = opts.allow_missing_packs;
  options.on_progress = [&progress](uint64_t done, uint64_t total) {
    progress.Update("read " + FormatBytes(done) + " of " + FormatBytes(total) + " of packs");
  };
  const auto start = std::chrono::steady_clock::now();
  WB_ASSIGN_OR_RETURN(pipeline::RebuildReport report, pipeline::RebuildCatalog(*repo, options));
  progress.Clear();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintReport(report, seconds, opts.json);
  if (!report.lost.empty()) {
    return Status::Corruption("the catalog was rebuilt, but snapshot(s) " + IdList(report.lost) +
                              " are lost (listed above); the repository is usable again");
  }
  if ((!report.missing_packs.empty() || !report.missing_records.empty()) &&
      report.problems.empty() && report.damaged_records == 0) {
    return Status::Corruption(
        "the catalog was rebuilt without what missing packs hold (listed above); prune waits "
        "for them");
  }
  if (!report.complete()) {
    return Status::Corruption("the catalog was rebuilt, but " +
                              std::to_string(report.problems.size()) +
                              " problem(s) were found in the packs (listed above)");
  }
  return Status::Ok();
}

}  // namespace

void RegisterRepair(CLI::App& app, Runner* runner) {
  CLI::App* repair = app.add_subcommand("repair", "Rebuild what can be rebuilt from the packs");
  repair->require_subcommand(1);
  auto opts = std::make_shared<RepairCatalogOptions>();
  CLI::App* cmd = repair->add_subcommand(
      "catalog", "Rebuild catalog.db from the packs (after it was deleted, truncated or damaged)");
  AddRepoFlags(cmd, &opts->repo);
  cmd->add_flag("--json", opts->json, "print a JSON report");
  cmd->add_flag("--allow-missing-packs", opts->allow_missing_packs,
                "rebuild although the old catalog names packs that are gone: the snapshots "
                "with chunks or records in them are left out until those packs are back and a "
                "repair runs; the new catalog records the missing packs, and prune removes "
                "nothing until then (or 'forget --lost-packs')");
  cmd->footer(
      "\nReads every pack, authenticates every record, and builds a new catalog.db beside the\n"
      "old one: packs, chunks, and every complete snapshot with its id, source, tag, times,\n"
      "sizes and chunk map, taken from the snapshot's sealed record. The new catalog replaces\n"
      "the old one only when it is complete; the old file is kept as catalog.db.damaged-TIME.\n"
      "The job history is not in the packs and starts afresh. Runs alone (exclusive lock).\n"
      "Exit status 3 when records were damaged or a snapshot could not be rebuilt (named).\n"
      "When the old catalog can still be read and names packs that are not there (a disk not\n"
      "mounted yet under packs/, something mounted over it), nothing is changed unless\n"
      "--allow-missing-packs says to rebuild from what is there. Those packs are recorded in\n"
      "the new catalog (exit status 3 while any is missing): a snapshot whose record is in one\n"
      "may use chunks of the packs that are here, so prune removes nothing until they are back\n"
      "(then repair again) or 'wanbackup forget --lost-packs' gives them up for good.\n"
      "\nEXAMPLES:\n"
      "  wanbackup repair catalog --repo /backup/db\n"
      "  wanbackup repair catalog --repo /backup/db --json && wanbackup verify --repo /backup/db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunRepairCatalog(*opts); }; });
}

}  // namespace wanbackup::cli
