// Rebuilding catalog.db from the packs alone (`wanbackup repair catalog`): packs are
// self-describing (every record names its kind, digest and sizes) and hold each complete
// snapshot's sealed record and map, so chunks, packs, snapshots (same ids, tags, sizes, times)
// and their maps come back; the job history does not. The newest head decides which snapshots
// come back: a snapshot named by a forget record stays forgotten unless that head lists it, and
// a complete sealed snapshot it does not list is kept, never dropped (a new head lists it).
// The new catalog is built beside the old
// one and swapped in only when complete; the old file is kept (docs/operations.md, "Recovery").
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kRepair.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct RebuildReport {
  uint64_t packs = 0;        // packs indexed (an incremental refresh: new and grown ones)
  uint64_t packs_grown = 0;  // of them, packs indexed before whose new tail was indexed
  // What was read from the packs: reads (on S3 each one ranged GET) and their bytes.
  uint64_t reads = 0;
  uint64_t bytes_read = 0;
  // An S3 cache refreshed incrementally (cache_refresh.h); else rebuilt whole, and
  // `full_because` says why when an incremental refresh was planned but did not fit.
  bool incremental = false;
  std::string full_because;
  uint64_t records = 0;            // authenticated records indexed
  uint64_t duplicates = 0;         // records whose digest an earlier record already had
  uint64_t damaged_records = 0;    // failed authentication; left out
  uint64_t torn_bytes = 0;         // pack tails that are not whole records (interrupted writes)
  std::vector<int64_t> snapshots;  // rebuilt, by id
  std::vector<int64_t> forgotten;  // sealed, but named by a forget record: left out
  // The repository's head (head.h) after the rebuild: its counter (0: the packs hold none, a
  // repository made before heads) and whether the rebuild sealed it. When the newest head in
  // the packs lists snapshots that could not be rebuilt, a new head with the next counter lists
  // exactly what was rebuilt, so that the catalog matches its head again; `lost` names the
  // snapshots the old head listed that are gone. A complete sealed snapshot that no forget
  // record names and the newest head does not list (sealed by a wanbackup before heads, or by
  // a snapshot killed before its commit) is rebuilt all the same, named in `unlisted`, and the
  // new head lists it too.
  uint64_t head_counter = 0;
  bool new_head = false;
  std::vector<int64_t> lost;
  std::vector<int64_t> unlisted;
  std::vector<std::string> problems;  // one line each: what was left out and why
  // Snapshots that shared their number with another (a catalog behind its packs numbered a new
  // one alike): sealed again under a new number, the old record forgotten; one line each.
  std::vector<std::string> renumbered;
  std::string old_catalog;  // where the replaced catalog was kept ("" if none)
  // Packs an earlier catalog named (or recorded as missing) that are not there, recorded in
  // the new catalog (catalog::kMissingPacks) under --allow-missing-packs.
  std::vector<std::string> missing_packs;
  // Sealed snapshot records known of but not in the packs (catalog::kMissingRecords entries).
  std::vector<std::string> missing_records;
  bool complete() const {
    return damaged_records == 0 && problems.empty() && lost.empty() && missing_packs.empty() &&
           missing_records.empty();
  }
};

struct RebuildOptions {
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> on_progress;
  // Rebuild although the old catalog (when it can still be read) names packs the store does not
  // hold. Without it, that is Corruption and nothing is changed: a disk not mounted yet under
  // packs/, or something mounted over it, must not become a catalog and a head without them.
  // (Not for an S3 repository's cache, which follows the store: another host's prune removes
  // packs it still names.)
  bool allow_missing_packs = false;
  // The catalog cache of an S3 repository (Repository::remote()): chunk records are indexed
  // from their headers alone (one small ranged read each; their payloads are authenticated
  // when they are read), only the snapshots the newest head lists come back, nothing is written
  // to the repository (a head that lists a snapshot that cannot be rebuilt is Corruption naming
  // 'repair catalog'), and the new catalog replaces the cache's (InstallCacheCatalog).
  bool cache = false;
};

Result<RebuildReport> RebuildCatalog(Repository& repo, const RebuildOptions& options);

}  // namespace wanbackup::pipeline
