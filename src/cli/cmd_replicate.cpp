// wanbackup replicate SNAPSHOT --to TARGET: keep a standby LUN, device or file at a snapshot,
// writing only the chunks that differ from what it holds (pipeline/replicator.h).
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "cli/sink_open.h"
#include "cli/source_open.h"
#include "common/pacing.h"
#include "common/units.h"
#include "initiator/iscsi_url.h"
#include "pipeline/replicator.h"
#include "pipeline/snapshot_check.h"

namespace wanbackup::cli {
namespace {

struct ReplicateCommandOptions {
  std::string snapshot;
  std::string to;
  bool check = false;
  bool json = false;
  RepoFlags repo;
  TargetFlags target;
  TuningFlags tuning;
};

// The LUN named by an iSCSI URL or spec, as "IQN/LUN" (portals may differ for the same LUN).
std::string LunName(const std::string& spec) {
  Result<initiator::IscsiUrl> url = initiator::ParseIscsiUrl(spec);
  if (!url.ok() || !url->lun) return "";
  return url->target + "/" + std::to_string(*url->lun);
}

// The same device, whatever it was called: a LUN by IQN + LUN, or a local path by what it
// resolves to.
bool SameTarget(const std::string& a, const std::string& b) {
  const bool a_lun = initiator::LooksLikeIscsiUrl(a), b_lun = initiator::LooksLikeIscsiUrl(b);
  if (a_lun || b_lun) return a_lun && b_lun && !LunName(a).empty() && LunName(a) == LunName(b);
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return a == b;
  if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) return sa.st_rdev == sb.st_rdev;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A replica must never be a disk that is being backed up: not the snapshot's own source, nor
// the source of a snapshot running now.
Status RefuseSource(pipeline::Repository& repo, const catalog::SnapshotInfo& snap,
                    const std::string& to) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(true));
  for (const catalog::SnapshotInfo& s : all) {
    const bool running = s.status == catalog::SnapshotStatus::kRunning;
    if ((s.id == snap.id || running) && SameTarget(s.source, to)) {
      return Status::InvalidArgument(
          to + " is the source of snapshot " + std::to_string(s.id) +
          (running ? " (running now)" : "") +
          "; replicate writes a standby copy, never the disk it backs up. Nothing was written");
    }
  }
  return Status::Ok();
}

