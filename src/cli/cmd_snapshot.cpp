// wanbackup snapshot SOURCE: read a LUN or device into the repository.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/progress.h"
#include "cli/repo_flags.h"
#include "cli/snapshot_source.h"
#include "common/units.h"
#include "initiator/autotune.h"
#include "pipeline/snapshotter.h"
#include "store/s3_url.h"

namespace wanbackup::cli {
namespace {

struct SnapshotCommandOptions {
  std::string source;
  std::string tag;
  bool json = false;
  std::string progress = "auto";
  std::string progress_interval;
  std::string checkpoint_interval;  // "": the store's default
  std::string checkpoint_bytes;
  std::string upload_memory;
  RepoFlags repo;
  TargetFlags target;
  TuningFlags tuning;
};

// A stall this long is named on the progress line (the engine retries well before).
constexpr std::chrono::seconds kQuietShown{5};

std::string ProgressText(const pipeline::SnapshotProgress& p) {
  const double s = Seconds(p.elapsed);
  const double rate = s > 0 ? static_cast<double>(p.bytes_done) / s : 0;
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%",
                p.bytes_total
                    ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                    : 100.0);
  const double stored_rate = s > 0 ? static_cast<double>(p.bytes_stored) / s : 0;
  // Dedup: bytes read per byte that was new (zero chunks count as deduplicated); compression:
  // new bytes per byte stored.
  auto ratio = [](uint64_t a, uint64_t b) {
    char buf[32];
    if (b == 0) return std::string("-");
    std::snprintf(buf, sizeof buf, "%.1fx", static_cast<double>(a) / static_cast<double>(b));
    return std::string(buf);
  };
  std::string text = FormatBytes(p.bytes_done) + " / " + FormatBytes(p.bytes_total) + " " + pct +
                     "  read " + FormatRate(rate) + "  stored " + FormatRate(stored_rate) +
                     "  dedup " + ratio(p.bytes_done, p.bytes_new) + "  compression " +
                     ratio(p.bytes_new, p.bytes_stored);
  if (rate > 0 && p.bytes_done < p.bytes_total) {
    text += "  ETA " + FormatDuration(std::chrono::nanoseconds(static_cast<int64_t>(
                           static_cast<double>(p.bytes_total - p.bytes_done) / rate * 1e9)));
  }
  if (p.source.rtt.count() > 0) {
    text +=
        "  " + std::to_string(p.source.connections) + " conn  RTT " + FormatDuration(p.source.rtt);
  }
  if (p.quiet >= kQuietShown && p.bytes_done < p.bytes_total) {
    text +=
        "  stalled: no data for " + FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(
                                        p.quiet));  // a link down: retrying up to --retry-timeout
  }
  if (p.source.retries > 0 || p.source.reconnects > 0) {
    text += "  retries " + std::to_string(p.source.retries) + "  reconnects " +
            std::to_string(p.source.reconnects);
  }
  return text;
}

// The summary: one JSON object or one line (and a note about interrupted runs it closed).
void PrintSummary(const pipeline::SnapshotResult& r, bool json) {
  const catalog::SnapshotInfo& i = r.info;
  const double secs = Seconds(r.elapsed);
  if (r.abandoned_runs > 0) {
    PrintInfo("closed " + std::to_string(r.abandoned_runs) +
              " interrupted earlier run(s); their stored chunks were reused");
  }
  if (json) {
    nlohmann::json j = {
        {"snapshot", i.id},
        {"source", i.source},
        {"tag", i.tag},
        {"size_bytes", i.size_bytes},
        {"block_size", i.block_size},
        {"chunk_size", i.chunk_size},
        {"seconds", secs},
        {"bytes_per_second", secs > 0 ? static_cast<double>(i.size_bytes) / secs : 0},
        {"bytes_read", i.bytes_read},
        {"bytes_deallocated", r.bytes_deallocated},
        {"bytes_new", i.bytes_new},
        {"bytes_stored", i.bytes_stored},
        {"chunks_total", i.chunks_total},
        {"chunks_new", i.chunks_new},
        {"chunks_zero", i.chunks_zero},
        {"abandoned_runs", r.abandoned_runs},
        {"connections", r.source.peak_connections},
        {"max_rss_bytes", PeakRssBytes()},
        {"peak_upload_bytes", r.peak_upload_bytes},
        {"cpu_seconds",
         {{"zero", r.stages.zero},
          {"digest", r.stages.digest},
          {"dedup", r.stages.dedup},
          {"compress", r.stages.compress},
          {"encrypt", r.stages.encrypt},
          {"write", r.stages.write},
          {"catalog", r.stages.catalog}}}};
    OutputJson(j);
  } else {
    PrintInfo("snapshot " + std::to_string(i.id) + " of " + i.source + ": " +
              FormatBytes(i.size_bytes) + " in " + FormatDuration(r.elapsed) + " (" +
              FormatRate(secs > 0 ? static_cast<double>(i.size_bytes) / secs : 0) + "); " +
              FormatBytes(i.bytes_new) + " new, stored as " + FormatBytes(i.bytes_stored) + "; " +
              std::to_string(i.chunks_total) + " chunks: " + std::to_string(i.chunks_new) +
              " new, " + std::to_string(i.chunks_zero) + " all-zero, " +
              std::to_string(i.chunks_total - i.chunks_new - i.chunks_zero) + " already stored" +
              (r.bytes_deallocated > 0
                   ? "; " + FormatBytes(r.bytes_deallocated) + " deallocated on the LUN, not read"
                   : ""));
  }
}

