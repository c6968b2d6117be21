#include "repository/prune.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "common/cancel.h"
#include "common/failpoint.h"
#include "common/text.h"
#include "common/units.h"
#include "repository/forget.h"
#include "repository/head.h"
#include "repository/pack_record.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"
#include "repository/snapshot_record.h"

namespace wanbackup::pipeline {
namespace {

size_t MaxRaw(catalog::ChunkKind kind, uint32_t chunk_size) {
  switch (kind) {
    case catalog::ChunkKind::kData:
      return chunk_size;
    case catalog::ChunkKind::kMapSegment:
      return kMaxMapSegmentSize;
    case catalog::ChunkKind::kSnapshotRecord:
      return kMaxSnapshotRecordSize;
    case catalog::ChunkKind::kForgetRecord:
      return kMaxForgetRecordSize;
    case catalog::ChunkKind::kHeadRecord:
      return kMaxHeadRecordSize;
  }
  return 0;
}

class Pruner {
 public:
  Pruner(Repository& repo, const PruneOptions& options)
      : repo_(repo), cat_(repo.catalog()), options_(options), codec_(repo.keys(), 0) {}

  Result<PruneReport> Run();

 private:
  Status FindOrphans();
  Status RefuseUnlisted();
  Status RefuseMissingPacks();
  Status RemoveOrphans();
  Status MarkLive();
  Status Measure(std::vector<PackUsage>* usage);
  Status Execute(const PrunePlan& plan);
  Status CopyPack(int64_t pack_id);
  Status CloseWriter();
  Status CommitBatch(std::vector<int64_t>* old_packs);

  Repository& repo_;
  catalog::Catalog& cat_;
  const PruneOptions& options_;
  RecordCodec codec_;
  PruneReport report_;
  std::map<int64_t, catalog::PackInfo> packs_;        // the catalog's
  std::unordered_map<std::string, uint64_t> stored_;  // name -> size in the store
  std::vector<StoredPack> orphans_;                   // in the store, named by nothing
  std::vector<bool> live_;                            // by chunk id
  std::unique_ptr<catalog::Catalog::Transaction> txn_;
  std::unique_ptr<PackWriter> writer_;
  int64_t writer_id_ = 0;
  uint64_t batch_copied_ = 0;
  uint64_t bytes_written_ = 0;
  std::vector<uint8_t> record_, plain_;
};

// The sealed record at `offset`, when it reads, authenticates and decodes.
std::optional<SnapshotRecord> OpenSnapshotRecord(const PackReader& reader, RecordCodec& codec,
                                                 uint64_t offset, const RecordHeader& h) {
  if (h.raw_size > kMaxSnapshotRecordSize) return std::nullopt;
  std::vector<uint8_t> record;
  Result<RecordHeader> read = ReadRecordAt(reader, offset, h.stored_size, &record);
  if (!read.ok()) return std::nullopt;
  std::vector<uint8_t> plain(read->raw_size);
  if (!codec.Open(*read, record.data() + kRecordHeaderSize, plain.data()).ok()) {
    return std::nullopt;
  }
  Result<SnapshotRecord> r = DecodeSnapshotRecord(plain.data(), plain.size());
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

// A sealed snapshot record that no snapshot of the catalog lists: in a pack the catalog does not
// name, in bytes past what it names of a pack, or indexed but no snapshot's.
struct UnlistedSnapshot {
  std::string pack;
  Digest digest{};
  SnapshotRecord record;
};

// The sealed snapshot records of this repository in `pack` from `offset` (a record boundary) to
// `size`, read in order up to the first torn or damaged record (a rebuild looks further; this
// only has to see what a run wrote whole).
Status SealedSnapshotsIn(Repository& repo, RecordCodec& codec, const std::string& pack,
                         uint64_t offset, uint64_t size, std::vector<UnlistedSnapshot>* found) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> reader, repo.packs().Open(pack));
  // Not this repository's pack (or no pack at all): it holds none of its snapshots. A store
  // that does not answer (on S3 the header is the first request) stops prune instead.
  const Status header = CheckPackHeader(*reader, repo.config().id, pack);
  if (header.code() == StatusCode::kCorruption) return Status::Ok();
  WB_RETURN_IF_ERROR(header);
  for (offset = std::max<uint64_t>(offset, kPackHeaderSize); offset + kRecordHeaderSize <= size;) {
    uint8_t bytes[kRecordHeaderSize];
    WB_RETURN_IF_ERROR(reader->ReadAt(offset, bytes, sizeof bytes));
    Result<RecordHeader> h = ParseRecordHeader(bytes);
    if (!h.ok() || offset + kRecordHeaderSize + h->stored_size > size) break;
    if (h->kind == RecordKind::kSnapshot) {
      std::optional<SnapshotRecord> r = OpenSnapshotRecord(*reader, codec, offset, *h);
      if (r && r->repository_id == repo.config().id) {
        found->push_back(UnlistedSnapshot{pack, h->digest, std::move(*r)});
      }
    }
    offset += kRecordHeaderSize + h->stored_size;
  }
  return Status::Ok();
}

Status Pruner::FindOrphans() {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::PackInfo> packs, cat_.Packs());
  for (const catalog::PackInfo& p : packs)
    packs_[p.id] = p;
  std::unordered_map<std::string, int64_t> named;
  for (const auto& [id, p] : packs_)
    named[p.name] = id;
  WB_ASSIGN_OR_RETURN(std::vector<StoredPack> stored, repo_.packs().List());
  for (const StoredPack& s : stored) {
    if (named.count(s.name) != 0) {
      stored_[s.name] = s.size;
    } else {
      orphans_.push_back(s);
    }
  }
  for (const auto& [id, p] : packs_) {
    if (stored_.count(p.name) == 0) report_.missing_packs.push_back(p.name);
  }
  return Status::Ok();
}

