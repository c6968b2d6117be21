// wanbackup copy SRC DST: the initiator end to end, without a repository (LUN or file to file,
// device, stdout or LUN).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/copy_credentials.h"
#include "cli/internal/json_text.h"
#include "cli/internal/sink_json.h"
#include "cli/progress.h"
#include "cli/sink_open.h"
#include "cli/source_open.h"
#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "cli/write_target.h"
#include "common/units.h"
#include "initiator/autotune.h"
#include "initiator/iscsi_url.h"
#include "pipeline/copier.h"

namespace wanbackup::cli {
namespace {

struct CopyCommandOptions {
  std::string source;
  std::string destination;
  bool force = false;
  bool json = false;
  bool no_sparse = false;
  std::string offset = "0";
  std::string length;
  std::string progress = "auto";
  std::string progress_interval;
  CopyCredentialFlags credentials;  // the iSCSI flags, with the per-end CHAP secrets
  TuningFlags tuning;
};

std::string ProgressText(const pipeline::CopyProgress& p) {
  const double seconds = std::chrono::duration<double>(p.elapsed).count();
  const double rate = seconds > 0 ? static_cast<double>(p.bytes_done) / seconds : 0;
  std::string text = FormatBytes(p.bytes_done) + " / " + FormatBytes(p.bytes_total);
  char pct[16];
  std::snprintf(pct, sizeof pct, " %3.0f%%",
                p.bytes_total
                    ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                    : 100.0);
  text += pct;
  text += "  " + FormatRate(rate);
  if (rate > 0 && p.bytes_done < p.bytes_total) {
    const auto eta = std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(p.bytes_total - p.bytes_done) / rate * 1e9));
    text += "  ETA " + FormatDuration(eta);
  }
  text += "  in flight " + FormatBytes(p.source.bytes_in_flight);
  if (p.source.rtt.count() > 0) {
    text +=
        "  " + std::to_string(p.source.connections) + " conn  RTT " + FormatDuration(p.source.rtt);
  }
  if (p.source.retries > 0) text += "  retries " + std::to_string(p.source.retries);
  return text;
}

// The copy's range and memory from the flags (the progress settings come later).
Result<pipeline::CopyOptions> CopyOptionsFrom(const CopyCommandOptions& opts) {
  pipeline::CopyOptions copy;
  WB_ASSIGN_OR_RETURN(copy.offset, ParseSize(opts.offset));
  if (!opts.length.empty()) {
    WB_ASSIGN_OR_RETURN(copy.length, ParseSize(opts.length));
    if (copy.length == 0) return Status::InvalidArgument("--length must be more than 0");
  }
  WB_ASSIGN_OR_RETURN(const uint64_t max_memory, ParseSize(opts.tuning.max_memory));
  copy.max_memory = initiator::BufferBudget(max_memory);
  copy.sparse = !opts.no_sparse;
  return copy;
}

// AlreadyExists unless the LUN `url` holds no data that the copy would destroy: its first and
// last MiB (where partition tables, filesystem and LVM labels live) read as zeros. Asked before
// the LUN is opened for writing, with the destination's login.
Status RefuseLunWithData(const std::string& url, const TargetFlags& target,
                         const TuningFlags& tuning) {
  constexpr uint64_t kEdge = 1 << 20;
  WB_ASSIGN_OR_RETURN(OpenedSource lun, OpenSource(url, target, tuning, SourceUse::kReadBack));
  BlockSource& source = *lun.source;
  const uint64_t size = source.geometry().size_bytes;
  const uint64_t edge = std::min(size, kEdge);
  if (edge == 0) return Status::Ok();
  std::vector<uint8_t> head(edge), tail(edge);
  WB_RETURN_IF_ERROR(source.Submit(ReadRequest{0, edge, head.data(), 0}));
  WB_RETURN_IF_ERROR(source.Submit(ReadRequest{size - edge, edge, tail.data(), 1}));
  for (int i = 0; i < 2; ++i) {
    WB_ASSIGN_OR_RETURN(ReadCompletion done, source.Wait());
    WB_RETURN_IF_ERROR(done.status);
  }
  auto zero = [](const std::vector<uint8_t>& b) {
    return std::all_of(b.begin(), b.end(), [](uint8_t c) { return c == 0; });
  };
  if (zero(head) && zero(tail)) return Status::Ok();
  return Status::AlreadyExists(source.geometry().name +
                               " holds data (its first or last MiB is not zeros); --force "
                               "overwrites it. Nothing was written");
}

