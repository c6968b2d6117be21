#include "repository/forget.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "common/failpoint.h"
#include "common/hex.h"
#include "common/text.h"
#include "repository/head.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"
#include "repository/snapshot_record.h"
#include "repository/trust_anchor.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline {
namespace {

// The forget record naming each snapshot by id and by the digest of its sealed record, which
// must be in the catalog as a snapshot record.
Result<ForgetRecord> NameForgotten(catalog::Catalog& cat, const std::string& repository_id,
                                   const std::vector<catalog::SnapshotInfo>& snapshots) {
  ForgetRecord record;
  record.repository_id = repository_id;
  record.forgotten_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  for (const catalog::SnapshotInfo& s : snapshots) {
    if (s.record_id == 0) {
      return Status::Corruption("snapshot " + std::to_string(s.id) +
                                " has no sealed record; run 'wanbackup verify'");
    }
    WB_ASSIGN_OR_RETURN(catalog::ChunkRecord sealed, cat.GetChunk(s.record_id));
    if (sealed.kind != catalog::ChunkKind::kSnapshotRecord) {
      return Status::Corruption("snapshot " + std::to_string(s.id) +
                                ": its record row is not a snapshot record; run 'wanbackup "
                                "verify'");
    }
    record.snapshots.push_back(ForgottenSnapshot{s.id, sealed.digest});
  }
  return record;
}

// Seals the record into a new pack with the head that follows it, makes the pack durable, and
// indexes both in the catalog (in the caller's transaction). Returns the record's chunks row.
Result<int64_t> WriteForgetRecord(Repository& repo, const ForgetRecord& record,
                                  const SealedHead& head) {
  catalog::Catalog& cat = repo.catalog();
  const std::string plain = EncodeForgetRecord(record);
  RecordCodec codec(repo.keys(), repo.config().zstd_level);
  std::vector<uint8_t> sealed;
  const Digest digest = codec.SealWhole(reinterpret_cast<const uint8_t*>(plain.data()),
                                        plain.size(), RecordKind::kForget, &sealed);
  int64_t pack_id = 0;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack, repo.NewPack(&pack_id));
  WB_ASSIGN_OR_RETURN(const uint64_t offset, pack->Append(sealed.data(), sealed.size()));
  WB_ASSIGN_OR_RETURN(const uint64_t head_offset,
                      pack->Append(head.bytes.data(), head.bytes.size()));
  // The records are durable before the catalog forgets anything (docs/durability.md).
  WB_RETURN_IF_ERROR(pack->Sync());
  WB_RETURN_IF_ERROR(cat.SetPackSize(pack_id, pack->size()));
  WB_RETURN_IF_ERROR(IndexHead(cat, head, pack_id, head_offset));
  catalog::ChunkRecord row;
  row.kind = catalog::ChunkKind::kForgetRecord;
  row.digest = digest;
  row.pack_id = pack_id;
  row.offset = offset;
  row.stored_size = static_cast<uint32_t>(sealed.size() - kRecordHeaderSize);
  row.raw_size = static_cast<uint32_t>(plain.size());
  return cat.AddChunk(row);
}

// Ids are never given out again, even after the newest snapshot was forgotten: the floor
// becomes at least the largest forgotten id.
Status RaiseSnapshotIdFloor(catalog::Catalog& cat, const ForgetRecord& record) {
  int64_t max_id = 0;
  for (const ForgottenSnapshot& s : record.snapshots)
    max_id = std::max(max_id, s.id);
  WB_ASSIGN_OR_RETURN(const std::string floor, cat.GetSetting(catalog::kSnapshotIdFloor));
  const int64_t old_floor = std::strtoll(floor.c_str(), nullptr, 10);
  return cat.PutSetting(catalog::kSnapshotIdFloor, std::to_string(std::max(old_floor, max_id)));
}

// Seals `record` with the head that follows (the catalog's set without the snapshots in
// `listed`, which leave the catalog in the same transaction).
Result<ForgetOutcome> SealForget(Repository& repo, const ForgetRecord& record,
                                 const std::vector<catalog::SnapshotInfo>& listed) {
  ForgetOutcome outcome;
  catalog::Catalog& cat = repo.catalog();
  // Before the first record of a kind a format-2 wanbackup does not know.
  if (repo.config().format < kRepositoryFormat) {
    WB_RETURN_IF_ERROR(repo.UpgradeConfig());
    outcome.upgraded_format = true;
  }
  WB_ASSIGN_OR_RETURN(auto txn, cat.Begin());
  WB_ASSIGN_OR_RETURN(std::vector<HeadEntry> set, CatalogSnapshotSet(cat));
  std::erase_if(set, [&](const HeadEntry& e) {
    return std::any_of(listed.begin(), listed.end(),
                       [&](const catalog::SnapshotInfo& s) { return s.id == e.id; });
  });
  WB_ASSIGN_OR_RETURN(const SealedHead head, SealNextHead(repo, std::move(set)));
  WB_ASSIGN_OR_RETURN(outcome.record_id, WriteForgetRecord(repo, record, head));
  for (const catalog::SnapshotInfo& s : listed)
    WB_RETURN_IF_ERROR(cat.DeleteSnapshot(s.id));
  WB_RETURN_IF_ERROR(RaiseSnapshotIdFloor(cat, record));
  WB_FAILPOINT("forget.before-commit");
  WB_RETURN_IF_ERROR(txn->Commit());
  repo.HeadCommitted(head.record.counter);
  WB_FAILPOINT("forget.after-commit");
  return outcome;
}

