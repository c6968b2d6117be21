// wanbackup replicate SNAPSHOT --to TARGET: keep a standby LUN, device or file at a snapshot,
// writing only the chunks that differ from what it holds (pipeline/replicator.h).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/replicate_target.h"
#include "cli/repo_flags.h"
#include "cli/source_open.h"
#include "cli/tuning_flags.h"
#include "cli/write_target.h"
#include "repository/snapshot_check.h"

namespace wanbackup::cli {
namespace {

struct ReplicateCommandOptions {
  std::string snapshot;
  std::string to;
  bool check = false;
  bool force = false;
  bool json = false;
  RepoFlags repo;
  TargetFlags target;
  TuningFlags tuning;
};

Status RunReplicate(const ReplicateCommandOptions& opts) {
  WB_RETURN_IF_ERROR(LimitRate(opts.tuning).status());  // a bad value costs no repository open
  RepoFlags repo_flags = opts.repo;
  repo_flags.command = "replicate";
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(repo_flags, pipeline::OpenMode::kWrite));
  WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo snap, ResolveSnapshot(*repo, opts.snapshot));
  WB_RETURN_IF_ERROR(pipeline::CheckSnapshotAgainstRecord(*repo, snap, true));
  ReplicateRequest request;
  request.to = AbsoluteLocalPath(opts.to);  // the replica's name in `replicas`
  request.check = opts.check;
  request.force = opts.force;
  request.progress = !opts.json;
  request.target = opts.target;
  request.tuning = opts.tuning;
  request.credential_files = CredentialFiles(opts.repo, opts.target);
  WB_ASSIGN_OR_RETURN(ReplicateOutcome out, ReplicateSnapshot(*repo, snap, request));
  if (opts.json) {
    std::printf("%s\n", out.json.c_str());  // already JSON text (ReplicateSnapshot made it)
    JsonPrinted() = true;
  } else {
    PrintInfo(out.summary);
  }
  return Status::Ok();
}

}  // namespace

void RegisterReplicate(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ReplicateCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replicate", "Bring a standby LUN, device or file to a snapshot, writing only what changed");
  cmd->add_option("snapshot", opts->snapshot, "snapshot number, or 'latest'")->required();
  cmd->add_option("--to", opts->to,
                  "the replica: iscsi://host[:port]/target-iqn/lun, a block device (not "
                  "mounted), or a file (created when missing)")
      ->required();
  cmd->add_flag("--check", opts->check,
                "read the replica and compare every chunk instead of trusting the record");
  cmd->add_flag("--force", opts->force,
                "make an existing file, or a block device that holds data, a replica although "
                "the repository records none there");
  cmd->add_flag("--json", opts->json, "print a JSON summary");
  AddRepoFlags(cmd, &opts->repo);
  AddTuningFlags(cmd, &opts->tuning);
  AddLimitRateFlag(cmd, &opts->tuning);
  AddTargetFlags(cmd, &opts->target);
  cmd->footer(
      "\nThe repository remembers each replica (a LUN by target IQN, LUN and device id; a\n"
      "device or file by what it is on disk) and the snapshot it holds. The next replicate\n"
      "compares the two snapshots' chunk maps and writes only the chunks that differ: nothing\n"
      "is read over the WAN. All-zero chunks go as WRITE SAME (no data on the wire).\n"
      "\nWhile a run writes, the replica is recorded as inconsistent; a run that was stopped\n"
      "(killed, link down) is finished by the next one. An existing file, or a block device\n"
      "whose first or last MiB is not zeros, that the repository records no replica at (after\n"
      "'repair catalog' or 'replicas --forget' too) is refused unless --force. A replica with no\n"
      "record (the first run, --force), or whose snapshot was forgotten, is read back and\n"
      "compared chunk by chunk; so is any replica with --check, so that one changed behind\n"
      "wanbackup's back is repaired, not trusted. The replica's cache is synchronized before\n"
      "the run counts. A replica must hold the snapshot in whole blocks, and may not be the\n"
      "source of any snapshot in the repository, a file of any repository, or a replica that\n"
      "holds another source's snapshots (by identity: symlinks, hard links, ./ and .. resolve;\n"
      "a LUN is its IQN, LUN and portal address). 'restore' refuses to write over a replica\n"
      "(its record would be false): replicate it to the snapshot instead. A symlink another\n"
      "user could have planted (theirs, in a directory others can write) is not followed.\n" +
      WriteTuneHelp() +
      "\nEXAMPLES:\n"
      "  wanbackup replicate latest --to iscsi://dr-san/iqn.2001-05.com.example:db-standby/1 \\\n"
      "      --repo /backup/db\n"
      "  wanbackup replicate latest --to /dev/vg0/db-standby --repo /backup/db --check\n"
      "  wanbackup replicas --repo /backup/db            # what each replica holds");
  cmd->callback([opts, runner] { *runner = [opts] { return RunReplicate(*opts); }; });
}

}  // namespace wanbackup::cli
