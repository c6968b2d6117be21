// wanbackup snapshots: list what the repository holds.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/repo_flags.h"
#include "common/text.h"
#include "common/units.h"
#include "repository/repo_lock.h"
#include "repository/snapshot_check.h"

namespace wanbackup::cli {
namespace {

struct SnapshotsCommandOptions {
  RepoFlags repo;
  bool json = false;
  bool all = false;
};

// `writer_running`: a snapshot marked running is only running while a writer holds the lock; the
// next writer marks one that was killed as failed, and until then it is shown as such.
const char* StatusText(catalog::SnapshotStatus s, bool writer_running) {
  switch (s) {
    case catalog::SnapshotStatus::kComplete:
      return "complete";
    case catalog::SnapshotStatus::kRunning:
      return writer_running ? "running" : "interrupted";
    case catalog::SnapshotStatus::kFailed:
      return "interrupted";
  }
  return "?";
}

void PrintSnapshotsJson(const std::vector<catalog::SnapshotInfo>& list, bool writer_running) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : list) {
    const bool finished = s.finished_unix_ms != 0;
    const double secs = static_cast<double>(s.finished_unix_ms - s.started_unix_ms) / 1e3;
    out.push_back(
        {{"id", s.id},
         {"status", StatusText(s.status, writer_running)},
         {"source", s.source},
         {"tag", s.tag},
         {"hostname", s.hostname},
         {"started_unix_ms", s.started_unix_ms},
         {"finished_unix_ms",
          finished ? nlohmann::json(s.finished_unix_ms) : nlohmann::json(nullptr)},
         {"size_bytes", s.size_bytes},
         {"block_size", s.block_size},
         {"chunk_size", s.chunk_size},
         {"bytes_new", s.bytes_new},
         {"bytes_stored", s.bytes_stored},
         {"chunks_total", s.chunks_total},
         {"chunks_new", s.chunks_new},
         {"chunks_zero", s.chunks_zero},
         {"seconds", finished ? nlohmann::json(secs) : nlohmann::json(nullptr)},
         {"bytes_per_second", !finished  ? nlohmann::json(nullptr)
                              : secs > 0 ? nlohmann::json(static_cast<double>(s.size_bytes) / secs)
                                         : nlohmann::json(0.0)}});
  }
  OutputJson(out, 2);
}

void PrintSnapshotsTable(const std::vector<catalog::SnapshotInfo>& list, bool writer_running) {
  size_t tag_width = 8;  // the TAG column is as wide as the longest tag, in characters
  for (const auto& s : list)
    tag_width = std::max(tag_width, CodePoints(EscapeForTerminal(s.tag)));
  std::printf("%-5s %-19s %-11s %-11s %-11s %-11s %-11s %-11s %s %s\n", "ID", "STARTED", "SIZE",
              "NEW", "STORED", "DURATION", "STATUS", "RATE", PadRight("TAG", tag_width).c_str(),
              "SOURCE");
  for (const auto& s : list) {
    const auto duration =
        std::chrono::milliseconds(std::max<int64_t>(0, s.finished_unix_ms - s.started_unix_ms));
    const double secs = static_cast<double>(duration.count()) / 1e3;
    const bool done = s.status == catalog::SnapshotStatus::kComplete;
    std::printf(
        "%-5lld %-19s %-11s %-11s %-11s %-11s %-11s %-11s %s %s\n", static_cast<long long>(s.id),
        LocalTime(s.started_unix_ms).c_str(), FormatBytes(s.size_bytes).c_str(),
        done ? FormatBytes(s.bytes_new).c_str() : "-",
        done ? FormatBytes(s.bytes_stored).c_str() : "-",
        done ? FormatDuration(duration).c_str() : "-", StatusText(s.status, writer_running),
        done && secs > 0 ? FormatRate(static_cast<double>(s.size_bytes) / secs).c_str() : "-",
        PadRight(s.tag.empty() ? "-" : EscapeForTerminal(s.tag), tag_width).c_str(),
        EscapeForTerminal(s.source).c_str());
  }
}

Status RunSnapshots(const SnapshotsCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo, OpenRepository(opts.repo, pipeline::OpenMode::kRead));
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> list, repo->catalog().Snapshots(opts.all));
  // Times and tags as the key sealed them: a listing is what an operator picks a snapshot to
  // restore or forget by (round 10, AA3: a storage writer's rows were shown as they were).
  std::vector<catalog::SnapshotInfo> complete;
  std::copy_if(list.begin(), list.end(), std::back_inserter(complete),
               [](const catalog::SnapshotInfo& s) {
                 return s.status == catalog::SnapshotStatus::kComplete;
               });
  std::vector<std::string> unreadable;  // listed all the same: the damage is verify's to report
  WB_RETURN_IF_ERROR(pipeline::CheckRowsMatchRecords(*repo, complete, &unreadable));
  for (const std::string& damage : unreadable)
    PrintWarning(damage + " ('wanbackup verify' says what is damaged)");
  const bool any_running = std::any_of(list.begin(), list.end(), [](const auto& s) {
    return s.status == catalog::SnapshotStatus::kRunning;
  });
  const bool writer_running = any_running && pipeline::WriterRunning(repo->path());
  if (opts.json) {
    PrintSnapshotsJson(list, writer_running);
  } else if (list.empty()) {
    std::printf("no snapshots in %s\n", repo->path().c_str());
  } else {
    PrintSnapshotsTable(list, writer_running);
  }
  return Status::Ok();
}

}  // namespace

void RegisterSnapshots(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<SnapshotsCommandOptions>();
  CLI::App* cmd = app.add_subcommand("snapshots", "List the snapshots in the repository");
  AddRepoFlags(cmd, &opts->repo);
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("--all", opts->all, "also list interrupted runs");
  cmd->footer(
      "\nNEW is data no earlier snapshot had (before compression); STORED is what it\n"
      "added to the repository (compressed, encrypted).");
  cmd->callback([opts, runner] { *runner = [opts] { return RunSnapshots(*opts); }; });
}

}  // namespace wanbackup::cli
