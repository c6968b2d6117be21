// wanbackup replicas: the replicas `replicate` keeps, what each holds and whether it is
// consistent; --forget drops one's record (its next replicate reads it to compare).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/repo_flags.h"
#include "common/text.h"
#include "common/units.h"

namespace wanbackup::cli {
namespace {

struct ReplicasCommandOptions {
  std::string forget;
  bool json = false;
  RepoFlags repo;
};

// consistent; inconsistent (a stopped run the next one finishes from the chunk maps); unknown
// (a stopped run that was comparing: the next one reads the replica again).
std::string State(const catalog::Replica& r) {
  if (r.consistent()) return "consistent";
  if (r.writing_snapshot_id != 0 && r.snapshot_id != 0) return "inconsistent";
  return "unknown";
}

Status Forget(const ReplicasCommandOptions& opts) {
  char* end = nullptr;
  const long long id = std::strtoll(opts.forget.c_str(), &end, 10);
  if (opts.forget.empty() || *end != '\0' || id <= 0) {
    return Status::InvalidArgument("'" + opts.forget +
                                   "' is not a replica number (wanbackup replicas lists them)");
  }
  RepoFlags flags = opts.repo;
  flags.command = "replicas --forget";
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(flags, pipeline::OpenMode::kWrite));
  WB_ASSIGN_OR_RETURN(auto tx, repo->catalog().Begin());
  Status deleted = repo->catalog().DeleteReplica(id);
  if (deleted.code() == StatusCode::kNotFound) {
    return Status::NotFound("no replica " + opts.forget +
                            " in this repository (wanbackup replicas lists them)");
  }
  WB_RETURN_IF_ERROR(deleted);
  WB_RETURN_IF_ERROR(tx->Commit());
  PrintInfo("forgot replica " + opts.forget +
            "; the device itself is untouched, and a replicate to it reads it to compare");
  return Status::Ok();
}

Status RunReplicas(const ReplicasCommandOptions& opts) {
  if (!opts.forget.empty()) return Forget(opts);
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  WB_ASSIGN_OR_RETURN(std::vector<catalog::Replica> replicas, repo->catalog().Replicas());
  if (opts.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const catalog::Replica& r : replicas) {
      list.push_back({{"id", r.id},
                      {"target", r.target},
                      {"identity", r.identity},
                      {"state", State(r)},
                      {"snapshot", r.consistent() ? r.snapshot_id : 0},
                      {"writing_snapshot", r.writing_snapshot_id},
                      {"updated_unix_ms", r.updated_unix_ms},
                      {"bytes_written", r.bytes_written},
                      {"chunks_written", r.chunks_written}});
    }
    OutputJson(list, 2);
    return Status::Ok();
  }
  if (replicas.empty()) {
    std::printf("no replicas (wanbackup replicate SNAPSHOT --to TARGET makes one)\n");
    return Status::Ok();
  }
  std::printf("%-4s %-12s %-8s %-19s %-11s %s\n", "ID", "STATE", "SNAPSHOT", "UPDATED",
              "LAST WROTE", "TARGET");
  for (const catalog::Replica& r : replicas) {
    const std::string snapshot =
        r.consistent()
            ? std::to_string(r.snapshot_id)
            : (r.writing_snapshot_id != 0 ? "->" + std::to_string(r.writing_snapshot_id) : "-");
    std::printf("%-4lld %-12s %-8s %-19s %-11s %s\n", static_cast<long long>(r.id),
                State(r).c_str(), snapshot.c_str(), LocalTime(r.updated_unix_ms).c_str(),
                FormatBytes(r.bytes_written).c_str(), EscapeForTerminal(r.target).c_str());
  }
  return Status::Ok();
}

}  // namespace

void RegisterReplicas(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ReplicasCommandOptions>();
  CLI::App* cmd = app.add_subcommand("replicas", "List the replicas replicate keeps");
  cmd->add_option("--forget", opts->forget,
                  "drop the record of replica ID (its next replicate reads it to compare)");
  cmd->add_flag("--json", opts->json, "print JSON");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nSTATE: consistent (holds SNAPSHOT exactly, as far as wanbackup wrote it), inconsistent\n"
      "(a replicate to ->SNAPSHOT was stopped: the next one finishes it from the chunk maps),\n"
      "unknown (a stopped run was comparing it: the next one reads it again). Never bring a\n"
      "standby up from a replica that is not consistent. Records live in the catalog only:\n"
      "after 'repair catalog' the list is empty and each replica's next replicate reads it to\n"
      "compare.\n"
      "\nEXAMPLES:\n"
      "  wanbackup replicas --repo /backup/db\n"
      "  wanbackup replicas --repo /backup/db --forget 2");
  cmd->callback([opts, runner] { *runner = [opts] { return RunReplicas(*opts); }; });
}

}  // namespace wanbackup::cli
