// Replicating one snapshot to one target, with everything around the pipeline's Replicate:
// opening the LUN/device/file, knowing it again (its identity), refusing the snapshot's own
// source, the catalog record, progress and the summary. Shared by `replicate` and the jobs'
// replicate step. Called on one thread.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "cli/sink_open.h"
#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "common/result.h"
#include "jobs/config.h"
#include "pipeline/replicator.h"
#include "repository/repository.h"

namespace wanbackup::cli {

struct ReplicateRequest {
  std::string to;  // iscsi://…, a block device or a file
  bool check = false;
  bool progress = true;                  // a progress line on a terminal
  TargetFlags target;                    // the replica's login
  TuningFlags tuning;                    // --limit-rate included
  const jobs::Config* config = nullptr;  // a job's: its repositories and sources are off limits
  // Write over an existing file, or a block device that holds data, that the repository does
  // not record as a replica (replicate --force).
  bool force = false;
  std::vector<std::string> credential_files;  // WriteTarget::credential_files
};

struct ReplicateOutcome {
  catalog::Replica replica;  // as recorded after the run
  pipeline::ReplicateResult result;
  std::string json;     // the summary `replicate --json` prints (one JSON object)
  std::string summary;  // one line for humans
};

// REQUIRES: `repo` opened for writing; `snap` complete and checked against its sealed record.
Result<ReplicateOutcome> ReplicateSnapshot(pipeline::Repository& repo,
                                           const catalog::SnapshotInfo& snap,
                                           const ReplicateRequest& request);

// InvalidArgument when `opened`, the destination `to` a restore opened, is a replica this
// repository records: another snapshot written there would make the record false, and the
// next replicate would trust it. A file the restore has just created is no replica.
Status RefuseRecordedReplica(pipeline::Repository& repo, const std::string& to,
                             const OpenedSink& opened);

// A warning for each replica that holds one of the `forgotten` snapshot ids (sorted): with no
// base to diff against, its next replicate reads it whole (over the WAN for a remote LUN).
void WarnReplicasLosingBase(pipeline::Repository& repo, const std::vector<int64_t>& forgotten,
                            bool dry_run);

}  // namespace wanbackup::cli
