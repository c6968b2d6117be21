#include "repository/head.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "common/text.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"

namespace wanbackup::pipeline {
namespace {

struct HeadName {
  uint64_t counter = 0;
  Digest digest{};
};

// Parses the setting; nullopt when unset. Corruption when malformed.
Result<std::optional<HeadName>> ReadHeadSetting(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::string value, cat.GetSetting(kHeadSetting));
  if (value.empty()) return std::optional<HeadName>();
  HeadName name;
  const size_t space = value.find(' ');
  // Digits only and no overflow: a counter strtoull would take ("+3", a wrapped huge number)
  // is not what a head record holds.
  const std::optional<uint64_t> counter =
      space == std::string::npos ? std::nullopt : ParseDecimalU64(value.substr(0, space));
  name.counter = counter.value_or(0);
  if (name.counter == 0 ||
      !FromHex(value.substr(space + 1), name.digest.data(), name.digest.size())) {
    return Status::Corruption(
        "the catalog's head setting is malformed; run 'wanbackup repair "
        "catalog'");
  }
  return std::optional<HeadName>(name);
}

Status Unreadable(uint64_t counter, const std::string& why) {
  return Status::Corruption("the repository's head (counter " + std::to_string(counter) +
                            ") cannot be read: " + why +
                            " (a pack is missing or was altered; run 'wanbackup verify')");
}

}  // namespace

Result<std::vector<HeadEntry>> CatalogSnapshotSet(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, cat.Snapshots(false));
  std::vector<HeadEntry> set;
  set.reserve(all.size());
  for (const catalog::SnapshotInfo& s : all) {
    HeadEntry e;
    e.id = s.id;
    if (s.record_id != 0) {
      Result<catalog::ChunkRecord> c = cat.GetChunk(s.record_id);
      if (c.ok()) e.record = c->digest;  // else all zeros: names no head's record
    }
    set.push_back(e);
  }
  std::sort(set.begin(), set.end(),
            [](const HeadEntry& a, const HeadEntry& b) { return a.id < b.id; });
  return set;
}

Result<uint64_t> CatalogHeadCounter(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::optional<HeadName> name, ReadHeadSetting(cat));
  return name ? name->counter : 0;
}

Result<std::optional<int64_t>> CatalogHeadRow(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::optional<HeadName> name, ReadHeadSetting(cat));
  if (!name) return std::optional<int64_t>();
  return cat.FindChunk(name->digest);
}

Result<std::optional<HeadRecord>> LoadHead(Repository& repo) {
  catalog::Catalog& cat = repo.catalog();
  WB_ASSIGN_OR_RETURN(const std::optional<HeadName> name, ReadHeadSetting(cat));
  if (!name) return std::optional<HeadRecord>();
  Result<std::optional<int64_t>> row = cat.FindChunk(name->digest);
  if (!row.ok() || !row->has_value()) return Unreadable(name->counter, "it is not indexed");
  WB_ASSIGN_OR_RETURN(const catalog::ChunkRecord c, cat.GetChunk(**row));
  RecordCodec codec(repo.keys(), 0);
  Result<std::vector<uint8_t>> plain =
      LoadRecord(repo, codec, c, RecordKind::kHead, kMaxHeadRecordSize);
  if (!plain.ok()) return Unreadable(name->counter, plain.status().message());
  Result<HeadRecord> head = DecodeHeadRecord(plain->data(), plain->size());
  if (!head.ok()) return Unreadable(name->counter, head.status().message());
  if (head->repository_id != repo.config().id) {
    return Unreadable(name->counter, "it is another repository's");
  }
  if (head->counter != name->counter) {
    return Unreadable(name->counter, "it holds counter " + std::to_string(head->counter));
  }
  return std::optional<HeadRecord>(std::move(*head));
}

Result<SealedHead> SealNextHead(Repository& repo, std::vector<HeadEntry> set, uint64_t floor) {
  WB_ASSIGN_OR_RETURN(const uint64_t current, CatalogHeadCounter(repo.catalog()));
  const uint64_t newest = std::max(current, floor);
  if (newest == UINT64_MAX) {
    return Status::Corruption("the repository's head counter cannot grow any further");
  }
  return SealHead(repo, std::move(set), newest + 1);
}

