#include "pipeline/restorer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/cancel.h"
#include "common/failpoint.h"
#include "pipeline/file_source.h"
#include "pipeline/zero.h"
#include "repository/pack_record.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadBackBuffers = 4;      // chunks CheckRestored reads back at once, at least
constexpr size_t kMaxReadBackBuffers = 16;  // and at most

std::string Range(const catalog::SnapshotInfo& s, uint64_t index, uint64_t length) {
  const uint64_t offset = index * s.chunk_size;
  return "snapshot " + std::to_string(s.id) + " bytes " + std::to_string(offset) + "+" +
         std::to_string(length) + " (LBA " +
         std::to_string(offset / std::max<uint32_t>(1, s.block_size)) + "+" +
         std::to_string(length / std::max<uint32_t>(1, s.block_size)) + ")";
}

// The snapshot's geometry from the catalog sizes buffers and writes: refuse one that cannot be
// real, and map segments that reach past its end (a write there could pass the device's end).
Status CheckGeometry(const catalog::SnapshotInfo& s) {
  const uint32_t c = s.chunk_size;
  if (c < (64u << 10) || c > kMaxChunkSize || (c & (c - 1)) != 0 || s.size_bytes == 0) {
    return Status::Corruption("snapshot " + std::to_string(s.id) + ": chunk size " +
                              std::to_string(c) + " or size " + std::to_string(s.size_bytes) +
                              " is impossible");
  }
  return Status::Ok();
}

Status CheckSegment(const catalog::SnapshotInfo& s, uint64_t first, size_t count) {
  if (first > s.chunk_count() || count > s.chunk_count() - first) {
    return Status::Corruption("snapshot " + std::to_string(s.id) + ": a chunk map segment at " +
                              std::to_string(first) + " reaches past its size");
  }
  return Status::Ok();
}

// A Corruption from the sealed map, naming the snapshot.
Status SealedMapError(const catalog::SnapshotInfo& s, const Status& error) {
  if (error.code() != StatusCode::kCorruption) return error;
  return Status::Corruption("snapshot " + std::to_string(s.id) +
                            ": its sealed map: " + error.message());
}

// Calls fn(first, digests) for each segment of the snapshot's sealed map, in order. The record
// is loaded once and checked against `snap` (the row the caller checked), so nothing the
// catalog says after that check decides what is written where.
Status ForEachSealedSegment(
    Repository& repo, const catalog::SnapshotInfo& snap,
    const std::function<Status(uint64_t first, const std::vector<Digest>& digests)>& fn) {
  RecordCodec codec(repo.keys(), 0);
  WB_ASSIGN_OR_RETURN(const SnapshotRecord sealed, LoadMatchingRecord(repo, codec, snap));
  SealedMap map(repo, codec, sealed);
  for (uint64_t segment = 0; segment < sealed.segments.size(); ++segment) {
    Result<const std::vector<Digest>*> digests = map.Segment(segment);
    if (!digests.ok()) return SealedMapError(snap, digests.status());
    WB_RETURN_IF_ERROR(fn(segment * kSealedSegmentChunks, **digests));
  }
  return Status::Ok();
}

// Reads one map segment's chunks back from `source` (several at once, in `free_buffers`) and
// compares each with its digest, or with zeros: (*differs)[k] is set for chunk first + k when
// it differs. A read that fails fails the comparison.
Status CompareSegmentBuffered(Repository& repo, const catalog::SnapshotInfo& snap,
                              BlockSource& source, std::vector<uint8_t*>* free_buffers,
                              uint64_t first, const std::vector<Digest>& ids,
                              std::vector<bool>* differs) {
  WB_RETURN_IF_ERROR(CheckSegment(snap, first, ids.size()));
  differs->assign(ids.size(), false);
  size_t submitted = 0, completed = 0;
  Status error;
  while (completed < ids.size()) {
    while (submitted < ids.size() && !free_buffers->empty()) {
      const uint64_t offset = (first + submitted) * snap.chunk_size;
      const uint64_t length = std::min<uint64_t>(snap.chunk_size, snap.size_bytes - offset);
      WB_RETURN_IF_ERROR(
          source.Submit(ReadRequest{offset, length, free_buffers->back(), submitted}));
      free_buffers->pop_back();
      ++submitted;
    }
    WB_ASSIGN_OR_RETURN(ReadCompletion done, source.Wait());
    ++completed;
    free_buffers->push_back(done.request.buffer);
    if (!done.status.ok()) {
      if (error.ok()) error = done.status;
      continue;
    }
    const uint64_t k = done.request.tag;
    const Digest& want = ids[k];
    const bool same = want == kZeroChunkDigest
                          ? IsAllZero(done.request.buffer, done.request.length)
                          : repo.keys().DigestOf(done.request.buffer, done.request.length) == want;
    (*differs)[k] = !same;
  }
  return error;
}

