#include "repository/cache_refresh.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common/failpoint.h"
#include "common/text.h"
#include "common/units.h"
#include "repository/head_record.h"
#include "repository/internal/rebuilder.h"
#include "repository/pack_record.h"
#include "repository/record.h"

namespace wanbackup::pipeline {

ExaminedPacks ParseExaminedPacks(const std::string& setting) {
  ExaminedPacks packs;
  std::istringstream entries(setting);
  for (std::string entry; entries >> entry;) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::optional<uint64_t> size = ParseDecimalU64(entry.substr(colon + 1));
    if (size) packs[entry.substr(0, colon)] = *size;
  }
  return packs;
}

std::string FormatExaminedPacks(const ExaminedPacks& packs) {
  std::string out;
  for (const auto& [name, size] : packs)
    out += (out.empty() ? "" : " ") + name + ":" + std::to_string(size);
  return out;
}

CacheRefreshPlan PlanCacheRefresh(const std::vector<catalog::PackInfo>& known,
                                  const std::vector<StoredPack>& stored,
                                  const ExaminedPacks& examined) {
  CacheRefreshPlan plan;
  std::map<std::string, const catalog::PackInfo*> by_name;
  for (const catalog::PackInfo& p : known)
    by_name[p.name] = &p;
  std::string smaller;
  for (const StoredPack& p : stored) {
    const auto seen = examined.find(p.name);
    const bool read_before = seen != examined.end() && seen->second == p.size;
    const auto k = by_name.find(p.name);
    if (k == by_name.end()) {
      if (!read_before) plan.added.push_back(p);
      continue;
    }
    if (p.size > k->second->size && !read_before)
      plan.grown.push_back(GrownPack{k->second->id, k->second->size, p});
    if (p.size < k->second->size && smaller.empty()) smaller = p.name;
    by_name.erase(k);
  }
  if (!by_name.empty()) {  // another host pruned
    plan.kind = CacheRefreshPlan::Kind::kFull;
    plan.why = std::to_string(by_name.size()) + " of the packs it named are gone";
    return plan;
  }
  // Nothing new (kFresh), as before: a pack that is only smaller changes nothing.
  if (plan.added.empty() && plan.grown.empty()) return plan;
  if (!smaller.empty()) {
    plan.kind = CacheRefreshPlan::Kind::kFull;
    plan.why = "pack " + smaller + " is smaller than it knew it";
    return plan;
  }
  if (known.empty()) {
    plan.kind = CacheRefreshPlan::Kind::kFull;
    plan.why = "it indexed no pack yet";
    return plan;
  }
  plan.kind = CacheRefreshPlan::Kind::kIncremental;
  return plan;
}

