#include "mount/snapshot_image.h"

#include <algorithm>

#include "repository/pack_record.h"

namespace wanbackup::mount {

Result<std::unique_ptr<SnapshotImage>> SnapshotImage::Open(pipeline::Repository& repo,
                                                           const catalog::SnapshotInfo& snapshot) {
  const uint32_t c = snapshot.chunk_size;
  if (c == 0 || c > pipeline::kMaxChunkSize || (c & (c - 1)) != 0) {
    return Status::Corruption("snapshot " + std::to_string(snapshot.id) + ": chunk size " +
                              std::to_string(c) + " is impossible");
  }
  std::unique_ptr<SnapshotImage> image(new SnapshotImage(repo, snapshot));
  WB_ASSIGN_OR_RETURN(image->record_, pipeline::LoadMatchingRecord(repo, image->codec_, snapshot));
  image->map_.emplace(repo, image->codec_, image->record_);
  return image;
}

Result<ChunkRef> SnapshotImage::Locate(uint64_t index) {
  if (last_ && last_->index == index) return *last_;
  ChunkRef ref;
  ref.index = index;
  ref.offset = index * info_.chunk_size;
  if (index >= info_.chunk_count()) {
    return Status::Internal("mount: chunk " + std::to_string(index) + " past the image's end");
  }
  ref.length = std::min<uint64_t>(info_.chunk_size, info_.size_bytes - ref.offset);
  WB_ASSIGN_OR_RETURN(ref.digest, map_->At(index));
  if (ref.digest == pipeline::kZeroChunkDigest) {
    ref.zero = true;
    last_ = ref;
    return ref;
  }
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> id, repo_.catalog().FindChunk(ref.digest));
  if (!id) {
    return Status::Corruption("chunk " + std::to_string(index) +
                              " of the sealed map is not in the catalog (catalog.db was altered "
                              "or damaged)");
  }
  WB_ASSIGN_OR_RETURN(ref.where, repo_.catalog().GetChunk(*id));
  if (ref.where.raw_size != ref.length) {
    return Status::Corruption("chunk " + std::to_string(index) + " has the wrong size");
  }
  last_ = ref;
  return ref;
}

}  // namespace wanbackup::mount
