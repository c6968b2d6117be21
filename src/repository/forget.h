// Forgetting snapshots (`wanbackup forget`), crash-safe and authenticated: one sealed forget
// record (snapshot_record.h) naming each snapshot by id and by the digest of its sealed record
// goes into a new pack and is made durable; then one catalog transaction indexes it and removes
// the snapshots' rows and maps. Their chunks stay until `prune`. A crash before the commit
// leaves the catalog as it was (the new pack is named by nothing; prune removes it); after it,
// the snapshots are gone, and a catalog rebuild leaves them out because of the forget record.
// A format-2 repository is upgraded to format 3 (config.json) before its first forget record.
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kExclusive.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/record.h"
#include "repository/repository.h"
#include "repository/snapshot_record.h"

namespace wanbackup::pipeline {

struct ForgetOutcome {
  int64_t record_id = 0;         // the forget record's chunks row
  bool upgraded_format = false;  // config.json went from format 2 to 3
};

Result<ForgetOutcome> ForgetSnapshots(Repository& repo,
                                      const std::vector<catalog::SnapshotInfo>& snapshots);

// A sealed snapshot record the catalog indexes but no snapshot lists and no forget record names:
// what `repair catalog` left out because chunks of it are gone from the packs. Prune refuses
// while one is there (it cannot tell a pack gone for good from one that is only away), so such
// a snapshot is given up on purpose (`forget --lost`; round 8, Y1).
struct LostSnapshot {
  SnapshotRecord record;
  int64_t record_row = 0;  // its chunks row
  Digest digest{};         // of the sealed record, as a forget record names it
  uint64_t missing = 0;    // chunks it names that no pack holds (all-zero chunks are never stored)
  uint64_t segments_missing = 0;  // of its map segments (their chunks are not counted above)
};

// The lost snapshots numbered `id` (two where a client without an anchor reused the number).
// A snapshot the catalog lists is not among them; one that is whole in the packs is, with
// nothing missing (repair would bring it back).
Result<std::vector<LostSnapshot>> FindLostSnapshots(Repository& repo, int64_t id);

// Seals one forget record naming `lost` (the head's snapshot set is unchanged), after which
// prune no longer refuses for them and a rebuild leaves them out for good.
Result<ForgetOutcome> ForgetLostSnapshots(Repository& repo, const std::vector<LostSnapshot>& lost);

// The packs the catalog records as missing (catalog::kMissingPacks), and whether each is in
// the store again.
struct MissingPack {
  std::string name;
  bool back = false;
};
Result<std::vector<MissingPack>> RecordedMissingPacks(Repository& repo);

// The sealed snapshot records the catalog records as missing (catalog::kMissingRecords); a
// zero `record` when only the number is known.
struct MissingRecord {
  int64_t id = 0;
  Digest record{};
};
Result<std::vector<MissingRecord>> RecordedMissingRecords(catalog::Catalog& cat);

// `forget --lost-packs`: gives up the packs and the sealed records the catalog records as
// missing, so that prune goes on (without `dry_run`). A record known by number only, from this
// client's anchor, gets a forget record (so no later repair records it again), and only then;
// nothing is sealed on the word of the list alone. Refused while a recorded pack is back
// ('repair catalog' indexes it). What it gave up, one line each.
Result<std::vector<std::string>> ForgetMissingPacks(Repository& repo, bool dry_run);

// Refused (naming 'repair catalog') while the catalog is behind its packs: a pack in the store
// it does not name, or one longer than it records. What forget --lost needs before it judges
// what is gone (round 11, AB2: a pack put back was taken for gone).
Status CheckCatalogNamesEveryPack(Repository& repo);

// The digests of the sealed records of every snapshot a forget record names.
Result<std::set<Digest>> ForgottenRecords(Repository& repo, RecordCodec& codec);

}  // namespace wanbackup::pipeline
