// Prune: reclaims the space of records no snapshot needs (docs/durability.md, "Prune").
//
//  1. Interrupted snapshot runs are closed; packs in the store that the catalog does not name
//     (left by an interrupted prune, forget or snapshot) are removed. When one holds the sealed
//     record of a snapshot the catalog does not know (not indexed, not a run it started, not
//     forgotten), the catalog is behind the packs: nothing is changed (Corruption, naming
//     `repair catalog`).
//  2. Live records: every chunk a complete snapshot's map names, its sealed snapshot record and
//     map segments, and every forget record. The rest is unused, and so are pack bytes past the
//     last record the catalog names.
//  3. PlanPrune (prune_plan.h) picks packs to remove (nothing live) and to rewrite.
//  4. In batches: live records of the packs to rewrite are read, checked against the catalog,
//     authenticated and appended unchanged to new packs; the new packs are synced; one
//     transaction moves the live rows to the new packs, drops the unused rows of those packs
//     and the packs' rows, and commits; only then are the old packs removed from the store.
//
// A pack is never modified: prune writes new packs and removes whole old ones. A crash at any
// point leaves every committed snapshot restorable, and the next prune finishes the job (step 1
// removes what the crash left). Pack I/O is proportional to what is rewritten; the catalog is
// walked once (every snapshot's map).
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kExclusive.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "repository/prune_plan.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct PruneOptions {
  UnusedLimit max_unused;
  bool dry_run = false;               // plan and report; change nothing
  uint64_t pack_size = 512ull << 20;  // new packs are closed past this size
  uint64_t batch_bytes = 1ull << 30;  // commit (and remove old packs) after copying this much
  std::function<void(uint64_t copied, uint64_t to_copy)> on_progress;
};

struct PruneReport {
  int abandoned_runs = 0;
  uint64_t orphan_packs = 0;  // in the store, named by nothing: removed
  uint64_t orphan_bytes = 0;
  uint64_t unfinished_uploads = 0;  // begun by killed runs, never finished: abandoned
  uint64_t snapshots = 0;           // complete snapshots whose data is kept
  uint64_t packs = 0;               // packs the catalog names (before)
  uint64_t total_bytes = 0;
  uint64_t live_bytes = 0;
  uint64_t unused_bytes = 0;
  uint64_t packs_removed = 0;    // held nothing live
  uint64_t packs_rewritten = 0;  // live records copied out
  uint64_t packs_written = 0;    // new packs
  uint64_t records_copied = 0;
  uint64_t bytes_copied = 0;
  uint64_t records_dropped = 0;  // catalog rows of unused records in removed/rewritten packs
  uint64_t bytes_freed = 0;      // store bytes removed minus bytes written (orphans included)
  uint64_t unused_after = 0;
  std::vector<std::string> missing_packs;  // named by the catalog, absent from the store
};

Result<PruneReport> Prune(Repository& repo, const PruneOptions& options);

}  // namespace wanbackup::pipeline
