// Checking the catalog against the packs' sealed snapshot records (snapshot_record.h): the
// catalog is an index anyone with the files can edit, the sealed records are authenticated
// (encrypted repositories). Used by verify (every snapshot), restore (before writing a byte) and
// the catalog rebuild.
//
// Functions run on the thread that owns the repository's catalog.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/record.h"
#include "repository/repository.h"
#include "repository/snapshot_record.h"

namespace wanbackup::pipeline {

// Reads, authenticates and opens the record `c` names, which must be of `kind` and hold at most
// `max_raw` bytes.
Result<std::vector<uint8_t>> LoadRecord(Repository& repo, RecordCodec& codec,
                                        const catalog::ChunkRecord& c, RecordKind kind,
                                        size_t max_raw);

// Reads and opens the chunk record `c` into `out` (c.raw_size bytes; `record` is scratch space
// for the stored record). The record must be a chunk whose digest is `sealed`, the digest a
// sealed map names: the AEAD binds the header's digest and Open checks the plaintext against
// it, so a catalog row pointed at another record yields Corruption, never other bytes. What
// restore and mount read every chunk with. Thread-safe (Pack() and a codec per thread).
Status LoadSealedChunk(Repository& repo, RecordCodec& codec, const catalog::ChunkRecord& c,
                       const Digest& sealed, std::vector<uint8_t>* record, uint8_t* out);

// The sealed record of a catalog snapshot row (Corruption when it has none, or it is damaged).
Result<SnapshotRecord> LoadSnapshotRecord(Repository& repo, RecordCodec& codec,
                                          const catalog::SnapshotInfo& row);

// The sealed record of `row`, whose metadata (id, sizes, labels, times, counters) must be the
// row's: Corruption naming the snapshot otherwise. What restore writes from, so a catalog changed
// after a check cannot substitute another snapshot's record.
Result<SnapshotRecord> LoadMatchingRecord(Repository& repo, RecordCodec& codec,
                                          const catalog::SnapshotInfo& row);

// LoadMatchingRecord for each of `rows`, for what decides on their metadata: forget's keep_*
// rules, by hand or in a job, read times, tags, jobs and sources, which a storage writer could
// otherwise edit in catalog.db to have the key holder forget the newest snapshot (round 10,
// AA1). Corruption naming the first snapshot that differs, and 'repair catalog'. With
// `unreadable`, a record that cannot be read (its pack gone or damaged: damage `verify` and
// `repair catalog` deal with, not a forged row) is reported there instead, for a listing.
Status CheckRowsMatchRecords(Repository& repo, const std::vector<catalog::SnapshotInfo>& rows,
                             std::vector<std::string>* unreadable = nullptr);

// Reads sealed map segments of a snapshot record one at a time (for in-order walks). The
// catalog only says where a segment's record lies; the record must open under the AEAD with the
// digest the snapshot record names.
class SealedMap {
 public:
  SealedMap(Repository& repo, RecordCodec& codec, const SnapshotRecord& record)
      : repo_(repo), codec_(codec), record_(record) {}
  // The sealed digest of chunk `index` (kZeroChunkDigest for an all-zero chunk); Corruption for
  // an index past the snapshot's last chunk.
  Result<Digest> At(uint64_t index);
  // The digests of segment `segment` (chunks segment * kSealedSegmentChunks on), valid until the
  // next call.
  Result<const std::vector<Digest>*> Segment(uint64_t segment);

 private:
  Repository& repo_;
  RecordCodec& codec_;
  const SnapshotRecord& record_;
  uint64_t loaded_ = UINT64_MAX;
  std::vector<Digest> digests_;
};

// Compares a complete snapshot in the catalog with its sealed record: metadata and every map
// entry's digest. With `check_records`, also reads each chunk's record header in its pack (its
// digest and sizes must match the catalog's row), so a row pointed elsewhere is found before a
// restore writes anything. Corruption names the snapshot and the first difference.
Status CheckSnapshotAgainstRecord(Repository& repo, const catalog::SnapshotInfo& row,
                                  bool check_records);

}  // namespace wanbackup::pipeline
