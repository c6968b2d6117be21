#include "jobs/metrics_textfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "common/atomic_file.h"
#include "common/safe_path.h"

namespace wanbackup::jobs {
namespace {

struct Metric {
  const char* name;
  const char* help;
};
constexpr Metric kMetrics[] = {
    {"wanbackup_job_last_run_timestamp_seconds", "When the job's last run started."},
    {"wanbackup_job_last_success_timestamp_seconds", "When the job last finished without error."},
    {"wanbackup_job_last_duration_seconds", "How long the job's last run took."},
    {"wanbackup_job_last_bytes", "Bytes the job's last run read from its source."},
    {"wanbackup_job_last_failed", "1 when the job's last run failed or was interrupted."},
};

// metric -> job -> value, from an existing file (lines we do not understand are dropped).
using Samples = std::map<std::string, std::map<std::string, std::string>>;

// A symlink or other non-file at `path` is read as empty (and replaced): what it points to is
// never read, so a planted link cannot copy a root-only file into the world-readable textfile.
// A file another user owns (planted first in a shared directory) is not read either: its lines
// could claim successes of other jobs and silence their alerts.
Samples ReadSamples(const ResolvedPath& file) {
  Samples samples;
  struct stat st {};
  if (::fstatat(file.dir.get(), file.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      (st.st_uid != 0 && st.st_uid != ::geteuid())) {
    return samples;
  }
  std::string content;
  if (!ReadRegularFileNoFollowAt(file.dir.get(), file.name, file.path(), &content).ok()) {
    return samples;
  }
  std::istringstream in(content);
  std::string line;
  while (std::getline(in, line)) {
    const size_t open = line.find("{job=\"");
    const size_t close = line.find("\"} ");
    if (line.empty() || line[0] == '#' || open == std::string::npos || close == std::string::npos ||
        close < open) {
      continue;
    }
    samples[line.substr(0, open)][line.substr(open + 6, close - open - 6)] = line.substr(close + 3);
  }
  return samples;
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

Status CheckMetricsTextfile(const std::string& path) {
  return ResolveForWriting(path, PathPolicy::kTrusted, LastLink::kKeep).status();
}

Status WriteJobMetrics(const std::string& path, const catalog::JobRun& run) {
  // Its directory is reached without following a link another user planted, and must be one
  // only root or we can change (a sticky one like /tmp too): we run as root, and the file is
  // world-readable.
  WB_ASSIGN_OR_RETURN(const ResolvedPath file,
                      ResolveForWriting(path, PathPolicy::kTrusted, LastLink::kKeep));
  Samples samples = ReadSamples(file);
  const bool ok = run.status == "ok";
  samples[kMetrics[0].name][run.job] = Number(static_cast<double>(run.started_unix_ms) / 1000);
  if (ok) {
    samples[kMetrics[1].name][run.job] = Number(static_cast<double>(run.finished_unix_ms) / 1000);
  }
  samples[kMetrics[2].name][run.job] =
      Number(static_cast<double>(run.finished_unix_ms - run.started_unix_ms) / 1000);
  samples[kMetrics[3].name][run.job] = std::to_string(run.bytes);
  samples[kMetrics[4].name][run.job] = ok ? "0" : "1";

  std::ostringstream text;
  for (const Metric& m : kMetrics) {
    const auto it = samples.find(m.name);
    if (it == samples.end()) continue;
    text << "# HELP " << m.name << " " << m.help << "\n# TYPE " << m.name << " gauge\n";
    for (const auto& [job, value] : it->second)
      text << m.name << "{job=\"" << job << "\"} " << value << "\n";
  }
  // A temporary created exclusively next to the file, then renamed: the textfile directory may
  // be writable by others, and we run as root.
  return WriteFileAtomicallyAt(file.dir.get(), file.dir_path, file.name, text.str(), 0644);
}

}  // namespace wanbackup::jobs
