// The Prometheus node_exporter textfile (collector.textfile) that `wanbackup run` keeps, so
// monitoring can alert on a job that failed or stopped running: per job, the last run's time,
// duration, bytes and exit status, and the time of the last success. One file for every job
// (the config's [metrics] textfile); other jobs' lines are kept; written atomically (a temporary
// file renamed over it) in a directory reached without following links another user planted. Not
// thread-safe; one writer per file (runs of one job are serialised by the repository lock,
// different jobs may race: the last writer wins for its own job).
#pragma once

#include <string>

#include "catalog/catalog.h"
#include "common/status.h"

namespace wanbackup::jobs {

// InvalidArgument when the file's directory is reached through a link another user may have
// planted, or is one another user can change (common/safe_path.h, kTrusted).
Status CheckMetricsTextfile(const std::string& path);

Status WriteJobMetrics(const std::string& path, const catalog::JobRun& run);

}  // namespace wanbackup::jobs
