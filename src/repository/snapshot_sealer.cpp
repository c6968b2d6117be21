#include "repository/snapshot_sealer.h"

#include <algorithm>

namespace wanbackup::pipeline {

SnapshotSealer::SnapshotSealer(const KeySet& keys, int zstd_level, catalog::Catalog& catalog,
                               uint64_t chunk_count, StoreFn store)
    : codec_(keys, zstd_level),
      keys_(keys),
      catalog_(catalog),
      chunk_count_(chunk_count),
      store_(std::move(store)) {
  const uint64_t count = (chunk_count + kSealedSegmentChunks - 1) / kSealedSegmentChunks;
  segments_.resize(count);
  sealed_.resize(count, false);
}

Status SnapshotSealer::Add(uint64_t index, const Digest& digest) {
  if (index >= chunk_count_) return Status::Internal("sealer: chunk index out of range");
  const uint64_t segment = index / kSealedSegmentChunks;
  const uint64_t first = segment * kSealedSegmentChunks;
  const uint64_t count = std::min(kSealedSegmentChunks, chunk_count_ - first);
  auto& [digests, filled] = open_[segment];
  if (digests.empty()) digests.resize(count);
  digests[index - first] = digest;
  if (++filled < count) return Status::Ok();
  Status s = SealSegment(segment, digests);
  open_.erase(segment);
  return s;
}

Status SnapshotSealer::SealSegment(uint64_t segment, const std::vector<Digest>& digests) {
  const std::string plain = EncodeMapSegment(digests);
  const auto* data = reinterpret_cast<const uint8_t*>(plain.data());
  const Digest digest = keys_.DigestOf(data, plain.size());
  segments_[segment] = digest;
  sealed_[segment] = true;
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> known, catalog_.FindChunk(digest));
  if (known) return Status::Ok();  // the same segment as an earlier snapshot's
  record_.clear();
  size_t payload_size = 0;
  uint8_t flags = 0;
  const uint8_t* payload = codec_.Compress(data, plain.size(), &payload_size, &flags);
  codec_.Seal(payload, payload_size, flags, static_cast<uint32_t>(plain.size()), digest, &record_,
              RecordKind::kMapSegment);
  return store_(record_, digest, RecordKind::kMapSegment, static_cast<uint32_t>(plain.size()))
      .status();
}

Result<int64_t> SnapshotSealer::Finish(const std::string& repository_id,
                                       const catalog::SnapshotInfo& info) {
  if (!open_.empty() || std::find(sealed_.begin(), sealed_.end(), false) != sealed_.end()) {
    return Status::Internal("sealer: the snapshot's map is not complete");
  }
  SnapshotRecord r{repository_id, info, segments_};
  WB_ASSIGN_OR_RETURN(const std::string plain, EncodeSnapshotRecord(r));
  record_.clear();
  const Digest digest = codec_.SealWhole(reinterpret_cast<const uint8_t*>(plain.data()),
                                         plain.size(), RecordKind::kSnapshot, &record_);
  return store_(record_, digest, RecordKind::kSnapshot, static_cast<uint32_t>(plain.size()));
}

}  // namespace wanbackup::pipeline