// Prune removes no sealed snapshot that no forget record names (rounds 4, 6 and 7: U4, W1, X1,
// X2). What it removes or drops as unused (a pack the catalog does not name, the bytes of a pack
// past what the catalog names, an indexed record no snapshot lists) may hold one: a snapshot a
// catalog behind its packs does not list (an older copy put back, a rebuild while packs were
// missing, a copy taken while the snapshot ran), one `repair catalog` left out because another
// has its number, or one killed after it was sealed and before its commit (whole: repair keeps
// it). The catalog cannot tell these apart, so each stops prune before anything changes.
Status Pruner::RefuseUnlisted() {
  std::vector<UnlistedSnapshot> found;
  for (const StoredPack& s : orphans_)
    WB_RETURN_IF_ERROR(SealedSnapshotsIn(repo_, codec_, s.name, 0, s.size, &found));
  for (const auto& [id, p] : packs_) {
    const auto stored = stored_.find(p.name);
    if (stored != stored_.end() && stored->second > p.size) {
      WB_RETURN_IF_ERROR(SealedSnapshotsIn(repo_, codec_, p.name, p.size, stored->second, &found));
    }
  }
  // Of what the packs hold, a record the catalog indexes is judged as indexed, below.
  std::vector<UnlistedSnapshot> unlisted;
  for (UnlistedSnapshot& u : found) {
    WB_ASSIGN_OR_RETURN(const std::optional<int64_t> indexed, cat_.FindChunk(u.digest));
    if (!indexed) unlisted.push_back(std::move(u));
  }
  WB_RETURN_IF_ERROR(cat_.ForEachChunk([&](const catalog::ChunkRecord& c) -> Status {
    if (c.kind != catalog::ChunkKind::kSnapshotRecord || live_[static_cast<size_t>(c.id)]) {
      return Status::Ok();
    }
    WB_ASSIGN_OR_RETURN(
        std::vector<uint8_t> plain,
        LoadRecord(repo_, codec_, c, RecordKind::kSnapshot, kMaxSnapshotRecordSize));
    WB_ASSIGN_OR_RETURN(SnapshotRecord r, DecodeSnapshotRecord(plain.data(), plain.size()));
    const auto pack = packs_.find(c.pack_id);
    unlisted.push_back(
        UnlistedSnapshot{pack != packs_.end() ? pack->second.name : "?", c.digest, std::move(r)});
    return Status::Ok();
  }));
  if (unlisted.empty()) return Status::Ok();
  WB_ASSIGN_OR_RETURN(const std::set<Digest> forgotten, ForgottenRecords(repo_, codec_));
  for (const UnlistedSnapshot& u : unlisted) {
    if (forgotten.count(u.digest) != 0) continue;
    const catalog::SnapshotInfo& sealed = u.record.info;
    return Status::Corruption(
        "pack " + repo_.packs().Describe(u.pack) + " holds a snapshot " +
        std::to_string(sealed.id) + " of " + EscapeForTerminal(sealed.source) + " taken " +
        LocalTime(sealed.started_unix_ms) +
        " that the catalog does not list and no forget record names (a catalog behind its "
        "packs, or a snapshot killed just before its commit); prune changed nothing; run "
        "'wanbackup repair catalog' first; if repair leaves the snapshot out because chunks of it "
        "are gone for good, 'wanbackup forget --lost " +
        std::to_string(sealed.id) + "' gives it up");
  }
  return Status::Ok();
}

