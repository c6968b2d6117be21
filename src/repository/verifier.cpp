#include "repository/verifier.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "catalog/catalog.h"
#include "common/cancel.h"
#include "repository/pack_record.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"

namespace wanbackup::pipeline {
namespace {

constexpr std::chrono::milliseconds kProgressInterval{200};

Status CheckChunk(Repository& repo, RecordCodec& codec, const catalog::ChunkRecord& c,
                  std::vector<uint8_t>* record, std::vector<uint8_t>* chunk) {
  WB_ASSIGN_OR_RETURN(const PackReader* pack, repo.Pack(c.pack_id));
  WB_ASSIGN_OR_RETURN(RecordHeader h, ReadRecordAt(*pack, c.offset, c.stored_size, record));
  if (h.digest != c.digest || h.raw_size != c.raw_size) {
    return Status::Corruption("the record in the pack is not the chunk the catalog names");
  }
  if (h.raw_size > kMaxChunkSize) return Status::Corruption("the record's size is impossible");
  chunk->resize(h.raw_size);
  return codec.Open(h, record->data() + kRecordHeaderSize, chunk->data());
}

using DamageByChunk = std::unordered_map<int64_t, std::string>;  // chunk id -> what is wrong

Result<std::vector<catalog::SnapshotInfo>> SnapshotsToCheck(catalog::Catalog& cat,
                                                            const VerifyOptions& options) {
  if (!options.snapshot_id) return cat.Snapshots(false);
  WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo s, cat.GetSnapshot(*options.snapshot_id));
  return std::vector<catalog::SnapshotInfo>{s};
}

// The chunks the chosen snapshot references (in pack and file order), or every chunk.
Result<std::vector<catalog::ChunkRecord>> ChunksToCheck(catalog::Catalog& cat,
                                                        const VerifyOptions& options) {
  std::vector<catalog::ChunkRecord> chunks;
  if (!options.snapshot_id) {
    const int64_t of = std::max<int64_t>(options.share_of, 1);
    WB_RETURN_IF_ERROR(cat.ForEachChunk([&](const catalog::ChunkRecord& c) {
      if (c.id % of == options.share_part % of) chunks.push_back(c);
      return Status::Ok();
    }));
    return chunks;
  }
  std::unordered_set<int64_t> ids;
  Status s = cat.ForEachMapSegment(*options.snapshot_id,
                                   [&](uint64_t, const std::vector<int64_t>& seg) -> Status {
                                     for (int64_t id : seg) {
                                       if (id != 0) ids.insert(id);
                                     }
                                     return Status::Ok();
                                   });
  if (!s.ok() && s.code() != StatusCode::kCorruption) return s;
  for (int64_t id : ids) {
    Result<catalog::ChunkRecord> c = cat.GetChunk(id);
    if (c.ok()) chunks.push_back(*c);
  }
  std::sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) {
    return std::tie(a.pack_id, a.offset) < std::tie(b.pack_id, b.offset);
  });
  return chunks;
}

// Checks `chunks` on every core (in their order), filling `bad` and the report's counts.
Status CheckChunks(Repository& repo, const std::vector<catalog::ChunkRecord>& chunks,
                   const VerifyOptions& options, DamageByChunk* bad, VerifyReport* report) {
  std::mutex mu;  // guards *bad
  std::atomic<size_t> next{0}, done{0};
  std::atomic<uint64_t> bytes{0};
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto work = [&] {
    RecordCodec codec(repo.keys(), 0);
    std::vector<uint8_t> record, chunk;
    for (size_t i = next++; i < chunks.size() && !CancellationRequested(); i = next++) {
      Status s = CheckChunk(repo, codec, chunks[i], &record, &chunk);
      bytes += chunks[i].stored_size;
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        (*bad)[chunks[i].id] = s.message();
      }
      ++done;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i)
    threads.emplace_back(work);
  while (done.load() < chunks.size() && !CancellationRequested()) {
    if (options.on_progress) options.on_progress(done.load(), chunks.size());
    std::this_thread::sleep_for(kProgressInterval);
  }
  for (auto& t : threads)
    t.join();
  if (CancellationRequested()) return Status::Cancelled("verify interrupted");
  if (options.on_progress) options.on_progress(done.load(), chunks.size());
  report->chunks_checked = chunks.size();
  report->bytes_checked = bytes.load();
  report->chunks_damaged = bad->size();
  return Status::Ok();
}