namespace internal {

// Crash safety: the refresh changes the cache's catalog in place, in one SQLite transaction,
// rather than on a copy renamed over it (InstallCacheCatalog) as the full rebuild does. The
// refresh lock is held exclusively, so no other process has the catalog open; SQLite's commit is
// atomic under a kill or a power cut (a kill before it leaves the old catalog, rolled back when
// next opened); and the old catalog may be large (millions of chunk rows for a repository of
// terabytes) while what a refresh adds is small, so copying it would cost more local I/O than
// the refresh itself. A commit lost to a power cut leaves the old catalog, which the next open
// finds stale again.
Result<std::optional<RebuildReport>> Rebuilder::RunIncremental(const CacheRefreshPlan& plan,
                                                               std::string* why) {
  WB_ASSIGN_OR_RETURN(catalog_, catalog::Catalog::Open(repo_.CatalogPath(), false));
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::PackInfo> known, catalog_->Packs());
  for (const catalog::PackInfo& p : known)
    indexed_names_[p.id] = p.name;
  WB_ASSIGN_OR_RETURN(auto txn, catalog_->Begin());
  WB_ASSIGN_OR_RETURN(const bool has_head, SeedHead());
  if (!has_head) {
    *why = "it names no head it can read";
    return std::optional<RebuildReport>();
  }
  // Numbers given out stay given out: the floor's, and those of complete snapshots (one that
  // another host's forget removes below included). A run that did not complete sealed nothing
  // under its number unless a new pack holds its record (max_id_): its row goes below and, as
  // in a full rebuild, its number is free again.
  WB_ASSIGN_OR_RETURN(const std::string floor, catalog_->GetSetting(catalog::kSnapshotIdFloor));
  WB_ASSIGN_OR_RETURN(const int64_t listed_before, CatalogHighestListedId(*catalog_));
  const int64_t highest_before =
      std::max<int64_t>(listed_before, std::max<int64_t>(0, std::atoll(floor.c_str())));
  // The reads ahead must know every pack before the first is indexed, so the lists are walked
  // twice: here for what to read, below to index it in the same order.
  std::vector<HeaderPrefetch::Job> jobs;
  for (const StoredPack& p : plan.added) {
    bytes_total_ += p.size;
    jobs.push_back({p.name, p.size, kPackHeaderSize});
  }
  for (const GrownPack& g : plan.grown) {
    WB_RETURN_IF_ERROR(CheckIndexedPart(g, why));
    if (!why->empty()) return std::optional<RebuildReport>();
    bytes_total_ += g.pack.size - g.known_size;
    jobs.push_back({g.pack.name, g.pack.size, g.known_size});
  }
  StartReading(std::move(jobs));
  for (const StoredPack& p : plan.added) {
    WB_RETURN_IF_ERROR(IndexPack(p));
    WB_FAILPOINT("cache-refresh.after-pack");
  }
  for (const GrownPack& g : plan.grown) {
    WB_RETURN_IF_ERROR(IndexPack(g.pack, g.id, g.known_size));
    WB_FAILPOINT("cache-refresh.after-pack");
  }
  prefetch_.reset();
  if (needs_full_) {
    *why = needs_full_why_;
    return std::optional<RebuildReport>();
  }
  WB_RETURN_IF_ERROR(FollowHead(why));
  if (!why->empty()) return std::optional<RebuildReport>();
  WB_RETURN_IF_ERROR(RaiseCatalogSnapshotIdFloor(*catalog_, std::max(highest_before, max_id_)));
  WB_RETURN_IF_ERROR(NoteExamined());
  WB_FAILPOINT("cache-refresh.before-commit");
  WB_RETURN_IF_ERROR(txn->Commit());
  catalog_.reset();
  report_.incremental = true;
  return std::optional<RebuildReport>(Report());
}

// A grown pack is indexed from where the cache left it: the rows of its earlier records are
// trusted to name what is there. Whoever can write the bucket could have replaced it with a
// larger object under the same pack header (another pack of the repository, say), and those rows
// would then name other bytes. So the last record the cache indexes in it must still be there,
// header for header (one ranged read); when it is not, the pack is indexed whole again, by a full
// rebuild. A pack the cache knew as its header alone (what earlier versions uploaded first) has no
// row to check: IndexPack checks its header.
Status Rebuilder::CheckIndexedPart(const GrownPack& g, std::string* why) {
  if (g.known_size <= kPackHeaderSize) return Status::Ok();
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::ChunkRecord> rows, catalog_->ChunksInPack(g.id));
  if (rows.empty()) return Status::Ok();  // no row names its bytes
  const catalog::ChunkRecord& last = rows.back();
  WB_ASSIGN_OR_RETURN(const std::unique_ptr<PackReader> reader, OpenPack(g.pack.name));
  uint8_t bytes[kRecordHeaderSize];
  WB_RETURN_IF_ERROR(reader->ReadAt(last.offset, bytes, sizeof bytes));
  const Result<RecordHeader> h = ParseRecordHeader(bytes);
  if (!h.ok() || h->digest != last.digest || h->stored_size != last.stored_size ||
      h->raw_size != last.raw_size || static_cast<catalog::ChunkKind>(h->kind) != last.kind) {
    *why = "pack " + g.pack.name + " grew, and its record at " + std::to_string(last.offset) +
           " is not the one the cache indexed there";
  }
  return Status::Ok();
}

