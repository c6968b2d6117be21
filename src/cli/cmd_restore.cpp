// wanbackup restore SNAPSHOT --to PATH|URL: write a snapshot to a file, block device, stdout or
// an iSCSI LUN.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/internal/sink_json.h"
#include "cli/progress.h"
#include "cli/replicate_target.h"
#include "cli/repo_flags.h"
#include "cli/sink_open.h"
#include "cli/source_open.h"
#include "cli/tuning_flags.h"
#include "cli/write_target.h"
#include "common/pacing.h"
#include "common/units.h"
#include "initiator/iscsi_url.h"
#include "pipeline/restorer.h"
#include "repository/snapshot_check.h"

namespace wanbackup::cli {
namespace {

struct RestoreCommandOptions {
  std::string snapshot;
  std::string to;
  bool force = false;
  bool overwrite_source = false;
  bool verify = false;
  bool json = false;
  RepoFlags repo;
  TargetFlags target;
  TuningFlags tuning;
};

// The summary's JSON; a LUN adds what went over the wire.
nlohmann::json SummaryJson(const catalog::SnapshotInfo& snap, const OpenedSink& opened,
                           const pipeline::RestoreResult& result, bool verified) {
  const double secs = std::chrono::duration<double>(result.elapsed).count();
  nlohmann::json j = {{"snapshot", snap.id},
                      {"destination", opened.sink->name()},
                      {"bytes", result.bytes},
                      {"zero_bytes", result.zero_bytes},
                      {"seconds", secs},
                      {"bytes_per_second", secs > 0 ? static_cast<double>(result.bytes) / secs : 0},
                      {"verified", verified}};
  internal::AddLunStats(opened, &j);
  return j;
}

// Reads the destination back (a LUN over the WAN, with the same flags) and checks every chunk.
Status Verify(pipeline::Repository& repo, const catalog::SnapshotInfo& snap,
              const RestoreCommandOptions& opts) {
  if (!initiator::LooksLikeIscsiUrl(opts.to)) return pipeline::CheckRestored(repo, snap, opts.to);
  WB_ASSIGN_OR_RETURN(OpenedSource lun,
                      OpenSource(opts.to, opts.target, opts.tuning, SourceUse::kReadBack));
  return pipeline::CheckRestored(repo, snap, *lun.source);
}

// After a failed restore: what became of the destination, as the end of the error line. A file
// this run created holds only part of the snapshot: it goes, so that nothing half-written stays
// under the asked name. A device or LUN keeps what was written (a replaced file was written
// through a temporary one and is untouched).
std::string LeftBehind(OpenedSink* opened, const std::string& to) {
  struct stat st {};
  if (opened->created) {
    opened->sink.reset();  // a file sink removes the file it created and did not finish
    if (::stat(to.c_str(), &st) != 0 && errno == ENOENT) {
      return "; the partial " + to + " was removed";
    }
  } else if (opened->lun == nullptr && (::stat(to.c_str(), &st) != 0 || !S_ISBLK(st.st_mode))) {
    return "";
  }
  return "; " + to + " is incomplete: do not use it";
}

// Refuses a forbidden destination before it is opened (no byte written, no login), then opens
// it, paced to --limit-rate.
Result<OpenedSink> OpenRestoreSink(const RestoreCommandOptions& opts, pipeline::Repository& repo,
                                   const catalog::SnapshotInfo& snap, uint64_t rate) {
  WriteTarget target;  // "-" too: standard output may be opened on a file (`1<>file`)
  target.to = opts.to;
  target.repo = &repo;
  target.overwrite_source = opts.overwrite_source;
  target.restored_source = snap.source;
  target.credential_files = CredentialFiles(opts.repo, opts.target);
  WB_RETURN_IF_ERROR(RefuseWriteTarget(target));
  WB_ASSIGN_OR_RETURN(OpenedSink opened,
                      OpenSink(opts.to, snap.size_bytes,
                               opts.force ? ExistingFile::kReplace : ExistingFile::kRefuse,
                               opts.target, opts.tuning));
  // A replica known by its LUN's device id, reached through another portal address.
  WB_RETURN_IF_ERROR(RefuseRecordedReplica(repo, opts.to, opened));
  if (rate > 0) {
    opened.tuning_explanation += "; the average held to " + FormatRate(static_cast<double>(rate));
    opened.sink =
        std::make_unique<PacedSink>(std::move(opened.sink), std::make_shared<Pacer>(rate));
  }
  return opened;
}

void PrintRestoreSummary(const RestoreCommandOptions& opts, const catalog::SnapshotInfo& snap,
                         const OpenedSink& opened, const pipeline::RestoreResult& result,
                         bool verified) {
  const double secs = std::chrono::duration<double>(result.elapsed).count();
  if (opts.json) {
    const nlohmann::json j = SummaryJson(snap, opened, result, verified);
    OutputJson(j);  // on standard error when the data goes to standard output
    return;
  }
  PrintInfo("restored snapshot " + std::to_string(snap.id) + " (" + FormatBytes(result.bytes) +
            ") to " + opened.sink->name() + " in " + FormatDuration(result.elapsed) + " (" +
            FormatRate(secs > 0 ? static_cast<double>(result.bytes) / secs : 0) + ")" +
            (verified ? "; read back and verified" : ""));
}

Status RunRestore(const RestoreCommandOptions& opts) {
  if (opts.to == "-") JsonStream() = stderr;  // standard output carries the data
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo snap, ResolveSnapshot(*repo, opts.snapshot));
  if (opts.verify && opts.to == "-") {
    return Status::InvalidArgument("--verify needs a file or device to read back, not stdout");
  }
  // Before the destination is even opened: the catalog must agree with the sealed record.
  WB_RETURN_IF_ERROR(pipeline::CheckSnapshotAgainstRecord(*repo, snap, true));
  WB_ASSIGN_OR_RETURN(const uint64_t rate, LimitRate(opts.tuning));  // before any login
  WB_ASSIGN_OR_RETURN(OpenedSink opened, OpenRestoreSink(opts, *repo, snap, rate));
  BlockSink* sink = opened.sink.get();
  if (opened.lun != nullptr)
    PrintInfo("writing " + sink->name() + ": " + opened.tuning_explanation);

