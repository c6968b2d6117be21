// Where each chunk of one snapshot's disk image lies: the snapshot's sealed record and map
// segments (repository/snapshot_check.h), and the catalog as an index from a sealed digest to
// its record in a pack. The sealed record is loaded and checked against the catalog's row when
// the image is first read, so what disk.img holds comes from the authenticated map alone; each
// chunk's record must then open as the digest the map names (LoadSealedChunk), so an altered
// catalog can make a read fail, never return other bytes.
// Not thread-safe: used on the thread that owns the repository's catalog (the FUSE thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/record.h"
#include "repository/repository.h"
#include "repository/snapshot_check.h"

namespace wanbackup::mount {

// One chunk of an image: its place, its sealed digest, and where its record is.
struct ChunkRef {
  uint64_t index = 0;
  uint64_t offset = 0;  // in the image
  uint64_t length = 0;  // chunk_size, less for the last chunk
  pipeline::Digest digest{};
  bool zero = false;             // an all-zero chunk: nothing stored, nothing to fetch
  catalog::ChunkRecord where{};  // !zero: the record in its pack
};

class SnapshotImage {
 public:
  static Result<std::unique_ptr<SnapshotImage>> Open(pipeline::Repository& repo,
                                                     const catalog::SnapshotInfo& snapshot);
  const catalog::SnapshotInfo& info() const { return info_; }
  // Chunk `index` (< info().chunk_count()).
  Result<ChunkRef> Locate(uint64_t index);

 private:
  SnapshotImage(pipeline::Repository& repo, const catalog::SnapshotInfo& snapshot)
      : repo_(repo), info_(snapshot), codec_(repo.keys(), 0) {}

  pipeline::Repository& repo_;
  const catalog::SnapshotInfo info_;
  pipeline::RecordCodec codec_;
  pipeline::SnapshotRecord record_;
  std::optional<pipeline::SealedMap> map_;  // over record_ and codec_
  // The last chunk located: the kernel reads a chunk in many pieces (128 KiB each), and each
  // would otherwise cost two catalog queries.
  std::optional<ChunkRef> last_;
};

}  // namespace wanbackup::mount