Status RunSnapshot(const SnapshotCommandOptions& opts) {
  SnapshotRequest request;
  request.source = opts.source;
  request.tag = opts.tag;
  request.target = opts.target;
  request.tuning = opts.tuning;
  request.checkpoint_interval = opts.checkpoint_interval;
  request.checkpoint_bytes = opts.checkpoint_bytes;
  request.upload_memory = opts.upload_memory;
  // A mistyped flag exits 2 before the repository's lock is waited for and the source logged in.
  WB_RETURN_IF_ERROR(CheckSnapshotFlags(request));
  if (!opts.upload_memory.empty()) {
    // The URL says which kind of repository it is (an s3: prefix); a missing one is
    // OpenRepository's to report.
    const Result<std::string> path = RepoPath(opts.repo);
    if (path.ok() && !pipeline::IsS3Url(*path)) {
      return Status::InvalidArgument("--upload-memory is for a repository on S3; " + *path +
                                     " is a directory, where each pack is written as it fills");
    }
  }
  WB_ASSIGN_OR_RETURN(
      ProgressChoice shown,
      ParseProgressFlags(opts.progress, opts.progress_interval, request.progress_interval));
  request.progress_interval = shown.interval;
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kWrite));
  ProgressLine progress(!opts.json || shown.mode == ProgressMode::kPlain, shown.mode);
  request.on_progress = [&progress](const pipeline::SnapshotProgress& p) {
    progress.Update(ProgressText(p));
  };
  Result<pipeline::SnapshotResult> result = SnapshotSource(*repo, request);
  progress.Clear();
  if (!result.ok()) {
    if (result.status().code() == StatusCode::kCancelled) {
      return Status::Cancelled(
          "snapshot interrupted; what was stored is kept, and the next "
          "snapshot reuses it");
    }
    return result.status();
  }
  PrintSummary(*result, opts.json);
  return Status::Ok();
}

}  // namespace

void RegisterSnapshot(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<SnapshotCommandOptions>();
  CLI::App* cmd = app.add_subcommand("snapshot", "Read a LUN or device into the repository");
  cmd->add_option("source", opts->source,
                  "iscsi://[user@]host[:port]/target-iqn/lun, or a file/device")
      ->required();
  cmd->add_option("--tag", opts->tag,
                  "a label for this snapshot (printable UTF-8, at most 256 bytes; not '.', '..', "
                  "'latest' or all digits, no '/': mount shows it as a name); 'forget "
                  "--keep-tag' keeps snapshots by it")
      ->check([](const std::string& tag) { return pipeline::CheckTag(tag).message(); });
  cmd->add_option("--progress", opts->progress, "auto, plain (timestamped lines), or none")
      ->check(CLI::IsMember({"auto", "plain", "none"}))
      ->capture_default_str();
  cmd->add_option("--progress-interval", opts->progress_interval,
                  "time between progress updates (default 0.5s on a terminal, 10s plain)");
  cmd->add_option("--checkpoint-interval", opts->checkpoint_interval,
                  "make what was stored durable at least this often; an interrupted run loses "
                  "at most this much work (default 10s; 60s on S3, where each checkpoint waits "
                  "for every upload in flight)");
  cmd->add_option("--checkpoint-bytes", opts->checkpoint_bytes,
                  "... and whenever this much has been stored since the last checkpoint "
                  "(default 256M; 4G on S3)");
  cmd->add_option("--upload-memory", opts->upload_memory,
                  "S3 repositories: full packs (64 MiB each) uploading in the background at "
                  "once, each held in memory until it is up, on top of --max-memory (default "
                  "512M: 8 packs, 32 parts of 16 MiB in flight; one pack whatever it says). More "
                  "keeps more PUTs going on a long, fast link; less bounds memory");
  cmd->add_flag("--json", opts->json, "print a JSON summary");
  AddRepoFlags(cmd, &opts->repo);
  AddTuningFlags(cmd, &opts->tuning);
  AddLimitRateFlag(cmd, &opts->tuning);
  AddTargetFlags(cmd, &opts->target);
  cmd->footer(
      AutotuneHelp() +
      "\nThe source is cut into the repository's fixed chunks (LBA-aligned). All-zero chunks\n"
      "are stored as nothing, chunks the repository already holds are not stored again, the\n"
      "rest is compressed and encrypted into pack files. The snapshot appears only once\n"
      "complete; an interrupted run keeps what it stored, and the next one reuses it.\n"
      "\nEXAMPLES:\n"
      "  wanbackup snapshot iscsi://san/iqn.2001-05.com.example:db/1 --repo /backup/db\n"
      "  wanbackup snapshot /dev/vg0/db --repo /backup/db --tag nightly --json");
  cmd->callback([opts, runner] { *runner = [opts] { return RunSnapshot(*opts); }; });
}

}  // namespace wanbackup::cli