// Collects one snapshot's damage as contiguous runs of chunks with the same reason.
class DamageRuns {
 public:
  DamageRuns(catalog::Catalog& cat, const catalog::SnapshotInfo& snap, const DamageByChunk& bad,
             std::vector<DamagedRange>* out)
      : cat_(cat), snap_(snap), bad_(bad), out_(out) {}

  // One map segment: chunk ids from chunk number `first`.
  void AddSegment(uint64_t first, const std::vector<int64_t>& ids) {
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint64_t offset = (first + k) * snap_.chunk_size;
      const uint64_t length = std::min<uint64_t>(snap_.chunk_size, snap_.size_bytes - offset);
      Add(offset, length, WhatIsWrong(ids[k]));
    }
  }
  void Close() {
    if (open_) out_->push_back(run_);
    open_ = false;
  }

 private:
  // Empty when the chunk is fine (or a zero chunk).
  std::string WhatIsWrong(int64_t id) {
    if (id == 0) return {};
    if (auto b = bad_.find(id); b != bad_.end()) return b->second;
    auto e = exists_.find(id);
    if (e == exists_.end()) e = exists_.emplace(id, cat_.GetChunk(id).ok()).first;
    return e->second ? std::string() : "the catalog has no such chunk";
  }
  void Add(uint64_t offset, uint64_t length, const std::string& reason) {
    if (reason.empty()) {
      Close();
    } else if (open_ && run_.reason == reason && run_.offset + run_.length == offset) {
      run_.length += length;
    } else {
      Close();
      run_ = DamagedRange{snap_.id, offset, length, snap_.block_size, reason};
      open_ = true;
    }
  }

  catalog::Catalog& cat_;
  const catalog::SnapshotInfo& snap_;
  const DamageByChunk& bad_;
  std::vector<DamagedRange>* out_;
  std::unordered_map<int64_t, bool> exists_;  // chunk id -> in the catalog
  DamagedRange run_;
  bool open_ = false;
};

// Maps the damaged chunks onto one snapshot, and checks its catalog row and map against the
// record it sealed when it was taken.
Status CheckSnapshot(Repository& repo, const catalog::SnapshotInfo& snap, const DamageByChunk& bad,
                     VerifyReport* report) {
  ++report->snapshots_checked;
  DamageRuns runs(repo.catalog(), snap, bad, &report->damage);
  Status s = repo.catalog().ForEachMapSegment(
      snap.id, [&](uint64_t first, const std::vector<int64_t>& ids) -> Status {
        runs.AddSegment(first, ids);
        return Status::Ok();
      });
  runs.Close();
  if (!s.ok()) {
    if (s.code() != StatusCode::kCorruption) return s;
    report->damage.push_back(DamagedRange{snap.id, 0, snap.size_bytes, snap.block_size,
                                          "its chunk map is damaged: " + s.message()});
    return Status::Ok();
  }
  Status sealed = CheckSnapshotAgainstRecord(repo, snap, false);
  if (!sealed.ok()) {
    if (sealed.code() != StatusCode::kCorruption) return sealed;
    // The line already names the snapshot.
    std::string reason = sealed.message();
    const std::string prefix = "snapshot " + std::to_string(snap.id) + ": ";
    if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
    report->damage.push_back(DamagedRange{snap.id, 0, snap.size_bytes, snap.block_size, reason});
  }
  return Status::Ok();
}

}  // namespace

Result<VerifyReport> VerifyRepository(Repository& repo, const VerifyOptions& options) {
  VerifyReport report;
  catalog::Catalog& cat = repo.catalog();
  WB_RETURN_IF_ERROR(repo.LoadPacks());
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::SnapshotInfo> snapshots,
                      SnapshotsToCheck(cat, options));
  WB_ASSIGN_OR_RETURN(const std::vector<catalog::ChunkRecord> chunks, ChunksToCheck(cat, options));
  DamageByChunk bad;
  WB_RETURN_IF_ERROR(CheckChunks(repo, chunks, options, &bad, &report));
  for (const catalog::SnapshotInfo& snap : snapshots)
    WB_RETURN_IF_ERROR(CheckSnapshot(repo, snap, bad, &report));
  return report;
}

}  // namespace wanbackup::pipeline