SealedHead SealHead(const Repository& repo, std::vector<HeadEntry> set, uint64_t counter) {
  std::sort(set.begin(), set.end(),
            [](const HeadEntry& a, const HeadEntry& b) { return a.id < b.id; });
  SealedHead head;
  head.record.repository_id = repo.config().id;
  head.record.counter = counter;
  head.record.written_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  head.record.snapshots = std::move(set);
  const std::string plain = EncodeHeadRecord(head.record);
  RecordCodec codec(repo.keys(), repo.config().zstd_level);
  head.digest = codec.SealWhole(reinterpret_cast<const uint8_t*>(plain.data()), plain.size(),
                                RecordKind::kHead, &head.bytes);
  head.raw_size = static_cast<uint32_t>(plain.size());
  return head;
}

Result<SealedHead> SealHeadAdding(Repository& repo, const HeadEntry& added) {
  WB_ASSIGN_OR_RETURN(std::vector<HeadEntry> set, CatalogSnapshotSet(repo.catalog()));
  set.push_back(added);
  return SealNextHead(repo, std::move(set));
}

Status IndexHead(catalog::Catalog& cat, const SealedHead& head, int64_t pack_id, uint64_t offset) {
  catalog::ChunkRecord row;
  row.kind = catalog::ChunkKind::kHeadRecord;
  row.digest = head.digest;
  row.pack_id = pack_id;
  row.offset = offset;
  row.stored_size = static_cast<uint32_t>(head.bytes.size() - kRecordHeaderSize);
  row.raw_size = head.raw_size;
  WB_RETURN_IF_ERROR(cat.AddChunk(row).status());
  return RecordHead(cat, head.record, head.digest);
}

Status RecordHead(catalog::Catalog& cat, const HeadRecord& head, const Digest& digest) {
  return cat.PutSetting(kHeadSetting,
                        std::to_string(head.counter) + " " + ToHex(digest.data(), digest.size()));
}

Result<int64_t> CatalogHighestSnapshotId(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::SnapshotInfo> rows, cat.Snapshots(true));
  WB_ASSIGN_OR_RETURN(const std::string floor, cat.GetSetting(catalog::kSnapshotIdFloor));
  int64_t highest = std::max<int64_t>(0, std::strtoll(floor.c_str(), nullptr, 10));
  for (const catalog::SnapshotInfo& row : rows)
    highest = std::max(highest, row.id);
  return highest;
}

Result<int64_t> CatalogHighestListedId(catalog::Catalog& cat) {
  WB_ASSIGN_OR_RETURN(const std::vector<HeadEntry> set, CatalogSnapshotSet(cat));
  return set.empty() ? 0 : set.back().id;  // ascending
}

Status RaiseCatalogSnapshotIdFloor(catalog::Catalog& cat, int64_t highest) {
  WB_ASSIGN_OR_RETURN(const int64_t now, CatalogHighestSnapshotId(cat));
  if (highest <= now) return Status::Ok();
  return cat.PutSetting(catalog::kSnapshotIdFloor, std::to_string(highest));
}

Result<uint64_t> CheckCatalogAgainstHead(Repository& repo) {
  catalog::Catalog& cat = repo.catalog();
  // No read transaction spans these reads (a reader must not block the writer), so a snapshot
  // committing meanwhile could pair an old set with a new head: read until the head stays put.
  // Every commit that changes the set also changes the head.
  for (int attempt = 0;; ++attempt) {
    WB_ASSIGN_OR_RETURN(const std::string before, cat.GetSetting(kHeadSetting));
    WB_ASSIGN_OR_RETURN(const std::optional<HeadRecord> head, LoadHead(repo));
    if (!head) return uint64_t{0};
    WB_ASSIGN_OR_RETURN(const std::vector<HeadEntry> set, CatalogSnapshotSet(cat));
    WB_ASSIGN_OR_RETURN(const std::string after, cat.GetSetting(kHeadSetting));
    if (before != after && attempt < 10) continue;
    const std::string difference = DescribeSetDifference(head->snapshots, set);
    if (difference.empty()) return head->counter;
    return Status::Corruption("the catalog does not match the repository's head (counter " +
                              std::to_string(head->counter) + "): " + difference +
                              "; run 'wanbackup repair catalog'");
  }
}

}  // namespace wanbackup::pipeline
