#include "pipeline/migrate.h"

#include <unordered_map>

#include "pipeline/pack.h"
#include "pipeline/snapshot_sealer.h"

namespace wanbackup::pipeline {
namespace {

// Seals one format-1 snapshot from its catalog map, in one transaction.
class LegacySealer {
 public:
  explicit LegacySealer(Repository& repo) : repo_(repo), cat_(repo.catalog()) {}

  Status Seal(const catalog::SnapshotInfo& snap) {
    WB_ASSIGN_OR_RETURN(auto txn, cat_.Begin());
    SnapshotSealer sealer(
        repo_.keys(), repo_.config().zstd_level, cat_, snap.chunk_count(),
        [this](const std::vector<uint8_t>& record, const Digest& digest, RecordKind kind,
               uint32_t raw_size) { return Store(record, digest, kind, raw_size); });
    const Status walked = cat_.ForEachMapSegment(
        snap.id, [&](uint64_t first, const std::vector<int64_t>& ids) -> Status {
          std::unordered_map<int64_t, Digest> digests;
          for (size_t k = 0; k < ids.size(); ++k) {
            if (ids[k] == 0) {
              WB_RETURN_IF_ERROR(sealer.Add(first + k, kZeroChunkDigest));
              continue;
            }
            auto it = digests.find(ids[k]);
            if (it == digests.end()) {
              WB_ASSIGN_OR_RETURN(Digest d, CheckedDigest(snap, ids[k]));
              it = digests.emplace(ids[k], d).first;
            }
            WB_RETURN_IF_ERROR(sealer.Add(first + k, it->second));
          }
          return Status::Ok();
        });
    WB_RETURN_IF_ERROR(walked);
    WB_ASSIGN_OR_RETURN(const int64_t record_id, sealer.Finish(repo_.config().id, snap));
    WB_RETURN_IF_ERROR(pack_->Sync());  // the records first, then the catalog that names them
    WB_RETURN_IF_ERROR(cat_.SetPackSize(pack_id_, pack_->size()));
    WB_RETURN_IF_ERROR(cat_.SetSnapshotRecord(snap.id, record_id));
    return txn->Commit();
  }

 private:
  // The digest of chunk `id`, once its pack's record header agrees with the catalog's row: a
  // sealed record must not bless a catalog that was already wrong.
  Result<Digest> CheckedDigest(const catalog::SnapshotInfo& snap, int64_t id) {
    WB_ASSIGN_OR_RETURN(catalog::ChunkRecord c, cat_.GetChunk(id));
    WB_ASSIGN_OR_RETURN(const PackReader* pack, repo_.Pack(c.pack_id));
    Result<RecordHeader> h = ReadRecordHeaderAt(*pack, c.offset, c.stored_size);
    if (!h.ok() || h->digest != c.digest || h->raw_size != c.raw_size) {
      return Status::Corruption("snapshot " + std::to_string(snap.id) + ": chunk " +
                                std::to_string(id) +
                                " is not the record its pack holds; run 'wanbackup verify' and "
                                "deal with the damage before migrating");
    }
    return c.digest;
  }

  Result<int64_t> Store(const std::vector<uint8_t>& record, const Digest& digest, RecordKind kind,
                        uint32_t raw_size) {
    if (!pack_) {
      WB_ASSIGN_OR_RETURN(pack_, repo_.NewPack(&pack_id_));
    }
    WB_ASSIGN_OR_RETURN(uint64_t offset, pack_->Append(record.data(), record.size()));
    catalog::ChunkRecord c;
    c.kind = static_cast<catalog::ChunkKind>(kind);
    c.digest = digest;
    c.pack_id = pack_id_;
    c.offset = offset;
    c.stored_size = static_cast<uint32_t>(record.size() - kRecordHeaderSize);
    c.raw_size = raw_size;
    return cat_.AddChunk(c);
  }

  Repository& repo_;
  catalog::Catalog& cat_;
  std::unique_ptr<PackWriter> pack_;
  int64_t pack_id_ = 0;
};

}  // namespace

Result<MigrateReport> MigrateRepository(Repository& repo) {
  MigrateReport report;
  report.from_format = repo.config().format;
  report.to_format = kRepositoryFormat;
  if (repo.config().format == kRepositoryFormat) return report;
  WB_RETURN_IF_ERROR(repo.WriteSettings());
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> snapshots,
                      repo.catalog().Snapshots(false));
  LegacySealer sealer(repo);
  for (const catalog::SnapshotInfo& snap : snapshots) {
    if (snap.record_id != 0) continue;  // sealed by an earlier, interrupted migration
    WB_RETURN_IF_ERROR(sealer.Seal(snap));
    report.sealed.push_back(snap.id);
  }
  WB_RETURN_IF_ERROR(repo.UpgradeConfig());
  return report;
}

}  // namespace wanbackup::pipeline