// What makes the replica the same one next time, whatever name the user gives it.
Result<std::string> Identity(const std::string& to, const OpenedSink& opened) {
  if (opened.lun != nullptr) {
    const initiator::LunInfo& lun = opened.lun->lun();
    std::string id = lun.identifier.empty() ? lun.serial : lun.identifier;
    return "iscsi:" + LunName(to) + ":" + (id.empty() ? "no-vpd-id" : id);
  }
  struct stat st {};
  if (::stat(to.c_str(), &st) != 0) return Status::FromErrno(errno, "cannot stat " + to);
  if (S_ISBLK(st.st_mode)) {
    return "block:" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(to +
                                   " is neither a regular file, a block device nor a LUN; "
                                   "a replica must be one of those");
  }
  return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

nlohmann::json SummaryJson(const catalog::SnapshotInfo& snap, const catalog::Replica& replica,
                           const OpenedSink& opened, const pipeline::ReplicateResult& result) {
  const double secs = std::chrono::duration<double>(result.elapsed).count();
  nlohmann::json j = {{"snapshot", snap.id},
                      {"replica", replica.id},
                      {"target", replica.target},
                      {"mode", pipeline::ReplicateModeName(result.plan.mode)},
                      {"reason", result.plan.reason},
                      {"base_snapshot", result.plan.base_snapshot},
                      {"chunks_total", result.chunks_total},
                      {"chunks_written", result.chunks_written},
                      {"bytes_total", snap.size_bytes},
                      {"bytes_written", result.bytes_written},
                      {"bytes_read", result.bytes_read},
                      {"seconds", secs}};
  if (opened.lun != nullptr) {
    const initiator::IscsiSinkStats s = opened.lun->Stats();
    j["bytes_zeroed"] = s.bytes_zeroed;  // WRITE SAME: no data on the wire
    j["bytes_sent"] = s.bytes_written - s.bytes_zeroed;
    j["retries"] = s.retries;
    j["reconnects"] = s.reconnects;
  }
  return j;
}

Status RunReplicate(const ReplicateCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(const uint64_t rate, LimitRate(opts.tuning));  // before any login
  RepoFlags repo_flags = opts.repo;
  repo_flags.command = "replicate";
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(repo_flags, pipeline::OpenMode::kWrite));
  WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo snap, ResolveSnapshot(*repo, opts.snapshot));
  WB_RETURN_IF_ERROR(pipeline::CheckSnapshotAgainstRecord(*repo, snap, true));
  WB_RETURN_IF_ERROR(RefuseSource(*repo, snap, opts.to));
  if (opts.to == "-") {
    return Status::InvalidArgument("a replica is a LUN, block device or file, not stdout");
  }
  pipeline::ReplicateOptions options;
  options.check = opts.check;
  struct stat st {};
  options.target_new = !initiator::LooksLikeIscsiUrl(opts.to) &&
                       ::stat(opts.to.c_str(), &st) != 0 && errno == ENOENT;
  WB_ASSIGN_OR_RETURN(OpenedSink opened, OpenSink(opts.to, snap.size_bytes, ExistingFile::kInPlace,
                                                  opts.target, opts.tuning));
  WB_ASSIGN_OR_RETURN(const std::string identity, Identity(opts.to, opened));
  WB_ASSIGN_OR_RETURN(std::optional<catalog::Replica> known, repo->catalog().FindReplica(identity));
  catalog::Replica replica = known.value_or(catalog::Replica{});
  replica.identity = identity;
  replica.target = opened.sink->name();
  if (rate > 0) {
    opened.tuning_explanation += "; the average held to " + FormatRate(static_cast<double>(rate));
    opened.sink =
        std::make_unique<PacedSink>(std::move(opened.sink), std::make_shared<Pacer>(rate));
  }
  if (opened.lun != nullptr) {
    PrintInfo("writing " + replica.target + ": " + opened.tuning_explanation);
  }
  options.open_readback = [&opts]() -> Result<std::unique_ptr<BlockSource>> {
    WB_ASSIGN_OR_RETURN(OpenedSource source, OpenSource(opts.to, opts.target, opts.tuning));
    return std::move(source.source);
  };
  WB_ASSIGN_OR_RETURN(pipeline::ReplicatePlan plan,
                      pipeline::PlanReplicate(*repo, snap, replica, options));
  PrintInfo("replica " + replica.target + ": " + plan.reason);

  ProgressLine progress(!opts.json);
  options.restore.record_checked = true;
  options.restore.on_progress = [&progress](const pipeline::RestoreProgress& p) {
    progress.Update(FormatBytes(p.bytes_done) + " / " + FormatBytes(p.bytes_total) + " compared");
  };
  Result<pipeline::ReplicateResult> result =
      pipeline::Replicate(*repo, snap, &replica, *opened.sink, options);
  progress.Clear();
  if (!result.ok()) {
    return result.status().WithContext(
        "replicate stopped; the replica is inconsistent until a replicate finishes");
  }
  if (opts.json) {
    std::printf("%s\n", SummaryJson(snap, replica, opened, *result).dump().c_str());
  } else {
    PrintInfo("replica " + replica.target + " is at snapshot " + std::to_string(snap.id) +
              ": wrote " + std::to_string(result->chunks_written) + " of " +
              std::to_string(result->chunks_total) + " chunks (" +
              FormatBytes(result->bytes_written) + ")" +
              (result->bytes_read > 0 ? ", read " + FormatBytes(result->bytes_read) : "") + " in " +
              FormatDuration(result->elapsed));
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
      "(killed, link down) is finished by the next one. A replica with no record (the first\n"
      "run, or after 'repair catalog'), or whose snapshot was forgotten, is read back and\n"
      "compared chunk by chunk; so is any replica with --check, so that one changed behind\n"
      "wanbackup's back is repaired, not trusted. The replica's cache is synchronized before\n"
      "the run counts. A replica must hold the snapshot in whole blocks, and may not be the\n"
      "source of the snapshot or of one running now.\n"
      "\nEXAMPLES:\n"
      "  wanbackup replicate latest --to iscsi://dr-san/iqn.2001-05.com.example:db-standby/1 \\\n"
      "      --repo /backup/db\n"
      "  wanbackup replicate latest --to /dev/vg0/db-standby --repo /backup/db --check\n"
      "  wanbackup replicas --repo /backup/db            # what each replica holds");
  cmd->callback([opts, runner] { *runner = [opts] { return RunReplicate(*opts); }; });
}

}  // namespace wanbackup::cli