// How much of `lost`'s data no pack holds.
Status CountMissing(Repository& repo, RecordCodec& codec, LostSnapshot* lost) {
  SealedMap map(repo, codec, lost->record);
  for (uint64_t segment = 0; segment < lost->record.segments.size(); ++segment) {
    Result<const std::vector<Digest>*> digests = map.Segment(segment);
    if (!digests.ok()) {
      ++lost->segments_missing;
      continue;
    }
    for (const Digest& d : **digests) {
      if (d == kZeroChunkDigest) continue;
      WB_ASSIGN_OR_RETURN(const std::optional<int64_t> row, repo.catalog().FindChunk(d));
      if (!row) ++lost->missing;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ForgetOutcome> ForgetSnapshots(Repository& repo,
                                      const std::vector<catalog::SnapshotInfo>& snapshots) {
  if (snapshots.empty()) return ForgetOutcome{};
  WB_ASSIGN_OR_RETURN(const ForgetRecord record,
                      NameForgotten(repo.catalog(), repo.config().id, snapshots));
  return SealForget(repo, record, snapshots);
}

Result<std::vector<LostSnapshot>> FindLostSnapshots(Repository& repo, int64_t id) {
  catalog::Catalog& cat = repo.catalog();
  RecordCodec codec(repo.keys(), repo.config().zstd_level);
  std::set<int64_t> listed;  // the sealed records of the catalog's snapshots
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::SnapshotInfo> rows, cat.Snapshots(true));
  for (const catalog::SnapshotInfo& s : rows)
    listed.insert(s.record_id);
  std::vector<LostSnapshot> found;
  WB_RETURN_IF_ERROR(cat.ForEachChunk([&](const catalog::ChunkRecord& c) -> Status {
    if (c.kind != catalog::ChunkKind::kSnapshotRecord || listed.count(c.id) != 0) {
      return Status::Ok();
    }
    WB_ASSIGN_OR_RETURN(std::vector<uint8_t> plain,
                        LoadRecord(repo, codec, c, RecordKind::kSnapshot, kMaxSnapshotRecordSize));
    WB_ASSIGN_OR_RETURN(SnapshotRecord r, DecodeSnapshotRecord(plain.data(), plain.size()));
    if (r.info.id == id && r.repository_id == repo.config().id) {
      found.push_back(LostSnapshot{std::move(r), c.id, c.digest, 0, 0});
    }
    return Status::Ok();
  }));
  if (found.empty()) return found;
  WB_ASSIGN_OR_RETURN(const std::set<Digest> forgotten, ForgottenRecords(repo, codec));
  std::erase_if(found, [&](const LostSnapshot& l) { return forgotten.count(l.digest) != 0; });
  for (LostSnapshot& l : found)
    WB_RETURN_IF_ERROR(CountMissing(repo, codec, &l));
  return found;
}

Result<ForgetOutcome> ForgetLostSnapshots(Repository& repo, const std::vector<LostSnapshot>& lost) {
  if (lost.empty()) return ForgetOutcome{};
  ForgetRecord record;
  record.repository_id = repo.config().id;
  record.forgotten_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  for (const LostSnapshot& l : lost)
    record.snapshots.push_back(ForgottenSnapshot{l.record.info.id, l.digest});
  return SealForget(repo, record, {});
}

Result<std::vector<MissingPack>> RecordedMissingPacks(Repository& repo) {
  WB_ASSIGN_OR_RETURN(const std::string recorded,
                      repo.catalog().GetSetting(catalog::kMissingPacks));
  std::vector<MissingPack> missing;
  std::istringstream names(recorded);
  for (std::string name; names >> name;)
    missing.push_back(MissingPack{name, false});
  if (missing.empty()) return missing;
  WB_ASSIGN_OR_RETURN(const std::vector<StoredPack> stored, repo.packs().List());
  for (MissingPack& m : missing) {
    m.back = std::any_of(stored.begin(), stored.end(),
                         [&](const StoredPack& s) { return s.name == m.name; });
  }
  return missing;
}

Result<std::vector<MissingRecord>> RecordedMissingRecords(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::string recorded, cat.GetSetting(catalog::kMissingRecords));
  std::vector<MissingRecord> missing;
  std::istringstream entries(recorded);
  for (std::string entry; entries >> entry;) {
    const size_t colon = entry.find(':');
    const std::optional<uint64_t> id = ParseDecimalU64(entry.substr(0, colon));
    if (colon == std::string::npos || !id) continue;
    MissingRecord m;
    m.id = static_cast<int64_t>(*id);
    const std::string hex = entry.substr(colon + 1);
    if (!hex.empty() && !FromHex(hex, m.record.data(), m.record.size())) continue;
    missing.push_back(m);
  }
  return missing;
}

Result<std::vector<std::string>> ForgetMissingPacks(Repository& repo, bool dry_run) {
  WB_ASSIGN_OR_RETURN(const std::vector<MissingPack> missing, RecordedMissingPacks(repo));
  WB_ASSIGN_OR_RETURN(const std::vector<MissingRecord> records,
                      RecordedMissingRecords(repo.catalog()));
  std::vector<std::string> given_up;
  for (const MissingPack& m : missing) {
    if (m.back) {
      return Status::InvalidArgument(
          "pack " + repo.packs().Describe(m.name) +
          " is back: 'wanbackup repair catalog' indexes it and brings back what it holds; "
          "nothing was forgotten");
    }
    given_up.push_back("pack " + repo.packs().Describe(m.name));
  }
  // The list is catalog data that anyone with the files can write (round 13: a forged entry
  // had a forget record sealed for a whole snapshot, AD1, or for a number far above the rest,
  // which then stopped every snapshot, AD2). So nothing is sealed for an entry with a digest:
  // the repair that recorded it sealed a head without it, and no later repair looks for it. A
  // number-only entry, which this client's anchor makes every repair record again, gets a
  // forget record (zero digest, which no record has) only when it is that anchor's highest
  // number and no record in the catalog has it.
  const Result<std::optional<AnchorRecord>> anchor =
      TrustAnchorStore(DefaultSecurityDir()).Load(repo.config().id);
  const int64_t highest =
      anchor.ok() && *anchor ? static_cast<int64_t>((*anchor)->highest_snapshot) : 0;
  std::vector<int64_t> by_number;
  for (const MissingRecord& r : records) {
    given_up.push_back("the sealed record of snapshot " + std::to_string(r.id));
    if (r.record != Digest{} || r.id != highest || highest >= catalog::kMaxSnapshotId) continue;
    Result<catalog::SnapshotInfo> listed = repo.catalog().GetSnapshot(r.id);
    if (listed.ok()) continue;
    WB_ASSIGN_OR_RETURN(const std::vector<LostSnapshot> unlisted, FindLostSnapshots(repo, r.id));
    if (unlisted.empty()) by_number.push_back(r.id);
  }
  if (dry_run || given_up.empty()) return given_up;
  if (!by_number.empty()) {
    ForgetRecord record;
    record.repository_id = repo.config().id;
    record.forgotten_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
    for (const int64_t id : by_number)
      record.snapshots.push_back(ForgottenSnapshot{id, Digest{}});
    WB_RETURN_IF_ERROR(SealForget(repo, record, {}).status());
  }
  WB_ASSIGN_OR_RETURN(auto txn, repo.catalog().Begin());
  WB_RETURN_IF_ERROR(repo.catalog().PutSetting(catalog::kMissingPacks, ""));
  WB_RETURN_IF_ERROR(repo.catalog().PutSetting(catalog::kMissingRecords, ""));
  WB_RETURN_IF_ERROR(txn->Commit());
  return given_up;
}

Status CheckCatalogNamesEveryPack(Repository& repo) {
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::PackInfo> named, repo.catalog().Packs());
  std::map<std::string, uint64_t> sizes;
  for (const catalog::PackInfo& p : named)
    sizes[p.name] = p.size;
  WB_ASSIGN_OR_RETURN(const std::vector<StoredPack> stored, repo.packs().List());
  for (const StoredPack& s : stored) {
    const auto it = sizes.find(s.name);
    if (it == sizes.end() || s.size > it->second) {
      return Status::InvalidArgument(
          "pack " + repo.packs().Describe(s.name) +
          (it == sizes.end() ? " is in the repository but not in the catalog"
                             : " holds more than the catalog knows of it") +
          ": run 'wanbackup repair catalog' first, which indexes it (what it holds may bring "
          "the snapshot back); nothing was forgotten");
    }
  }
  return Status::Ok();
}

Result<std::set<Digest>> ForgottenRecords(Repository& repo, RecordCodec& codec) {
  std::set<Digest> forgotten;
  WB_RETURN_IF_ERROR(repo.catalog().ForEachChunk([&](const catalog::ChunkRecord& c) -> Status {
    if (c.kind != catalog::ChunkKind::kForgetRecord) return Status::Ok();
    WB_ASSIGN_OR_RETURN(std::vector<uint8_t> plain,
                        LoadRecord(repo, codec, c, RecordKind::kForget, kMaxForgetRecordSize));
    WB_ASSIGN_OR_RETURN(ForgetRecord r, DecodeForgetRecord(plain.data(), plain.size()));
    for (const ForgottenSnapshot& f : r.snapshots)
      forgotten.insert(f.record);
    return Status::Ok();
  }));
  return forgotten;
}

}  // namespace wanbackup::pipeline