// A LUN's failure names its end ("source: CHAP authentication failed ..."), so a login
// failure says which end's credentials to look at; a file's message already names the file.
Status InEnd(const char* end, const std::string& spec, const Status& status) {
  // A bad flag (InvalidArgument) is refused before any login and needs no end.
  const bool names_end =
      initiator::LooksLikeIscsiUrl(spec) && status.code() != StatusCode::kInvalidArgument;
  return names_end ? status.WithContext(end) : status;
}

// The summary: one JSON object (on stderr when the data went to stdout) or one line.
void PrintSummary(const CopyCommandOptions& opts, const std::string& source_name,
                  const OpenedSink& sink, const pipeline::CopyResult& r) {
  const std::string& sink_name = sink.sink->name();
  const double seconds = std::chrono::duration<double>(r.elapsed).count();
  const double rate = seconds > 0 ? static_cast<double>(r.bytes) / seconds : 0;
  const double steady_seconds = std::chrono::duration<double>(r.steady_elapsed).count();
  const double steady_rate =
      steady_seconds > 0 ? static_cast<double>(r.steady_bytes) / steady_seconds : 0;
  const uint64_t rss = PeakRssBytes();
  if (opts.json) {
    nlohmann::json j = {{"source", source_name},
                        {"destination", sink_name},
                        {"bytes", r.bytes},
                        {"seconds", seconds},
                        {"bytes_per_second", rate},
                        // From 10 % to 90 % of the bytes: without start-up and tail.
                        {"steady_bytes_per_second", steady_rate},
                        {"zero_bytes_skipped", r.zero_bytes_skipped},
                        {"bytes_read", r.source.bytes_read},
                        {"bytes_deallocated", r.bytes_deallocated},
                        {"connections", r.source.peak_connections},
                        {"queue_depth", r.source.queue_depth},
                        {"io_size", r.source.io_size},
                        {"rtt_ms", std::chrono::duration<double, std::milli>(r.source.rtt).count()},
                        {"retries", r.source.retries},
                        {"reconnects", r.source.reconnects},
                        {"peak_buffer_bytes", r.peak_buffer_bytes},
                        {"max_rss_bytes", rss}};
    internal::AddLunStats(sink, &j);  // a LUN destination: what went over the wire
    OutputJson(j);                    // on standard error when the data goes to standard output
    return;
  }
  std::string line = "copied " + FormatBytes(r.bytes) + " in " + FormatDuration(r.elapsed) + " (" +
                     FormatRate(rate) + ") from " + source_name + " to " + sink_name;
  if (r.source.rtt.count() > 0) {
    line += "; " + std::to_string(r.source.peak_connections) + " connections x " +
            std::to_string(r.source.queue_depth) + " READs x " + FormatBytes(r.source.io_size) +
            ", RTT " + FormatDuration(r.source.rtt) + ", " + std::to_string(r.source.retries) +
            " retries, " + std::to_string(r.source.reconnects) + " reconnects";
  }
  if (r.bytes_deallocated > 0) {
    line += "; " + FormatBytes(r.bytes_deallocated) + " deallocated on the LUN, not read";
  }
  line += "; peak memory " + FormatBytes(rss);
  PrintInfo(line);
}

