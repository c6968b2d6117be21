// wanbackup replicas: the replicas `replicate` keeps, what each holds and whether it is
// consistent; --forget drops one's record (its next replicate reads it to compare; a file or a
// device that holds data is then refused without --force, as any target not yet a replica is).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/repo_flags.h"
#include "common/text.h"
#include "common/units.h"
#include "initiator/iscsi_url.h"
#include "pipeline/replicator.h"

namespace wanbackup::cli {
namespace {

struct ReplicasCommandOptions {
  std::string forget;
  bool forget_given = false;  // --forget "" is an error, not the list
  bool json = false;
  RepoFlags repo;
};

// consistent; inconsistent (a stopped run the next one finishes from the chunk maps); unknown
// (a stopped run that was comparing, or a record not sealed by the repository key: the next one
// reads the replica again).
std::string State(const catalog::Replica& r, pipeline::Repository& repo) {
  if (!pipeline::ReplicaSealed(repo, r)) return "unknown";
  if (r.consistent()) return "consistent";
  if (r.writing_snapshot_id != 0 && r.snapshot_id != 0) return "inconsistent";
  return "unknown";
}

Status Forget(const ReplicasCommandOptions& opts) {
  const std::optional<uint64_t> number = ParseDecimalU64(opts.forget);  // not " 1" (AB6)
  const auto id = static_cast<int64_t>(number.value_or(0));
  if (!number || id <= 0) {
    return Status::InvalidArgument("'" + opts.forget +
                                   "' is not a replica number (wanbackup replicas lists them)");
  }
  RepoFlags flags = opts.repo;
  flags.command = "replicas --forget";
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(flags, pipeline::OpenMode::kWrite));
  WB_ASSIGN_OR_RETURN(auto tx, repo->catalog().Begin());
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::Replica> replicas, repo->catalog().Replicas());
  const auto known = std::find_if(replicas.begin(), replicas.end(),
                                  [id](const catalog::Replica& r) { return r.id == id; });
  if (known == replicas.end()) {
    return Status::NotFound("no replica " + opts.forget +
                            " in this repository (wanbackup replicas lists them)");
  }
  const std::string target = EscapeForTerminal(known->target);
  WB_RETURN_IF_ERROR(repo->catalog().DeleteReplica(id));
  WB_RETURN_IF_ERROR(tx->Commit());
  // What the next replicate does with it (round 9, Z3: the message promised a compare, and a
  // job that names the file then failed every night).
  const bool lun = initiator::LooksLikeIscsiUrl(target);
  PrintInfo("forgot replica " + opts.forget + " (" + target + "); the target itself is untouched" +
            (lun ? ", and the next replicate to it reads it to compare"
                 : ". It is now like any file or device that is no replica: a replicate to it "
                   "(a job's replicate_to too) is refused while it holds data, until "
                   "'wanbackup replicate SNAPSHOT --repo " +
                       ShellWord(repo->path()) + " --to " + ShellWord(target) +
                       " --force' makes it one again, comparing every chunk"));
  return Status::Ok();
}

Status RunReplicas(const ReplicasCommandOptions& opts) {
  if (opts.forget_given) return Forget(opts);
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  WB_ASSIGN_OR_RETURN(std::vector<catalog::Replica> replicas, repo->catalog().Replicas());
  if (opts.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const catalog::Replica& r : replicas) {
      list.push_back({{"id", r.id},
                      {"target", r.target},
                      {"identity", r.identity},
                      {"state", State(r, *repo)},
                      {"snapshot", State(r, *repo) == "consistent" ? r.snapshot_id : 0},
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
    const std::string state = State(r, *repo);
    const bool sealed = pipeline::ReplicaSealed(*repo, r);
    const std::string snapshot =
        !sealed ? "-"
        : r.consistent()
            ? std::to_string(r.snapshot_id)
            : (r.writing_snapshot_id != 0 ? "->" + std::to_string(r.writing_snapshot_id) : "-");
    std::printf("%-4lld %-12s %-8s %-19s %-11s %s\n", static_cast<long long>(r.id), state.c_str(),
                snapshot.c_str(), LocalTime(r.updated_unix_ms).c_str(),
                FormatBytes(r.bytes_written).c_str(), EscapeForTerminal(r.target).c_str());
  }
  return Status::Ok();
}

}  // namespace

void RegisterReplicas(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ReplicasCommandOptions>();
  CLI::App* cmd = app.add_subcommand("replicas", "List the replicas replicate keeps");
  CLI::Option* forget = cmd->add_option(
      "--forget", opts->forget,
      "drop the record of replica ID (a LUN's next replicate reads it to compare; a "
      "file or device holding data then needs replicate --force)");
  cmd->add_flag("--json", opts->json, "print JSON");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(
      "\nSTATE: consistent (holds SNAPSHOT exactly, as far as wanbackup wrote it), inconsistent\n"
      "(a replicate to ->SNAPSHOT was stopped: the next one finishes it from the chunk maps),\n"
      "unknown (a stopped run was comparing it, or its record is not sealed by the repository\n"
      "key: the next one reads it again). Never bring a standby up from a replica that is\n"
      "not consistent. Records live in the catalog only, sealed by the repository key:\n"
      "after 'repair catalog' or --forget, a LUN's next replicate reads it to compare, and a\n"
      "file or device that holds data is refused (a job's replicate_to too) until\n"
      "'wanbackup replicate SNAPSHOT --to TARGET --force' makes it a replica again.\n"
      "\nEXAMPLES:\n"
      "  wanbackup replicas --repo /backup/db\n"
      "  wanbackup replicas --repo /backup/db --forget 2");
  cmd->callback([opts, runner, forget] {
    opts->forget_given = forget->count() > 0;
    *runner = [opts] { return RunReplicas(*opts); };
  });
}

}  // namespace wanbackup::cli