// Read-back buffers for CompareSegmentBuffered: as many chunks in flight as the source wants
// (a LUN across a WAN), within bounds.
class ReadBackBuffers {
 public:
  ReadBackBuffers(const BlockSource& source, uint32_t chunk_size) {
    const size_t wanted =
        source.preferred_in_flight() * source.preferred_request_size() / chunk_size;
    const size_t count = std::clamp<size_t>(wanted, kReadBackBuffers, kMaxReadBackBuffers);
    buffers_.assign(count, std::vector<uint8_t>(chunk_size));
    for (auto& b : buffers_)
      free_.push_back(b.data());
  }
  std::vector<uint8_t*>* free() { return &free_; }

 private:
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<uint8_t*> free_;
};

// Restore workers on object storage (RestoreOptions::workers = 0), each with a GET in flight.
constexpr int kRemoteWorkers = 16;

// Writes a snapshot's chunks to the sink, one map segment at a time, on `workers` threads
// (the calling one among them) that take the next chunk of the segment from a shared counter.
class SegmentWriter {
 public:
  SegmentWriter(Repository& repo, const catalog::SnapshotInfo& snap, BlockSink& sink, int workers)
      : repo_(repo),
        snap_(snap),
        sink_(sink),
        workers_(workers),
        ordered_(sink.sequential_only()),
        holes_(sink.zeros_are_free()),
        zeros_(holes_ ? 0 : snap.chunk_size, 0) {}

  // Writes the chunks of the segment whose `selected` entry is set (all when it is null).
  Status Write(uint64_t first, const std::vector<Digest>& ids, const std::vector<bool>* selected) {
    WB_RETURN_IF_ERROR(CheckSegment(snap_, first, ids.size()));
    if (selected != nullptr && selected->size() != ids.size()) {
      return Status::Internal("restore: a chunk selection of the wrong length");
    }
    // Resolve where each chunk to write lives (the catalog belongs to this thread): only an
    // index, by the sealed digest; the record found must open as that digest.
    std::unordered_map<Digest, catalog::ChunkRecord, DigestHash> where;
    for (size_t k = 0; k < ids.size(); ++k) {
      const Digest& d = ids[k];
      if (d == kZeroChunkDigest || where.count(d)) continue;
      if (selected != nullptr && !(*selected)[k]) continue;
      WB_ASSIGN_OR_RETURN(std::optional<int64_t> id, repo_.catalog().FindChunk(d));
      if (!id) {
        return Status::Corruption("snapshot " + std::to_string(snap_.id) + ": chunk " +
                                  std::to_string(first + k) +
                                  " of its sealed map is not in the catalog (catalog.db was "
                                  "altered or damaged)");
      }
      WB_ASSIGN_OR_RETURN(where[d], repo_.catalog().GetChunk(*id));
    }
    Segment segment(first, ids, where, selected);
    std::vector<std::thread> threads;
    for (int i = 1; i < workers_; ++i)
      threads.emplace_back([this, &segment] { Work(segment); });
    Work(segment);
    for (auto& t : threads)
      t.join();
    return segment.error;
  }

  uint64_t bytes_done() const { return bytes_done_.load(); }
  uint64_t zero_bytes() const { return zero_bytes_.load(); }
  uint64_t bytes_written() const { return bytes_written_.load(); }
  uint64_t chunks_written() const { return chunks_written_.load(); }

 private:
  struct Segment {
    Segment(uint64_t f, const std::vector<Digest>& i,
            const std::unordered_map<Digest, catalog::ChunkRecord, DigestHash>& w,
            const std::vector<bool>* s)
        : first(f), ids(i), where(w), selected(s) {}
    uint64_t first;
    const std::vector<Digest>& ids;  // sealed digests, kZeroChunkDigest for zeros
    const std::unordered_map<Digest, catalog::ChunkRecord, DigestHash>& where;
    const std::vector<bool>* selected;  // null: every chunk
    std::atomic<size_t> next{0};
    std::mutex error_mu;
    Status error;     // GUARDED_BY(error_mu): the first failure; the workers stop at it
    size_t turn = 0;  // GUARDED_BY(error_mu): an ordered sink's next chunk to write
    std::condition_variable turn_cv;
  };

