#include "repository/migrate.h"

#include <unordered_map>

#include "repository/pack_record.h"
#include "repository/record.h"
#include "repository/snapshot_sealer.h"

namespace wanbackup::pipeline {
namespace {

// Seals one format-1 snapshot from its catalog map, in one transaction.
class LegacySealer {
 public:
  explicit LegacySealer(Repository& repo)
      : repo_(repo),
        cat_(repo.catalog()),
        codec_(repo.keys(), 0),
        chunk_(repo.config().chunk_size) {}

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
  // The digest of chunk `id`, once its record has been read from its pack, opened under the
  // data key and its plaintext's digest recomputed: a sealed record must not bless a catalog
  // that was already wrong, and the digest it seals is the pack's, not the catalog's word.
  Result<Digest> CheckedDigest(const catalog::SnapshotInfo& snap, int64_t id) {
    WB_ASSIGN_OR_RETURN(catalog::ChunkRecord c, cat_.GetChunk(id));
    WB_ASSIGN_OR_RETURN(const PackReader* pack, repo_.Pack(c.pack_id));
    Result<RecordHeader> h = ReadRecordAt(*pack, c.offset, c.stored_size, &record_);
    Status opened = h.ok() ? Status::Ok() : h.status();
    if (opened.ok() && (h->digest != c.digest || h->raw_size != c.raw_size ||
                        h->kind != RecordKind::kChunk || h->raw_size > chunk_.size())) {
      opened = Status::Corruption("its pack holds another record there");
    }
    if (opened.ok()) opened = codec_.Open(*h, record_.data() + kRecordHeaderSize, chunk_.data());
    if (!opened.ok()) {
      return Status::Corruption("snapshot " + std::to_string(snap.id) + ": chunk " +
                                std::to_string(id) + " is not the record its pack holds (" +
                                opened.message() +
                                "); run 'wanbackup verify' and deal with the damage before "
                                "migrating");
    }
    return h->digest;
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
  RecordCodec codec_;
  std::vector<uint8_t> record_, chunk_;
};

// The first record of a kind format 1 never wrote (a sealed map segment, snapshot or forget
// record) in any pack of the store, walked header by header without the catalog; empty when
// there is none. A header that does not parse ends its pack's walk (verify reports damage).
Result<std::string> SealedRecordInPacks(Repository& repo) {
  WB_ASSIGN_OR_RETURN(std::vector<StoredPack> packs, repo.packs().List());
  for (const StoredPack& p : packs) {
    Result<std::unique_ptr<PackReader>> pack = repo.packs().Open(p.name);
    if (!pack.ok()) continue;
    WB_ASSIGN_OR_RETURN(const uint64_t size, (*pack)->Size());
    uint64_t offset = kPackHeaderSize;
    uint8_t bytes[kRecordHeaderSize];
    while (offset + kRecordHeaderSize <= size) {
      if (!(*pack)->ReadAt(offset, bytes, sizeof bytes).ok()) break;
      Result<RecordHeader> h = ParseRecordHeader(bytes);
      if (!h.ok()) break;
      if (h->kind != RecordKind::kChunk) {
        return "a sealed record (kind " + std::to_string(static_cast<int>(h->kind)) + ") in " +
               repo.packs().Describe(p.name);
      }
      offset += kRecordHeaderSize + h->stored_size;
    }
  }
  return std::string();
}

// Refuses a repository whose config.json says format 1 but whose catalog or packs are newer:
// config.json was turned back to skip its authentication, and sealing the catalog's maps would
// bless whatever the catalog says.
Status RefuseNewer(Repository& repo, const MigrateOptions& options) {
  std::string evidence = repo.newer_format_evidence();
  WB_ASSIGN_OR_RETURN(const std::string in_packs, SealedRecordInPacks(repo));
  if (!in_packs.empty()) evidence += (evidence.empty() ? "" : "; ") + in_packs;
  if (evidence.empty() || options.assume_format1) return Status::Ok();
  return Status::Corruption(
      repo.path() + "/config.json says format 1, but the repository is newer (" + evidence +
      "): config.json looks downgraded (altered), and migrating would seal what the catalog "
      "says; put back a config.json you trust. Nothing was changed. Only if this repository was "
      "written by a wanbackup before format 2 and a migrate of it was interrupted, run "
      "'wanbackup migrate --assume-format-1'");
}

}  // namespace

Result<MigrateReport> MigrateRepository(Repository& repo, const MigrateOptions& options) {
  MigrateReport report;
  report.from_format = repo.config().format;
  report.to_format = kRepositoryFormat;
  if (repo.config().format == kRepositoryFormat) return report;
  if (repo.config().format < kMinOpenFormat) {
    WB_RETURN_IF_ERROR(RefuseNewer(repo, options));
    WB_RETURN_IF_ERROR(repo.OpenLegacyCatalog());
  }
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
