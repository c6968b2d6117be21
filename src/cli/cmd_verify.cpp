// wanbackup verify: check every chunk and every snapshot.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "common/units.h"
#include "pipeline/verifier.h"

namespace wanbackup::cli {
namespace {

struct VerifyCommandOptions {
  std::string snapshot;
  bool json = false;
  RepoFlags repo;
};

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
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& d : report.damage) {
      std::printf("DAMAGED snapshot %lld: LBA %llu+%llu (bytes %llu+%llu): %s\n",
                  static_cast<long long>(d.snapshot_id),
                  static_cast<unsigned long long>(d.offset / d.block_size),
                  static_cast<unsigned long long>(d.length / d.block_size),
                  static_cast<unsigned long long>(d.offset),
                  static_cast<unsigned long long>(d.length), d.reason.c_str());
    }
    std::printf("%s: %llu snapshots, %llu chunks (%s) checked, %llu damaged\n",
                report.ok() ? "ok" : "DAMAGED",
                static_cast<unsigned long long>(report.snapshots_checked),
                static_cast<unsigned long long>(report.chunks_checked),
                FormatBytes(report.bytes_checked).c_str(),
                static_cast<unsigned long long>(report.chunks_damaged));
  }
  if (!report.ok()) {
    return Status::Corruption("the repository is damaged: " + std::to_string(report.damage.size()) +
                              " range(s) in " + std::to_string(report.chunks_damaged) +
                              " chunk(s)");
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