  // An ordered sink (a pipe) takes chunk k only after chunk k - 1: the workers load ahead and
  // write in turn. False when another chunk failed (nothing more is written).
  bool AwaitTurn(Segment& segment, size_t k) {
    if (!ordered_) return true;
    std::unique_lock<std::mutex> lock(segment.error_mu);
    segment.turn_cv.wait(lock, [&] { return segment.turn == k || !segment.error.ok(); });
    return segment.error.ok();
  }
  void PassTurn(Segment& segment) {
    if (!ordered_) return;
    {
      std::lock_guard<std::mutex> lock(segment.error_mu);
      ++segment.turn;
    }
    segment.turn_cv.notify_all();
  }

  // One worker: chunks of the segment until none is left or one failed.
  void Work(Segment& segment) {
    RecordCodec codec(repo_.keys(), 0);
    std::vector<uint8_t> record, chunk(snap_.chunk_size);
    for (size_t k = segment.next++; k < segment.ids.size(); k = segment.next++) {
      {
        std::lock_guard<std::mutex> lock(segment.error_mu);
        if (!segment.error.ok()) return;
      }
      Status s = CancellationRequested() ? Status::Cancelled("restore interrupted")
                                         : WriteChunk(segment, k, codec, &record, &chunk);
      if (!s.ok()) {
        {
          std::lock_guard<std::mutex> lock(segment.error_mu);
          if (segment.error.ok()) segment.error = s;
        }
        segment.turn_cv.notify_all();  // workers waiting for their turn stop too
        return;
      }
    }
  }

  Status WriteChunk(Segment& segment, size_t k, RecordCodec& codec, std::vector<uint8_t>* record,
                    std::vector<uint8_t>* chunk) {
    const uint64_t index = segment.first + k;
    const uint64_t offset = index * snap_.chunk_size;
    const uint64_t length = std::min<uint64_t>(snap_.chunk_size, snap_.size_bytes - offset);
    if (segment.selected != nullptr && !(*segment.selected)[k]) {
      if (!AwaitTurn(segment, k)) return Status::Cancelled("restore stopped");
      bytes_done_ += length;  // the destination already holds it
      PassTurn(segment);
      return Status::Ok();
    }
    if (segment.ids[k] == kZeroChunkDigest) {
      if (!AwaitTurn(segment, k)) return Status::Cancelled("restore stopped");
      zero_bytes_ += length;
      if (!holes_) {
        WB_RETURN_IF_ERROR(sink_.Write(offset, zeros_.data(), length));
        bytes_written_ += length;
        ++chunks_written_;
      }
      bytes_done_ += length;
      PassTurn(segment);
      return Status::Ok();
    }
    const catalog::ChunkRecord& c = segment.where.at(segment.ids[k]);
    Status s = c.raw_size == length
                   ? LoadSealedChunk(repo_, codec, c, segment.ids[k], record, chunk->data())
                   : Status::Corruption("the chunk has the wrong size");
    if (s.ok() && !AwaitTurn(segment, k)) return Status::Cancelled("restore stopped");
    if (s.ok()) s = sink_.Write(offset, chunk->data(), length);
    if (!s.ok() && s.code() == StatusCode::kCorruption) {
      return Status::Corruption(Range(snap_, index, length) + " is damaged: " + s.message());
    }
    WB_RETURN_IF_ERROR(s);
    bytes_done_ += length;
    bytes_written_ += length;
    ++chunks_written_;
    PassTurn(segment);
    return Status::Ok();
  }

  Repository& repo_;
  const catalog::SnapshotInfo& snap_;
  BlockSink& sink_;
  const int workers_;
  const bool ordered_;                // the sink takes its writes in order (a pipe)
  const bool holes_;                  // the sink reads unwritten ranges as zeros
  const std::vector<uint8_t> zeros_;  // a chunk of zeros to write when it does not
  std::atomic<uint64_t> bytes_done_{0}, zero_bytes_{0}, bytes_written_{0}, chunks_written_{0};
};

}  // namespace

Result<RestoreResult> RestoreSnapshot(Repository& repo, const catalog::SnapshotInfo& snap,
                                      BlockSink& sink, const RestoreOptions& options) {
  return RestoreSelected(repo, snap, sink, options, nullptr);
}

