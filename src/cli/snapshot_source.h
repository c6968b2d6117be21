// Taking a snapshot of a source named on a command line or in a job: opens the source (iSCSI
// URL or local file/device) with the connection and tuning flags, and runs the snapshotter into
// an open repository. Shared by `snapshot` and `run`.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "pipeline/snapshotter.h"

namespace wanbackup::cli {

struct SnapshotRequest {
  std::string source;
  std::string tag;
  std::string job;  // the job taking it (`run`), sealed in its record
  TargetFlags target;
  TuningFlags tuning;
  std::string checkpoint_interval;  // "": the store's default (pipeline::kCheckpointInterval, …)
  std::string checkpoint_bytes;
  std::string upload_memory;  // "": the store's default; only for a repository on S3
  std::chrono::milliseconds progress_interval{500};
  std::function<void(const pipeline::SnapshotProgress&)> on_progress;  // may be empty
};

// InvalidArgument when a flag of `request` that is a duration or a size does not parse, or is
// out of range (--upload-memory 0): what SnapshotSource would refuse, checked before anything is
// opened, so that a typo exits at once rather than after the lock and the source's login.
Status CheckSnapshotFlags(const SnapshotRequest& request);

// REQUIRES: `repo` opened for writing. Prints what autotune chose for a remote source.
Result<pipeline::SnapshotResult> SnapshotSource(pipeline::Repository& repo,
                                                const SnapshotRequest& request);

}  // namespace wanbackup::cli