// Packs the catalog was rebuilt without (--allow-missing-packs): a snapshot whose sealed record
// one holds may use chunks of the packs here, and nothing else names it, so prune removes
// nothing until they are back or given up (round 11, AB1: it removed such chunks, and the
// snapshot could not come back with its pack).
Status Pruner::RefuseMissingPacks() {
  WB_ASSIGN_OR_RETURN(const std::vector<MissingPack> missing, RecordedMissingPacks(repo_));
  WB_ASSIGN_OR_RETURN(const std::vector<MissingRecord> records, RecordedMissingRecords(cat_));
  if (missing.empty() && !records.empty()) {
    return Status::Corruption(
        "the catalog was rebuilt without the sealed record of snapshot " +
        std::to_string(records.front().id) +
        (records.size() > 1 ? " and " + std::to_string(records.size() - 1) + " more" : "") +
        ", which the repository's head or this client knew: the pack that holds it is missing, "
        "and the snapshot may use chunks of the packs here, so prune changed nothing. Put the "
        "pack back and run 'wanbackup repair catalog'; once it is gone for good, 'wanbackup "
        "forget --lost-packs' gives it up");
  }
  if (missing.empty()) return Status::Ok();
  for (const MissingPack& m : missing) {
    if (m.back) {
      return Status::Corruption("pack " + repo_.packs().Describe(m.name) +
                                ", which the catalog was rebuilt without, is back: run "
                                "'wanbackup repair catalog' first, which brings back what it "
                                "holds; prune changed nothing");
    }
  }
  return Status::Corruption(
      std::to_string(missing.size()) + " pack(s) were missing when the catalog was rebuilt (" +
      repo_.packs().Describe(missing.front().name) + (missing.size() > 1 ? ", ..." : "") +
      "), and a snapshot whose record one holds may use chunks of the packs here: prune changed "
      "nothing. Put them back and run 'wanbackup repair catalog'; once they are gone for good, "
      "'wanbackup forget --lost-packs' gives them up");
}

Status Pruner::RemoveOrphans() {
  // No other process writes packs while prune runs (its lock is exclusive): a pack write begun
  // and not finished (on S3, a multipart upload) belongs to a run that was killed.
  if (!options_.dry_run) {
    WB_ASSIGN_OR_RETURN(report_.unfinished_uploads, repo_.packs().AbandonUnfinished());
  }
  for (const StoredPack& s : orphans_) {
    ++report_.orphan_packs;
    report_.orphan_bytes += s.size;
    if (!options_.dry_run) {
      WB_RETURN_IF_ERROR(repo_.packs().Remove(s.name));
      WB_FAILPOINT("prune.after-orphan-remove");
    }
  }
  return Status::Ok();
}

Status Pruner::MarkLive() {
  WB_ASSIGN_OR_RETURN(const int64_t max_id, cat_.MaxChunkId());
  live_.assign(static_cast<size_t>(max_id) + 1, false);
  auto mark = [&](int64_t id, int64_t snapshot) -> Status {
    if (id < 0 || id > max_id) {
      return Status::Corruption("snapshot " + std::to_string(snapshot) +
                                " names a chunk the catalog lacks; run 'wanbackup verify' "
                                "before pruning");
    }
    live_[static_cast<size_t>(id)] = true;
    return Status::Ok();
  };
  // The newest head stays; the heads before it are replaced (head.h).
  WB_ASSIGN_OR_RETURN(const std::optional<int64_t> head, CatalogHeadRow(cat_));
  if (head) WB_RETURN_IF_ERROR(mark(*head, 0));
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> snapshots, cat_.Snapshots(false));
  report_.snapshots = snapshots.size();
  for (const catalog::SnapshotInfo& s : snapshots) {
    if (CancellationRequested()) return Status::Cancelled("prune interrupted; nothing changed");
    const Status walked =
        cat_.ForEachMapSegment(s.id, [&](uint64_t, const std::vector<int64_t>& ids) -> Status {
          for (int64_t id : ids) {
            if (id != 0) WB_RETURN_IF_ERROR(mark(id, s.id));
          }
          return Status::Ok();
        });
    WB_RETURN_IF_ERROR(walked);
    WB_RETURN_IF_ERROR(mark(s.record_id, s.id));
    // The map segments the sealed record lists: without them the snapshot cannot be checked
    // or rebuilt. A record that does not open stops prune: nothing may be dropped on a guess.
    Result<SnapshotRecord> sealed = LoadSnapshotRecord(repo_, codec_, s);
    if (!sealed.ok()) {
      return Status::Corruption(sealed.status().message() +
                                "; prune changed nothing (run 'wanbackup verify')");
    }
    for (const Digest& d : sealed->segments) {
      WB_ASSIGN_OR_RETURN(std::optional<int64_t> id, cat_.FindChunk(d));
      if (!id) {
        return Status::Corruption("snapshot " + std::to_string(s.id) +
                                  ": a map segment is missing; prune changed nothing (run "
                                  "'wanbackup verify')");
      }
      WB_RETURN_IF_ERROR(mark(*id, s.id));
    }
  }
  return Status::Ok();
}