Result<RestoreResult> RestoreSelected(Repository& repo, const catalog::SnapshotInfo& snap,
                                      BlockSink& sink, const RestoreOptions& options,
                                      const ChunkSelector& select) {
  if (snap.status != catalog::SnapshotStatus::kComplete) {
    return Status::InvalidArgument("snapshot " + std::to_string(snap.id) + " is not complete");
  }
  WB_RETURN_IF_ERROR(CheckGeometry(snap));
  if (!options.record_checked) WB_RETURN_IF_ERROR(CheckSnapshotAgainstRecord(repo, snap, true));
  // What is written comes from the sealed record and map alone, read from here on: a catalog
  // changed after the check (a test rewrites it here) can only make the restore fail.
  WB_PAUSEPOINT("restore.after-check");
  // On object storage a worker spends most of its time waiting for its GET: enough of them
  // to keep the line busy (kRemoteWorkers × the chunk size in flight). An ordered sink (a pipe)
  // is written in turn, each worker loading its chunk ahead (SegmentWriter::AwaitTurn).
  const int workers =
      options.workers > 0
          ? options.workers
          : (repo.remote() ? kRemoteWorkers
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  SegmentWriter writer(repo, snap, sink, workers);
  RestoreResult result;
  const auto start = Clock::now();
  auto last_report = start;

  WB_RETURN_IF_ERROR(repo.LoadPacks());
  WB_RETURN_IF_ERROR(ForEachSealedSegment(
      repo, snap, [&](uint64_t first, const std::vector<Digest>& ids) -> Status {
        std::vector<bool> selected;
        Status written = select ? select(first, ids, &selected) : Status::Ok();
        if (written.ok()) written = writer.Write(first, ids, select ? &selected : nullptr);
        if (options.on_progress && Clock::now() - last_report >= options.progress_interval) {
          last_report = Clock::now();
          options.on_progress({writer.bytes_done(), snap.size_bytes, last_report - start});
        }
        return written;
      }));
  WB_RETURN_IF_ERROR(sink.Finish(snap.size_bytes));
  result.bytes = snap.size_bytes;
  result.zero_bytes = writer.zero_bytes();
  result.bytes_written = writer.bytes_written();
  result.chunks_written = writer.chunks_written();
  result.elapsed = Clock::now() - start;
  if (options.on_progress) options.on_progress({result.bytes, snap.size_bytes, result.elapsed});
  return result;
}

Status CheckRestored(Repository& repo, const catalog::SnapshotInfo& snap, const std::string& path) {
  // Read back from the medium, not from the page cache the restore just filled.
  WB_ASSIGN_OR_RETURN(std::unique_ptr<FileSource> source, FileSource::Open(path, 2, true));
  return CheckRestored(repo, snap, *source);
}

Status CheckRestored(Repository& repo, const catalog::SnapshotInfo& snap, BlockSource& source) {
  WB_RETURN_IF_ERROR(CheckGeometry(snap));
  if (source.geometry().size_bytes < snap.size_bytes) {
    return Status::Corruption(source.geometry().name + " is shorter than the snapshot");
  }
  ReadBackBuffers buffers(source, snap.chunk_size);
  return ForEachSealedSegment(
      repo, snap, [&](uint64_t first, const std::vector<Digest>& ids) -> Status {
        std::vector<bool> differs;
        WB_RETURN_IF_ERROR(
            CompareSegmentBuffered(repo, snap, source, buffers.free(), first, ids, &differs));
        const auto bad = std::find(differs.begin(), differs.end(), true);
        if (bad == differs.end()) return Status::Ok();
        const uint64_t index = first + static_cast<uint64_t>(bad - differs.begin());
        const uint64_t length =
            std::min<uint64_t>(snap.chunk_size, snap.size_bytes - index * snap.chunk_size);
        return Status::Corruption("verifying " + source.geometry().name + ": " +
                                  Range(snap, index, length) + " differs from the snapshot");
      });
}

Status CompareSegment(Repository& repo, const catalog::SnapshotInfo& snap, BlockSource& source,
                      uint64_t first, const std::vector<Digest>& digests,
                      std::vector<bool>* differs) {
  WB_RETURN_IF_ERROR(CheckGeometry(snap));
  if (source.geometry().size_bytes < snap.size_bytes) {
    return Status::InvalidArgument(source.geometry().name + " is smaller than the snapshot");
  }
  ReadBackBuffers buffers(source, snap.chunk_size);
  return CompareSegmentBuffered(repo, snap, source, buffers.free(), first, digests, differs);
}

}  // namespace wanbackup::pipeline