  ProgressLine progress(!opts.json && opts.to != "-");
  pipeline::RestoreOptions options;
  options.record_checked = true;
  options.on_progress = [&progress](const pipeline::RestoreProgress& p) {
    const double s = std::chrono::duration<double>(p.elapsed).count();
    progress.Update(FormatBytes(p.bytes_done) + " / " + FormatBytes(p.bytes_total) + "  " +
                    FormatRate(s > 0 ? static_cast<double>(p.bytes_done) / s : 0));
  };
  Result<pipeline::RestoreResult> result = pipeline::RestoreSnapshot(*repo, snap, *sink, options);
  progress.Clear();
  if (!result.ok()) {
    return result.status().WithContext("restore stopped").WithSuffix(LeftBehind(&opened, opts.to));
  }
  bool verified = false;
  if (opts.verify) {
    WB_RETURN_IF_ERROR(Verify(*repo, snap, opts));
    verified = true;
  }
  PrintRestoreSummary(opts, snap, opened, *result, verified);
  return Status::Ok();
}

}  // namespace

void RegisterRestore(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<RestoreCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("restore", "Write a snapshot to a file, block device, stdout or LUN");
  cmd->add_option("snapshot", opts->snapshot, "snapshot number, or 'latest'")->required();
  cmd->add_option("--to", opts->to,
                  "a new file (sparse), a block device (not mounted, large "
                  "enough), - for stdout, or iscsi://host[:port]/target-iqn/lun")
      ->required();
  cmd->add_flag("--force", opts->force, "overwrite an existing file");
  cmd->add_flag("--overwrite-source", opts->overwrite_source,
                "write over the restored snapshot's own source (roll that disk back)");
  cmd->add_flag("--verify", opts->verify,
                "read the result back (a LUN through the WAN) and check every chunk");
  cmd->add_flag("--json", opts->json, "print a JSON summary");
  AddRepoFlags(cmd, &opts->repo);
  AddTuningFlags(cmd, &opts->tuning);
  AddLimitRateFlag(cmd, &opts->tuning);
  AddTargetFlags(cmd, &opts->target);
  cmd->footer(
      "\nEvery chunk is authenticated and checked against its digest before it is written; a\n"
      "damaged chunk stops the restore and names its range. The destination is flushed (fsync)\n"
      "before success. All-zero chunks become holes in a new file and zeros on a device.\n"
      "\nWRITE TARGETS:\n"
      "  Refused before anything is opened, whatever the name (symlinks, hard links, ./ and ..\n"
      "  resolve to what they are): a file or directory of the repository or of any other\n"
      "  (a directory holding config.json and packs/), or the device that holds it; the\n"
      "  source of a snapshot in the repository (--overwrite-source allows the restored\n"
      "  snapshot's own source, to roll that disk back; one running now never); a replica\n"
      "  this repository records ('wanbackup replicas'): bring that to a snapshot with\n"
      "  'wanbackup replicate', which writes only the chunks that differ. A LUN is known by\n"
      "  target IQN, LUN and the portal host's addresses. Standard output (--to -) opened on\n"
      "  a file or device is checked as that file. A symlink another user could have planted\n"
      "  (theirs, in a directory others can write) is not followed, --force or not.\n"
      "\nTO AN iSCSI LUN:\n"
      "  The LUN must hold the snapshot in whole blocks, or nothing is written. Many WRITEs are\n"
      "  in flight over several connections, sized from what the login negotiated (with\n"
      "  InitialR2T=Yes each burst waits for an R2T round trip); a WRITE counts only when the\n"
      "  target acknowledged it, and SYNCHRONIZE CACHE ends the restore. All-zero chunks go as\n"
      "  WRITE SAME (no data on the wire; UNMAP on a thin LUN that reads unmapped blocks as\n"
      "  zeros), or as WRITEs when the target refuses it.\n" +
      WriteTuneHelp() +
      "\nEXAMPLES:\n"
      "  wanbackup restore latest --to /srv/images/db.img --repo /backup/db --verify\n"
      "  wanbackup restore 12 --to /dev/vg0/db-restored --repo /backup/db\n"
      "  wanbackup restore latest --to iscsi://dr-san/iqn.2001-05.com.example:db/1 --repo "
      "/backup/db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunRestore(*opts); }; });
}

}  // namespace wanbackup::cli
