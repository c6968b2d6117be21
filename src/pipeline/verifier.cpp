#include "pipeline/verifier.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "catalog/catalog.h"
#include "common/cancel.h"
#include "pipeline/pack.h"
#include "pipeline/record.h"
#include "pipeline/snapshot_check.h"

namespace wanbackup::pipeline {
namespace {

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

}  // namespace

Result<VerifyReport> VerifyRepository(Repository& repo, const VerifyOptions& options) {
  VerifyReport report;
  catalog::Catalog& cat = repo.catalog();
  WB_RETURN_IF_ERROR(repo.LoadPacks());

  std::vector<catalog::SnapshotInfo> snapshots;
  if (options.snapshot_id) {
    WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo s, cat.GetSnapshot(*options.snapshot_id));
    snapshots.push_back(s);
  } else {
    WB_ASSIGN_OR_RETURN(snapshots, cat.Snapshots(false));
  }

  // Which chunks to check: those the chosen snapshot references, or every chunk.
  std::vector<catalog::ChunkRecord> chunks;
  if (options.snapshot_id) {
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
  } else {
    WB_RETURN_IF_ERROR(cat.ForEachChunk([&](const catalog::ChunkRecord& c) {
      chunks.push_back(c);
      return Status::Ok();
    }));
  }

  // Check them, pack by pack in file order, on every core.
  std::mutex mu;
  std::unordered_map<int64_t, std::string> bad;  // GUARDED_BY(mu)
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
        bad[chunks[i].id] = s.message();
      }
      ++done;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i)
    threads.emplace_back(work);
  while (done.load() < chunks.size() && !CancellationRequested()) {
    if (options.on_progress) options.on_progress(done.load(), chunks.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : threads)
    t.join();
  if (CancellationRequested()) return Status::Cancelled("verify interrupted");
  if (options.on_progress) options.on_progress(done.load(), chunks.size());
  report.chunks_checked = chunks.size();
  report.bytes_checked = bytes.load();
  report.chunks_damaged = bad.size();

  // Map damage onto snapshots: contiguous runs of damaged or missing chunks.
  for (const catalog::SnapshotInfo& snap : snapshots) {
    ++report.snapshots_checked;
    std::unordered_map<int64_t, bool> exists;
    DamagedRange run;
    bool open = false;
    auto close_run = [&] {
      if (open) report.damage.push_back(run);
      open = false;
    };
    Status s = cat.ForEachMapSegment(
        snap.id, [&](uint64_t first, const std::vector<int64_t>& ids) -> Status {
          for (size_t k = 0; k < ids.size(); ++k) {
            const int64_t id = ids[k];
            std::string reason;
            if (id != 0) {
              auto b = bad.find(id);
              if (b != bad.end()) {
                reason = b->second;
              } else {
                auto e = exists.find(id);
                if (e == exists.end()) e = exists.emplace(id, cat.GetChunk(id).ok()).first;
                if (!e->second) reason = "the catalog has no such chunk";
              }
            }
            const uint64_t offset = (first + k) * snap.chunk_size;
            const uint64_t length = std::min<uint64_t>(snap.chunk_size, snap.size_bytes - offset);
            if (reason.empty()) {
              close_run();
              continue;
            }
            if (open && run.reason == reason && run.offset + run.length == offset) {
              run.length += length;
            } else {
              close_run();
              run = DamagedRange{snap.id, offset, length, snap.block_size, reason};
              open = true;
            }
          }
          return Status::Ok();
        });
    close_run();
    if (!s.ok()) {
      if (s.code() != StatusCode::kCorruption) return s;
      report.damage.push_back(DamagedRange{snap.id, 0, snap.size_bytes, snap.block_size,
                                           "its chunk map is damaged: " + s.message()});
      continue;
    }
    // The catalog row and map must be what the snapshot sealed when it was taken.
    Status sealed = CheckSnapshotAgainstRecord(repo, snap, false);
    if (!sealed.ok()) {
      if (sealed.code() != StatusCode::kCorruption) return sealed;
      // The line already names the snapshot.
      std::string reason = sealed.message();
      const std::string prefix = "snapshot " + std::to_string(snap.id) + ": ";
      if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
      report.damage.push_back(DamagedRange{snap.id, 0, snap.size_bytes, snap.block_size, reason});
    }
  }
  return report;
}

}  // namespace wanbackup::pipeline
