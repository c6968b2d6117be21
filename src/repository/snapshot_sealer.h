// SnapshotSealer: writes a snapshot's sealed records (snapshot_record.h) while the snapshot is
// taken. Chunk digests arrive in any order; each map segment is sealed and stored as soon as all
// its chunks are known (a segment already in the repository is not stored again), so memory
// holds only the segments still open. Finish() stores the snapshot record itself.
//
// Not thread-safe: the thread that owns the catalog (the snapshot's coordinator) calls it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/record.h"
#include "repository/snapshot_record.h"

namespace wanbackup::pipeline {

class SnapshotSealer {
 public:
  // Stores one whole record (header + payload) and adds its chunks row; returns the row id.
  using StoreFn =
      std::function<Result<int64_t>(const std::vector<uint8_t>& record, const Digest& digest,
                                    RecordKind kind, uint32_t raw_size)>;

  SnapshotSealer(const KeySet& keys, int zstd_level, catalog::Catalog& catalog,
                 uint64_t chunk_count, StoreFn store);

  // The digest of chunk `index` (kZeroChunkDigest for an all-zero chunk).
  Status Add(uint64_t index, const Digest& digest);
  // REQUIRES: every chunk added. Seals `info` (with the segment digests) and stores it;
  // returns the record's chunks row id.
  Result<int64_t> Finish(const std::string& repository_id, const catalog::SnapshotInfo& info);

 private:
  Status SealSegment(uint64_t segment, const std::vector<Digest>& digests);

  RecordCodec codec_;
  const KeySet& keys_;
  catalog::Catalog& catalog_;
  const uint64_t chunk_count_;
  StoreFn store_;
  std::map<uint64_t, std::pair<std::vector<Digest>, uint64_t>> open_;  // segment -> digests, filled
  std::vector<Digest> segments_;  // sealed digest of each segment
  std::vector<bool> sealed_;
  std::vector<uint8_t> record_;
};

}  // namespace wanbackup::pipeline
