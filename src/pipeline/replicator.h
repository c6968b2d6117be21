// Replicate: bring a replica (an iSCSI LUN, block device or file) to exactly one snapshot,
// writing only the chunks that differ from what it holds. docs/operations.md ("Standby copies:
// replicate") has the user's view; the rules:
//
// - What the replica holds comes from its catalog record (catalog::Replica). When that names a
//   snapshot still in the repository, the two chunk maps are diffed and only the chunks that
//   differ are written: nothing is read from the replica.
// - Before the first write the record is marked inconsistent (writing_snapshot_id), in its own
//   committed transaction; it is marked consistent at the new snapshot only after the sink's
//   Finish (SYNCHRONIZE CACHE / fsync). A run that was interrupted is finished by the next one:
//   it writes every chunk where either the old or the interrupted target snapshot differs from
//   the new one.
// - With `check`, or when the record is missing or names a snapshot no longer there, the
//   replica is read back and every chunk compared with the snapshot's digest; only the chunks
//   that differ are written. A replica changed behind wanbackup's back is repaired, not trusted.
// - The same with a target that no longer looks like the one recorded (another size, device
//   id or modification time), or that has no stable identity at all.
// - A target the caller just created (a new file) is written whole, zeros as holes.
// - The snapshots the diff starts from are checked against their sealed records first.
//
// Threading: as RestoreSnapshot; the catalog is used on the calling thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "catalog/catalog.h"
#include "common/block_io.h"
#include "common/result.h"
#include "pipeline/restorer.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

enum class ReplicateMode { kDiff, kCheck, kFull };
const char* ReplicateModeName(ReplicateMode mode);  // "diff", "check", "full"

struct ReplicateOptions {
  bool check = false;       // read the replica and compare, whatever the record says
  bool target_new = false;  // the caller created the target: write everything
  // What the target looks like now (catalog::Replica::fingerprint); empty when it has no stable
  // identity (a device without a serial), which makes every run compare. A record whose
  // fingerprint differs is not trusted either.
  std::string fingerprint;
  // What it looks like once the run finished (a file's new modification time); called after the
  // sink's Finish. Unset: `fingerprint`.
  std::function<std::string()> final_fingerprint;
  // Opens the replica for reading (check mode only; never called otherwise).
  std::function<Result<std::unique_ptr<BlockSource>>()> open_readback;
  RestoreOptions restore;  // workers, progress; record_checked as for RestoreSnapshot
};

struct ReplicatePlan {
  ReplicateMode mode = ReplicateMode::kCheck;
  int64_t base_snapshot = 0;  // diff: the snapshot the replica holds
  std::string reason;         // why this mode, for the log ("holds snapshot 4", ...)
};

struct ReplicateResult {
  ReplicatePlan plan;
  uint64_t chunks_total = 0;
  uint64_t chunks_written = 0;
  uint64_t bytes_written = 0;  // handed to the sink (zero chunks included, holes not)
  uint64_t bytes_read = 0;     // read back from the replica (check mode)
  std::chrono::nanoseconds elapsed{0};
};

// The seal of `replica`'s record: a MAC under the repository key of what a run trusts it for
// (identity, target, the snapshots it holds or is being written, each by number and by the
// digest of its sealed record, and the fingerprint). The replicas table is not authenticated
// and not in the packs: a storage writer who set `snapshot_id` had a replica diffed from a
// snapshot it did not hold, "consistent" and wrong (round 10, AA2); and a number given out again
// (a lowered floor, on a client without an anchor) named another snapshot (round 11, AB3). Does
// not stop an old sealed row being put back (the fingerprint does, for a file: its mtime). A
// record whose snapshot was forgotten no longer verifies.
std::string ReplicaSeal(Repository& repo, const catalog::Replica& replica);
bool ReplicaSealed(Repository& repo, const catalog::Replica& replica);

// Decides how `replica` is brought to `snapshot` (see above); reads only the catalog. A record
// whose seal does not verify is compared, as one with no record is.
Result<ReplicatePlan> PlanReplicate(Repository& repo, const catalog::SnapshotInfo& snapshot,
                                    const catalog::Replica& replica,
                                    const ReplicateOptions& options);

// Brings the replica behind `sink` to `snapshot` and records it in the catalog (`replica` is
// updated: id, state, counters; replica->writing_snapshot_id != 0 after a failure means the
// record says inconsistent). REQUIRES: the repository was opened for writing.
Result<ReplicateResult> Replicate(Repository& repo, const catalog::SnapshotInfo& snapshot,
                                  catalog::Replica* replica, BlockSink& sink,
                                  const ReplicateOptions& options);

}  // namespace wanbackup::pipeline
