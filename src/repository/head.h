// The repository's head in use (head_record.h): which head is the newest, sealing the next one
// when the snapshot set changes, and checking the catalog's snapshot set against the head. The
// catalog names its newest head in the setting kHeadSetting; a catalog turned back names an
// older head whose set it matches, which the trust anchor's counter catches (trust_anchor.h).
//
// Functions run on the thread that owns the repository's catalog.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/head_record.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

// The catalog setting naming the newest head: "<counter> <hex digest of its record>".
inline constexpr const char kHeadSetting[] = "head";

// A head sealed and ready to be appended to a pack.
struct SealedHead {
  HeadRecord record;
  Digest digest{};
  std::vector<uint8_t> bytes;  // record header + sealed payload
  uint32_t raw_size = 0;
};

// The catalog's complete snapshots, each with the digest of its sealed record, ascending ids.
Result<std::vector<HeadEntry>> CatalogSnapshotSet(catalog::Catalog& cat);
// The newest head's counter as the catalog names it (0: none, a repository made before heads).
Result<uint64_t> CatalogHeadCounter(catalog::Catalog& cat);
// The chunks row of the newest head (nullopt: none, or not indexed).
Result<std::optional<int64_t>> CatalogHeadRow(catalog::Catalog& cat);
// The head the catalog names, read from its pack and authenticated (nullopt: none yet).
// Corruption when it cannot be read or opened, or it is another repository's.
Result<std::optional<HeadRecord>> LoadHead(Repository& repo);
// Seals the head that follows the catalog's newest one (its counter + 1, at least `floor` + 1),
// listing `set`.
Result<SealedHead> SealNextHead(Repository& repo, std::vector<HeadEntry> set, uint64_t floor = 0);
// Seals a head with exactly this counter (repair catalog: above every head in the packs).
SealedHead SealHead(const Repository& repo, std::vector<HeadEntry> set, uint64_t counter);
// SealNextHead of the catalog's set with `added` (a snapshot about to be marked complete).
Result<SealedHead> SealHeadAdding(Repository& repo, const HeadEntry& added);
// Indexes `head`, appended at `offset` of pack `pack_id`, as a chunks row and makes it the
// catalog's newest (RecordHead), in the caller's transaction.
Status IndexHead(catalog::Catalog& cat, const SealedHead& head, int64_t pack_id, uint64_t offset);
// Makes `head` the catalog's newest, in the caller's transaction.
Status RecordHead(catalog::Catalog& cat, const HeadRecord& head, const Digest& digest);
// The highest snapshot number the catalog gave out: its rows (complete, failed or running) and
// the floor that forget and a rebuild keep (catalog.h, kSnapshotIdFloor).
Result<int64_t> CatalogHighestSnapshotId(catalog::Catalog& cat);
// The highest number among the catalog's complete snapshots (0: none): after
// CheckCatalogAgainstHead, the newest head's, which is sealed. What a trust anchor may learn
// (round 7, X3: the catalog's own floor is not authenticated).
Result<int64_t> CatalogHighestListedId(catalog::Catalog& cat);
// Makes the catalog give out numbers above `highest` from now on (a no-op when it already does).
Status RaiseCatalogSnapshotIdFloor(catalog::Catalog& cat, int64_t highest);
// Checks that the catalog lists exactly the snapshots its newest head lists; returns that head's
// counter (0: no head yet, nothing to check). Corruption names the first difference and
// 'wanbackup repair catalog'.
Result<uint64_t> CheckCatalogAgainstHead(Repository& repo);

}  // namespace wanbackup::pipeline