Status Pruner::Measure(std::vector<PackUsage>* usage) {
  std::map<int64_t, PackUsage> by_pack;
  for (const auto& [id, p] : packs_) {
    auto stored = stored_.find(p.name);
    if (stored == stored_.end()) continue;  // missing: nothing to reclaim, nothing to touch
    PackUsage& u = by_pack[id];
    u.pack_id = id;
    u.size = stored->second;
    u.live_bytes = kPackHeaderSize;
  }
  WB_RETURN_IF_ERROR(cat_.ForEachChunk([&](const catalog::ChunkRecord& c) {
    if (c.kind == catalog::ChunkKind::kForgetRecord) live_[static_cast<size_t>(c.id)] = true;
    auto u = by_pack.find(c.pack_id);
    if (u == by_pack.end() || !live_[static_cast<size_t>(c.id)]) return Status::Ok();
    u->second.live_bytes += kRecordHeaderSize + c.stored_size;
    ++u->second.live_records;
    return Status::Ok();
  }));
  for (const auto& [id, u] : by_pack) {
    usage->push_back(u);
    ++report_.packs;
    report_.total_bytes += u.size;
    if (u.live_records > 0) report_.live_bytes += u.live_bytes;
  }
  return Status::Ok();
}

Status Pruner::CloseWriter() {
  if (!writer_) return Status::Ok();
  WB_RETURN_IF_ERROR(writer_->Sync());
  WB_RETURN_IF_ERROR(cat_.SetPackSize(writer_id_, writer_->size()));
  bytes_written_ += writer_->size();
  writer_.reset();
  return Status::Ok();
}

// Copies the live records of one pack into the new pack(s) and rewrites the catalog's rows,
// in the open transaction; drops the rest of its rows and the pack's own.
Status Pruner::CopyPack(int64_t pack_id) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::ChunkRecord> rows, cat_.ChunksInPack(pack_id));
  WB_ASSIGN_OR_RETURN(const PackReader* reader, repo_.Pack(pack_id));
  const std::string& name = packs_[pack_id].name;
  for (const catalog::ChunkRecord& c : rows) {
    if (!live_[static_cast<size_t>(c.id)]) {
      WB_RETURN_IF_ERROR(cat_.DeleteChunk(c.id));
      ++report_.records_dropped;
      continue;
    }
    if (CancellationRequested()) return Status::Cancelled("prune interrupted");
    const auto where = [&] { return "pack " + name + " at " + std::to_string(c.offset); };
    Result<RecordHeader> h = ReadRecordAt(*reader, c.offset, c.stored_size, &record_);
    if (!h.ok())
      return Status::Corruption("the record in " + where() + ": " + h.status().message());
    if (h->digest != c.digest || h->raw_size != c.raw_size ||
        static_cast<int>(h->kind) != static_cast<int>(c.kind) ||
        c.raw_size > MaxRaw(c.kind, repo_.config().chunk_size)) {
      return Status::Corruption("the record in " + where() + " is not the one the catalog names");
    }
    // Authenticated before it is carried over: prune never copies damage into a new pack.
    plain_.resize(h->raw_size);
    if (Status open = codec_.Open(*h, record_.data() + kRecordHeaderSize, plain_.data());
        !open.ok()) {
      return Status::Corruption("the record in " + where() + " is damaged (" + open.message() +
                                "); prune stopped (run 'wanbackup verify')");
    }
    if (!writer_) {
      WB_ASSIGN_OR_RETURN(writer_, repo_.NewPack(&writer_id_));
      ++report_.packs_written;
    }
    WB_ASSIGN_OR_RETURN(const uint64_t offset, writer_->Append(record_.data(), record_.size()));
    WB_FAILPOINT("prune.after-pack-write");
    WB_RETURN_IF_ERROR(cat_.MoveChunk(c.id, writer_id_, offset));
    ++report_.records_copied;
    report_.bytes_copied += record_.size();
    batch_copied_ += record_.size();
    if (writer_->size() >= options_.pack_size) WB_RETURN_IF_ERROR(CloseWriter());
  }
  return cat_.DeletePack(pack_id);
}