Status RunCopy(const CopyCommandOptions& opts) {
  if (opts.destination == "-") JsonStream() = stderr;  // standard output carries the data
  WB_ASSIGN_OR_RETURN(pipeline::CopyOptions copy, CopyOptionsFrom(opts));
  {  // before either end is opened; "-" too (standard output may be opened on a file)
    WriteTarget target;
    target.to = opts.destination;
    target.copy_source = opts.source;
    target.credential_files = {opts.credentials.source_chap_secret_file,
                               opts.credentials.destination_chap_secret_file};
    for (const std::string& file : CredentialFiles(RepoFlags{}, opts.credentials.shared))
      target.credential_files.push_back(file);
    WB_RETURN_IF_ERROR(RefuseWriteTarget(target));
  }
  // Which end gets which CHAP secret (copy_credentials.h), decided before either end is opened.
  WB_ASSIGN_OR_RETURN(const CopyEndFlags ends,
                      ResolveCopyCredentials(opts.source, opts.destination, opts.credentials));
  Result<OpenedSource> opened_source = OpenSource(opts.source, ends.source, opts.tuning);
  if (!opened_source.ok()) return InEnd("source", opts.source, opened_source.status());
  OpenedSource opened = std::move(*opened_source);
  BlockSource& source = *opened.source;
  const uint64_t size = source.geometry().size_bytes;
  if (copy.offset >= size) {
    return Status::InvalidArgument("--offset " + opts.offset + " is beyond the end of " +
                                   source.geometry().name + " (" + FormatBytes(size) + ")");
  }
  const uint64_t total =
      copy.length == 0 ? size - copy.offset : std::min(copy.length, size - copy.offset);
  const TargetFlags& sink_flags = ends.destination;
  if (!opts.force && initiator::LooksLikeIscsiUrl(opts.destination)) {
    const Status empty = RefuseLunWithData(opts.destination, sink_flags, opts.tuning);
    if (!empty.ok()) return InEnd("destination", opts.destination, empty);
  }
  Result<OpenedSink> opened_sink =
      OpenSink(opts.destination, total, opts.force ? ExistingFile::kReplace : ExistingFile::kRefuse,
               sink_flags, opts.tuning);
  if (!opened_sink.ok()) return InEnd("destination", opts.destination, opened_sink.status());
  OpenedSink out = std::move(*opened_sink);
  BlockSink* sink = out.sink.get();
  if (opened.remote)
    PrintInfo("reading " + source.geometry().name + ": " + opened.tuning_explanation);
  if (out.lun != nullptr) PrintInfo("writing " + sink->name() + ": " + out.tuning_explanation);

  WB_ASSIGN_OR_RETURN(
      ProgressChoice shown,
      ParseProgressFlags(opts.progress, opts.progress_interval, copy.progress_interval));
  copy.progress_interval = shown.interval;
  ProgressLine progress(!opts.json || shown.mode == ProgressMode::kPlain, shown.mode);
  copy.on_progress = [&progress](const pipeline::CopyProgress& p) {
    progress.Update(ProgressText(p));
  };
  Result<pipeline::CopyResult> result = pipeline::Copy(source, *sink, copy);
  progress.Clear();
  if (!result.ok()) return result.status();
  PrintSummary(opts, source.geometry().name, out, *result);
  return Status::Ok();
}

