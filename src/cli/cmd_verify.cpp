// wanbackup verify: check every chunk and every snapshot.
#include <cstdio>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "common/units.h"
#include "repository/verifier.h"

namespace wanbackup::cli {
namespace {

struct VerifyCommandOptions {
  std::string snapshot;
  bool json = false;
  RepoFlags repo;
};

// "0 chunks damaged, 1 snapshot damaged (2 ranges)": chunks that fail their check, and the
// snapshots with a damaged range (a damaged chunk, or a catalog entry that disagrees with the
// snapshot's sealed record, which damages no chunk).
std::string DamageCounts(const pipeline::VerifyReport& report) {
  std::set<int64_t> snapshots;
  for (const auto& d : report.damage)
    snapshots.insert(d.snapshot_id);
  const auto plural = [](uint64_t n, const char* one) {
    return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
  };
  std::string text = plural(report.chunks_damaged, "chunk") + " damaged";
  if (!report.damage.empty()) {
    text += ", " + plural(snapshots.size(), "snapshot") + " damaged (" +
            plural(report.damage.size(), "range") + ")";
  }
  return text;
}

Status RunVerify(const VerifyCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  pipeline::VerifyOptions options;
  if (!opts.snapshot.empty()) {
    WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo snap, ResolveSnapshot(*repo, opts.snapshot));
    options.snapshot_id = snap.id;
  }
  ProgressLine progress(!opts.json);
  options.on_progress = [&progress](uint64_t done, uint64_t total) {
    progress.Update("checked " + std::to_string(done) + " of " + std::to_string(total) + " chunks");
  };
  WB_ASSIGN_OR_RETURN(pipeline::VerifyReport report, pipeline::VerifyRepository(*repo, options));
  progress.Clear();
  if (opts.json) {
    nlohmann::json damage = nlohmann::json::array();
    for (const auto& d : report.damage) {
      damage.push_back({{"snapshot", d.snapshot_id},
                        {"offset", d.offset},
                        {"length", d.length},
                        {"lba", d.offset / d.block_size},
                        {"blocks", d.length / d.block_size},
                        {"reason", d.reason}});
    }
    nlohmann::json j = {{"ok", report.ok()},
                        {"snapshots_checked", report.snapshots_checked},
                        {"chunks_checked", report.chunks_checked},
                        {"chunks_damaged", report.chunks_damaged},
                        {"bytes_checked", report.bytes_checked},
                        {"damage", damage}};
    OutputJson(j, 2);
  } else {
    for (const auto& d : report.damage) {
      std::printf("DAMAGED snapshot %lld: LBA %llu+%llu (bytes %llu+%llu): %s\n",
                  static_cast<long long>(d.snapshot_id),
                  static_cast<unsigned long long>(d.offset / d.block_size),
                  static_cast<unsigned long long>(d.length / d.block_size),
                  static_cast<unsigned long long>(d.offset),
                  static_cast<unsigned long long>(d.length), d.reason.c_str());
    }
    std::printf("%s: %llu snapshots, %llu chunks (%s) checked; %s\n",
                report.ok() ? "ok" : "DAMAGED",
                static_cast<unsigned long long>(report.snapshots_checked),
                static_cast<unsigned long long>(report.chunks_checked),
                FormatBytes(report.bytes_checked).c_str(), DamageCounts(report).c_str());
  }
  if (!report.ok()) {
    return Status::Corruption("the repository is damaged: " + DamageCounts(report) +
                              " (each range is named above)");
  }
  return Status::Ok();
}

}  // namespace

void RegisterVerify(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<VerifyCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("verify", "Check every chunk's authenticity and every snapshot");
  cmd->add_option("--snapshot", opts->snapshot, "only this snapshot (number or 'latest')");
  cmd->add_flag("--json", opts->json, "print a JSON report");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nReads every chunk from its pack, authenticates and decompresses it and checks its\n"
      "digest; reports each damaged snapshot range as LBA and byte ranges. Exit status 3\n"
      "when anything is damaged.");
  cmd->callback([opts, runner] { *runner = [opts] { return RunVerify(*opts); }; });
}

}  // namespace wanbackup::cli