// New packs durable, then the catalog, then (only then) the old packs go.
Status Pruner::CommitBatch(std::vector<int64_t>* old_packs) {
  WB_RETURN_IF_ERROR(CloseWriter());
  WB_FAILPOINT("prune.before-commit");
  const Status committed = txn_->Commit();
  txn_.reset();
  WB_RETURN_IF_ERROR(committed);
  WB_FAILPOINT("prune.after-commit");
  for (int64_t id : *old_packs) {
    const catalog::PackInfo& p = packs_[id];
    WB_RETURN_IF_ERROR(repo_.RemovePack(id, p.name));
    report_.bytes_freed += stored_[p.name];
    WB_FAILPOINT("prune.after-pack-remove");
  }
  old_packs->clear();
  batch_copied_ = 0;
  return Status::Ok();
}

Status Pruner::Execute(const PrunePlan& plan) {
  std::vector<int64_t> old_packs;
  WB_ASSIGN_OR_RETURN(txn_, cat_.Begin());
  for (int64_t id : plan.remove) {
    WB_ASSIGN_OR_RETURN(std::vector<catalog::ChunkRecord> rows, cat_.ChunksInPack(id));
    for (const catalog::ChunkRecord& c : rows)
      WB_RETURN_IF_ERROR(cat_.DeleteChunk(c.id));
    report_.records_dropped += rows.size();
    WB_RETURN_IF_ERROR(cat_.DeletePack(id));
    old_packs.push_back(id);
    ++report_.packs_removed;
  }
  for (int64_t id : plan.rewrite) {
    WB_RETURN_IF_ERROR(CopyPack(id));
    old_packs.push_back(id);
    ++report_.packs_rewritten;
    if (options_.on_progress) options_.on_progress(report_.bytes_copied, plan.copy_bytes);
    if (batch_copied_ >= options_.batch_bytes) {
      WB_RETURN_IF_ERROR(CommitBatch(&old_packs));
      WB_ASSIGN_OR_RETURN(txn_, cat_.Begin());
    }
  }
  WB_RETURN_IF_ERROR(CommitBatch(&old_packs));
  report_.bytes_freed -= std::min(report_.bytes_freed, bytes_written_);
  return Status::Ok();
}

Result<PruneReport> Pruner::Run() {
  if (!options_.dry_run) {
    WB_ASSIGN_OR_RETURN(auto txn, cat_.Begin());
    WB_ASSIGN_OR_RETURN(report_.abandoned_runs, cat_.AbandonRunningSnapshots());
    WB_RETURN_IF_ERROR(txn->Commit());
  }
  WB_RETURN_IF_ERROR(FindOrphans());
  WB_RETURN_IF_ERROR(RefuseMissingPacks());
  WB_RETURN_IF_ERROR(MarkLive());
  WB_RETURN_IF_ERROR(RefuseUnlisted());
  WB_RETURN_IF_ERROR(RemoveOrphans());
  std::vector<PackUsage> usage;
  WB_RETURN_IF_ERROR(Measure(&usage));
  const PrunePlan plan = PlanPrune(usage, options_.max_unused);
  report_.unused_bytes = plan.unused_bytes;
  if (options_.dry_run) {
    report_.packs_removed = plan.remove.size();
    report_.packs_rewritten = plan.rewrite.size();
    report_.bytes_copied = plan.copy_bytes;
    report_.bytes_freed = plan.freed_bytes + report_.orphan_bytes;
    report_.unused_after = plan.unused_after;
    return report_;
  }
  report_.bytes_freed = report_.orphan_bytes;
  WB_RETURN_IF_ERROR(Execute(plan));
  report_.unused_after = plan.unused_after;
  return report_;
}

}  // namespace

Result<PruneReport> Prune(Repository& repo, const PruneOptions& options) {
  Pruner p(repo, options);
  return p.Run();
}

}  // namespace wanbackup::pipeline