std::string CopyFooter() {
  return AutotuneHelp() + WriteTuneHelp() +
         "\nOUTPUT:\n"
         "  On a terminal a progress line shows bytes, rate, ETA, data in flight, connections and\n"
         "  RTT; otherwise one summary line is printed at the end (nothing with --quiet). A new\n"
         "  file is written sparse and flushed (fsync) before the command succeeds.\n"
         "  To an iSCSI LUN: the LUN must hold the data in whole blocks, or nothing is written;\n"
         "  every WRITE counts once the target acknowledged it, and SYNCHRONIZE CACHE ends the "
         "copy.\n"
         "  A LUN whose first or last MiB is not zeros holds data: refused unless --force.\n"
         "  The destination is never the source, by identity (symlinks, hard links, a LUN's\n"
         "  IQN, LUN and host address), nor a file of a wanbackup repository (a directory\n"
         "  holding config.json and packs/), nor reached through a symlink another user could\n"
         "  have planted; that is checked before either end is opened. '-' opened on a file\n"
         "  is checked as that file.\n"
         "\nCHAP:\n"
         "  With a LUN at both ends each URL names its own user (iscsi://user@host/...), and\n"
         "  --source-chap-secret-file / --destination-chap-secret-file give each end its secret;\n"
         "  an end whose URL names no user logs in without CHAP. --chap-secret-file still serves\n"
         "  the one end whose URL names a user; with users at both ends it is refused (use the\n"
         "  per-end flags). The mutual CHAP flags serve the one end whose URL names a user, and\n"
         "  are refused with users at both ends. --chap-user names the user of both ends.\n"
         "\nEXAMPLES:\n"
         "  wanbackup copy iscsi://san/iqn.2001-05.com.example:db/1 db.img\n"
         "  wanbackup copy db.img iscsi://dr-san/iqn.2001-05.com.example:db/1\n"
         "  wanbackup copy iscsi://alice@san/iqn.2001-05.com.example:db/1 \\\n"
         "      iscsi://bob@dr-san/iqn.2001-05.com.example:db/1 --force \\\n"
         "      --source-chap-secret-file /etc/wanbackup/san.secret \\\n"
         "      --destination-chap-secret-file /etc/wanbackup/dr-san.secret\n"
         "  wanbackup copy iscsi://san/iqn.2001-05.com.example:db/1 /dev/null --json\n"
         "  wanbackup copy iscsi://san/iqn.2001-05.com.example:db/1 - | zstd > db.img.zst\n"
         "  wanbackup copy --paper-baseline --length 64M iscsi://far/iqn.x:db/1 /dev/null";
}

}  // namespace

void RegisterCopy(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<CopyCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("copy", "Copy a LUN or device to a file, device, stdout or LUN");
  cmd->add_option("source", opts->source, "iscsi://host[:port]/target-iqn/lun, or a file/device")
      ->required();
  cmd->add_option("destination", opts->destination,
                  "a file (created; sparse), a block device, /dev/null, - for stdout, or "
                  "iscsi://host[:port]/target-iqn/lun")
      ->required();
  cmd->add_flag("--force", opts->force,
                "overwrite an existing destination file, or a LUN that holds data");
  cmd->add_option("--offset", opts->offset, "start this many bytes into the source")
      ->capture_default_str();
  cmd->add_option("--length", opts->length, "copy only this many bytes (default: to the end)");
  cmd->add_flag("--no-sparse", opts->no_sparse,
                "write zeros instead of leaving holes in a new file");
  cmd->add_option("--progress", opts->progress,
                  "auto: a live line on a terminal; plain: a timestamped line every "
                  "--progress-interval (for logs); none")
      ->check(CLI::IsMember({"auto", "plain", "none"}))
      ->capture_default_str();
  cmd->add_option("--progress-interval", opts->progress_interval,
                  "time between progress updates (default 0.5s on a terminal, 10s plain)");
  cmd->add_flag("--json", opts->json,
                "print a JSON summary (on stderr when the data goes to stdout)");
  AddTuningFlags(cmd, &opts->tuning);
  AddLimitRateFlag(cmd, &opts->tuning);
  AddTargetFlags(cmd, &opts->credentials.shared);
  cmd->add_option("--source-chap-secret-file", opts->credentials.source_chap_secret_file,
                  "with a LUN at both ends: the CHAP secret of the user the source URL names")
      ->group("iSCSI connection");
  cmd->add_option("--destination-chap-secret-file", opts->credentials.destination_chap_secret_file,
                  "with a LUN at both ends: the CHAP secret of the user the destination URL names")
      ->group("iSCSI connection");
  cmd->footer(CopyFooter());
  cmd->callback([opts, runner] { *runner = [opts] { return RunCopy(*opts); }; });
}

}  // namespace wanbackup::cli