Status Rebuilder::NoteExamined() {
  if (examined_.empty()) return Status::Ok();
  WB_ASSIGN_OR_RETURN(const std::string before, catalog_->GetSetting(kCacheExaminedPacks));
  ExaminedPacks all = ParseExaminedPacks(before);
  for (const auto& [name, size] : examined_)
    all[name] = size;
  return catalog_->PutSetting(kCacheExaminedPacks, FormatExaminedPacks(all));
}

Result<bool> Rebuilder::SeedHead() {
  WB_ASSIGN_OR_RETURN(const std::optional<int64_t> row, CatalogHeadRow(*catalog_));
  if (!row) return false;
  WB_ASSIGN_OR_RETURN(const catalog::ChunkRecord c, catalog_->GetChunk(*row));
  WB_ASSIGN_OR_RETURN(const uint64_t counter, CatalogHeadCounter(*catalog_));
  const Status read = ReadIndexed(c, RecordKind::kHead, kMaxHeadRecordSize);
  if (read.code() == StatusCode::kCorruption) return false;
  WB_RETURN_IF_ERROR(read);
  Result<HeadRecord> head = DecodeHeadRecord(plain_.data(), plain_.size());
  if (!head.ok() || head->repository_id != repo_.config().id || head->counter != counter) {
    return false;
  }
  head_.emplace(std::move(*head), c.digest);
  return true;
}

Status Rebuilder::ReadIndexed(const catalog::ChunkRecord& c, RecordKind kind, size_t max_raw) {
  if (c.raw_size > max_raw) {
    return Status::Corruption("record " + std::to_string(c.id) + " claims " +
                              std::to_string(c.raw_size) + " bytes, more than such a record holds");
  }
  auto reader = indexed_readers_.find(c.pack_id);
  if (reader == indexed_readers_.end()) {
    const auto name = indexed_names_.find(c.pack_id);
    if (name == indexed_names_.end()) {
      return Status::Corruption("record " + std::to_string(c.id) + " is in no pack indexed before");
    }
    WB_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> opened, OpenPack(name->second));
    reader = indexed_readers_.emplace(c.pack_id, std::move(opened)).first;
  }
  WB_ASSIGN_OR_RETURN(const RecordHeader h,
                      ReadRecordAt(*reader->second, c.offset, c.stored_size, &record_));
  if (h.digest != c.digest || h.raw_size != c.raw_size || h.kind != kind) {
    return Status::Corruption("the record in the pack is not the one the catalog names");
  }
  plain_.resize(h.raw_size);
  return codec_.Open(h, record_.data() + kRecordHeaderSize, plain_.data());
}

Result<std::optional<std::pair<int64_t, SnapshotRecord>>> Rebuilder::FindSealed(
    const HeadEntry& e) {
  using Found = std::optional<std::pair<int64_t, SnapshotRecord>>;
  for (const Sealed& s : sealed_) {
    if (s.digest == e.record && s.record.info.id == e.id) return Found({s.row, s.record});
  }
  WB_ASSIGN_OR_RETURN(const std::optional<int64_t> row, catalog_->FindChunk(e.record));
  if (!row) return Found();
  WB_ASSIGN_OR_RETURN(const catalog::ChunkRecord c, catalog_->GetChunk(*row));
  if (c.kind != catalog::ChunkKind::kSnapshotRecord) return Found();
  const Status read = ReadIndexed(c, RecordKind::kSnapshot, kMaxSnapshotRecordSize);
  if (read.code() != StatusCode::kCorruption) WB_RETURN_IF_ERROR(read);
  if (!read.ok()) {
    report_.problems.push_back("snapshot " + std::to_string(e.id) + ": " + read.message());
    return Found();
  }
  Result<SnapshotRecord> r = DecodeSnapshotRecord(plain_.data(), plain_.size());
  if (!r.ok() || r->repository_id != repo_.config().id || r->info.id != e.id) return Found();
  return Found({*row, std::move(*r)});
}

// The rules of the full cache rebuild (Rebuilder::RebuildSnapshots, SettleHead): the snapshots
// are exactly those the newest head lists, each from the sealed record it names; one that
// cannot be rebuilt is Corruption naming 'repair catalog'. Rows of runs that did not complete
// go, as a rebuild drops them.
Status Rebuilder::FollowHead(std::string* why) {
  const HeadRecord& newest = head_->first;
  std::set<int64_t> listed_ids;
  for (const HeadEntry& e : newest.snapshots) {
    if (!listed_ids.insert(e.id).second) {
      *why = "the newest head lists snapshot " + std::to_string(e.id) + " twice";
      return Status::Ok();
    }
  }
  WB_ASSIGN_OR_RETURN(const std::vector<HeadEntry> before, CatalogSnapshotSet(*catalog_));
  const auto listed = [&](const HeadEntry& e) {
    return std::find(newest.snapshots.begin(), newest.snapshots.end(), e) != newest.snapshots.end();
  };
  std::set<int64_t> kept;
  for (const HeadEntry& e : before) {
    if (listed(e)) kept.insert(e.id);
  }
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::SnapshotInfo> rows, catalog_->Snapshots(true));
  for (const catalog::SnapshotInfo& row : rows) {
    if (kept.count(row.id) == 0) WB_RETURN_IF_ERROR(catalog_->DeleteSnapshot(row.id));
  }
  for (const HeadEntry& e : newest.snapshots) {
    if (kept.count(e.id) != 0) continue;
    WB_ASSIGN_OR_RETURN(const auto found, FindSealed(e));
    if (found) WB_RETURN_IF_ERROR(AddSnapshot(found->first, found->second));
  }
  WB_ASSIGN_OR_RETURN(const std::vector<HeadEntry> now, CatalogSnapshotSet(*catalog_));
  return SettleHead(now);
}

}  // namespace internal

Result<RebuildReport> RefreshCacheCatalog(Repository& repo, const CacheRefreshPlan& plan) {
  RebuildOptions options;
  options.cache = true;
  std::string why = plan.why;
  if (plan.kind == CacheRefreshPlan::Kind::kIncremental) {
    internal::Rebuilder refresher(repo, options);
    Result<std::optional<RebuildReport>> done = refresher.RunIncremental(plan, &why);
    if (done.ok() && *done) return std::move(**done);
    // A head that lists what cannot be rebuilt: the full rebuild judges the same head from
    // every pack, and says so again if it must.
    if (!done.ok() && done.status().code() != StatusCode::kCorruption) return done.status();
    if (!done.ok()) why = "the incremental refresh found: " + done.status().message();
  }
  WB_ASSIGN_OR_RETURN(RebuildReport report, RebuildCatalog(repo, options));
  report.full_because = why;
  return report;
}

std::string DescribeCacheRefresh(const RebuildReport& report) {
  const std::string read = std::to_string(report.reads) + " reads, " +
                           FormatBytes(report.bytes_read) + " read from the repository";
  if (report.incremental) {
    const uint64_t added = report.packs - report.packs_grown;
    return "refreshed the catalog cache incrementally: " + std::to_string(added) + " new pack" +
           (added == 1 ? "" : "s") + " and " + std::to_string(report.packs_grown) +
           " grown indexed, " + read;
  }
  return "rebuilt the catalog cache" +
         (report.full_because.empty() ? std::string() : " (" + report.full_because + ")") + ": " +
         std::to_string(report.packs) + " pack" + (report.packs == 1 ? "" : "s") + " indexed, " +
         read;
}

}  // namespace wanbackup::pipeline
