#include "pipeline/internal/snapshotter.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "common/failpoint.h"
#include "pipeline/deallocation.h"
#include "pipeline/zero.h"
#include "repository/snapshot_record.h"

namespace wanbackup::pipeline::internal {
namespace {

// The reader asks the source which chunks are deallocated this many chunks ahead at first
// (the window then doubles, deallocation.h).
constexpr uint64_t kDeallocationWindowChunks = 64;

int64_t ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void Snapshotter::ReaderLoop() {
  uint64_t next = 0;
  size_t in_flight = 0;
  auto fail = [this](Status s) {
    outcomes_.Push(Outcome{Outcome::Kind::kError, 0, nullptr, 0, {}, {}, std::move(s)});
  };
  // Stopping early: every submitted read must finish (or the source fail) before the buffers
  // may go.
  auto drain = [this, &in_flight] {
    while (in_flight > 0) {
      Result<ReadCompletion> done = source_.Wait();
      if (!done.ok()) return;  // a failed source writes into no buffer any more
      --in_flight;
    }
  };
  DeallocationLookahead deallocated(source_, 0, size_, kDeallocationWindowChunks * chunk_size_);
  while (!stop_.load()) {
    const bool more = next < chunk_count_;
    if (more && deallocated.Deallocated(next * chunk_size_, ChunkLength(next))) {
      ++chunks_delivered_;
      outcomes_.Push(Outcome{Outcome::Kind::kDeallocated,
                             next,
                             nullptr,
                             static_cast<uint32_t>(ChunkLength(next)),
                             {},
                             {},
                             {}});
      ++next;
      continue;
    }
    uint8_t* buffer = nullptr;
    if (more && in_flight < std::max<size_t>(1, source_.preferred_in_flight())) {
      buffer = in_flight == 0 ? buffers_->Take() : buffers_->TryTake();
      if (buffer == nullptr && in_flight == 0) return;  // closed: we are stopping
    }
    if (buffer != nullptr) {
      Status s = source_.Submit(ReadRequest{next * chunk_size_, ChunkLength(next), buffer, next});
      if (!s.ok()) {
        drain();
        return fail(s);
      }
      ++next;
      ++in_flight;
      continue;
    }
    if (in_flight == 0) return;  // everything read
    Result<ReadCompletion> done = source_.Wait();
    if (!done.ok()) return fail(done.status());
    --in_flight;
    if (!done->status.ok()) {
      drain();
      return fail(done->status);
    }
    const ReadRequest& r = done->request;
    ++chunks_delivered_;
    jobs_.Push(Job{Job::Kind::kHash, r.tag, r.buffer, static_cast<uint32_t>(r.length), {}});
  }
  drain();
}

void Snapshotter::WorkerLoop() {
  RecordCodec codec(repo_.keys(), repo_.config().zstd_level);
  while (std::optional<Job> job = jobs_.Pop()) {
    if (job->kind == Job::Kind::kHash) {
      int64_t t0 = ThreadCpuNs();
      const bool zero = IsAllZero(job->buffer, job->length);
      int64_t t1 = ThreadCpuNs();
      clock_.zero += t1 - t0;
      if (zero) {
        buffers_->Put(job->buffer);
        outcomes_.Push(Outcome{Outcome::Kind::kZero, job->index, nullptr, job->length, {}, {}, {}});
        continue;
      }
      Outcome o{Outcome::Kind::kHashed,
                job->index,
                job->buffer,
                job->length,
                repo_.keys().DigestOf(job->buffer, job->length),
                {},
                {}};
      clock_.digest += ThreadCpuNs() - t1;
      outcomes_.Push(std::move(o));
      continue;
    }
    // At most one record per worker plus two waiting to be written: if writing falls behind,
    // the workers wait here rather than fill memory. Once Stop() closed the slots nobody takes
    // records any more: drop the job (the pool owns its buffer) and let the queue run dry.
    if (!record_slots_.Acquire()) continue;
    std::vector<uint8_t> record;
    {
      std::lock_guard<std::mutex> lock(records_mu_);
      if (!spare_records_.empty()) {
        record = std::move(spare_records_.back());
        spare_records_.pop_back();
      }
    }
    record.clear();
    int64_t t0 = ThreadCpuNs();
    size_t payload_size = 0;
    uint8_t flags = 0;
    const uint8_t* payload = codec.Compress(job->buffer, job->length, &payload_size, &flags);
    int64_t t1 = ThreadCpuNs();
    codec.Seal(payload, payload_size, flags, job->length, job->digest, &record);
    clock_.compress += t1 - t0;
    clock_.encrypt += ThreadCpuNs() - t1;
    buffers_->Put(job->buffer);
    outcomes_.Push(Outcome{Outcome::Kind::kEncoded,
                           job->index,
                           nullptr,
                           job->length,
                           job->digest,
                           std::move(record),
                           {}});
  }
}

Status Snapshotter::StartPack() {
  WB_ASSIGN_OR_RETURN(pack_, repo_.NewPack(&pack_id_));
  uncommitted_.push_back({pack_->path(), pack_id_});
  return Status::Ok();
}

// Object storage: starts the full pack's upload in the background and lets the next record
// start a new pack; past the upload budget, waits for an upload to end first: whichever ends
// first, not the oldest, so that one slow part (a connection the others starve) does not hold
// the next packs back while the line has room.
Status Snapshotter::ClosePack() {
  if (pack_failed_) return Status::IoError("a pack of this run failed earlier; not trusted");
  WB_RETURN_IF_ERROR(pack_->SyncInBackground());
  closed_.push_back({std::move(pack_), pack_id_});
  peak_upload_bytes_ = std::max(peak_upload_bytes_, ClosedBytes());
  while (closed_.size() > 1 && ClosedBytes() > options_.upload_bytes) {
    size_t ended = 0;
    while (ended < closed_.size() && !closed_[ended].writer->SyncFinished())
      ++ended;
    if (ended == closed_.size()) {
      // Uploads take seconds; a poll this often costs nothing and adds no measurable wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    WB_RETURN_IF_ERROR(SyncClosedPack(ended));
  }
  return Status::Ok();
}

// Waits for closed pack `index`'s upload and records its size, in the open transaction.
Status Snapshotter::SyncClosedPack(size_t index) {
  ClosedPack& closed = closed_[index];
  if (Status s = closed.writer->Sync(); !s.ok()) {
    pack_failed_ = true;  // the transaction names it: it must never commit
    return s;
  }
  WB_RETURN_IF_ERROR(catalog_.SetPackSize(closed.id, closed.writer->size()));
  closed_.erase(closed_.begin() + static_cast<std::ptrdiff_t>(index));
  return Status::Ok();
}

// Makes every pack the open transaction names durable and records their sizes in it (no pack:
// nothing to do).
Status Snapshotter::SyncPack() {
  if (pack_failed_) return Status::IoError("a pack of this run failed earlier; not trusted");
  while (!closed_.empty())
    WB_RETURN_IF_ERROR(SyncClosedPack(0));
  if (!pack_) return Status::Ok();
  WB_FAILPOINT("snapshot.before-pack-sync");
  WB_PAUSEPOINT("snapshot.before-pack-sync");
  if (Status s = pack_->Sync(); !s.ok()) {
    pack_failed_ = true;
    return s;
  }
  WB_FAILPOINT("snapshot.after-pack-sync");
  return catalog_.SetPackSize(pack_id_, pack_->size());
}

// Pack data first, then the catalog that points at it (docs/durability.md).
Status Snapshotter::Commit(bool force) {
  // On object storage a pack is uploaded once, whole: when it is full it goes up in the
  // background, and a checkpoint closes the pack it finds open too (a Sync of a pack that stays
  // open would upload all of it again at the next one).
  const bool remote = repo_.remote();
  if (remote && pack_ && pack_->size() >= options_.pack_size) WB_RETURN_IF_ERROR(ClosePack());
  const bool due = stored_since_commit_ >= options_.commit_bytes ||
                   Clock::now() - last_commit_ >= options_.commit_interval;
  if (!force && !due) return Status::Ok();
  const int64_t t0 = ThreadCpuNs();
  WB_RETURN_IF_ERROR(SyncPack());
  const Status committed = txn_->Commit();
  txn_.reset();
  WB_RETURN_IF_ERROR(committed);
  uncommitted_.clear();  // the catalog names them all now
  WB_FAILPOINT("snapshot.after-commit");
  if (pack_ && (remote || pack_->size() >= options_.pack_size))
    pack_.reset();  // the next record starts a new one
  WB_ASSIGN_OR_RETURN(txn_, catalog_.Begin());
  stored_since_commit_ = 0;
  last_commit_ = Clock::now();
  clock_.catalog += ThreadCpuNs() - t0;
  return Status::Ok();
}

Status Snapshotter::Resolve(uint64_t index, int64_t chunk_id, const Digest& digest) {
  WB_RETURN_IF_ERROR(sealer_->Add(index, digest));
  const uint64_t first = index / catalog::kMapSegmentChunks * catalog::kMapSegmentChunks;
  auto& [ids, filled] = segments_[first];
  const uint64_t count = std::min(catalog::kMapSegmentChunks, chunk_count_ - first);
  if (ids.empty()) ids.assign(count, -1);
  ids[index - first] = chunk_id;
  ++filled;
  ++done_chunks_;
  done_bytes_ += ChunkLength(index);
  if (filled == count) {
    const int64_t t0 = ThreadCpuNs();
    WB_RETURN_IF_ERROR(catalog_.PutMapSegment(info_.id, first, ids));
    clock_.catalog += ThreadCpuNs() - t0;
    segments_.erase(first);
  }
  return Status::Ok();
}

Status Snapshotter::OnHashed(Outcome& o) {
  const int64_t t0 = ThreadCpuNs();
  info_.bytes_read += o.length;
  auto pending = pending_.find(o.digest);
  if (pending != pending_.end()) {  // the same data is being encoded right now
    pending->second.push_back(o.index);
    buffers_->Put(o.buffer);
    clock_.dedup += ThreadCpuNs() - t0;
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> known, catalog_.FindChunk(o.digest));
  clock_.dedup += ThreadCpuNs() - t0;
  if (known) {
    buffers_->Put(o.buffer);
    WB_RETURN_IF_ERROR(CheckStillStored(*known, o.index));
    return Resolve(o.index, *known, o.digest);
  }
  pending_[o.digest].push_back(o.index);
  jobs_.Push(Job{Job::Kind::kEncode, o.index, o.buffer, o.length, o.digest});
  return Status::Ok();
}

// A dedup hit is only as good as the pack its row names: a snapshot must never be completed on
// a chunk whose pack is gone (the pack readers are cached, so this costs one catalog lookup).
Status Snapshotter::CheckStillStored(int64_t chunk_id, uint64_t index) {
  WB_ASSIGN_OR_RETURN(catalog::ChunkRecord c, catalog_.GetChunk(chunk_id));
  const Result<const PackReader*> pack = repo_.Pack(c.pack_id);
  if (pack.ok()) return Status::Ok();
  return Status::Corruption("chunk " + std::to_string(index) +
                            " of the source is stored in a pack " + "that is gone or damaged (" +
                            pack.status().message() +
                            "); nothing was built on it. Run 'wanbackup verify', then 'wanbackup "
                            "repair catalog' so that the next snapshot stores it again");
}

// Appends a whole record to the pack and names it in the catalog (in the open transaction).
Result<int64_t> Snapshotter::StoreRecord(const std::vector<uint8_t>& record, const Digest& digest,
                                         RecordKind kind, uint32_t raw_size) {
  int64_t t0 = ThreadCpuNs();
  if (!pack_) WB_RETURN_IF_ERROR(StartPack());  // packs start with their first record
  Result<uint64_t> appended = pack_->Append(record.data(), record.size());
  if (!appended.ok()) {
    pack_failed_ = true;  // a partial record may sit at the end now
    return appended.status();
  }
  const uint64_t offset = *appended;
  WB_FAILPOINT("snapshot.after-pack-write");
  int64_t t1 = ThreadCpuNs();
  clock_.write += t1 - t0;
  catalog::ChunkRecord chunk;
  chunk.kind = static_cast<catalog::ChunkKind>(kind);
  chunk.digest = digest;
  chunk.pack_id = pack_id_;
  chunk.offset = offset;
  chunk.stored_size = static_cast<uint32_t>(record.size() - kRecordHeaderSize);
  chunk.raw_size = raw_size;
  WB_ASSIGN_OR_RETURN(int64_t id, catalog_.AddChunk(chunk));
  clock_.catalog += ThreadCpuNs() - t1;
  info_.bytes_stored += record.size();
  stored_since_commit_ += record.size();
  return id;
}

Status Snapshotter::OnEncoded(Outcome& o) {
  WB_ASSIGN_OR_RETURN(int64_t id, StoreRecord(o.record, o.digest, RecordKind::kChunk, o.length));
  info_.chunks_new += 1;
  info_.bytes_new += o.length;
  {
    std::lock_guard<std::mutex> lock(records_mu_);
    spare_records_.push_back(std::move(o.record));
  }
  record_slots_.Release();
  auto waiting = pending_.find(o.digest);
  std::vector<uint64_t> indices = std::move(waiting->second);
  pending_.erase(waiting);
  for (uint64_t index : indices)
    WB_RETURN_IF_ERROR(Resolve(index, id, o.digest));
  return Commit(false);
}

void Snapshotter::Report(bool force) {
  if (!options_.on_progress) return;
  const auto now = Clock::now();
  if (!force && now - last_report_ < options_.progress_interval) return;
  last_report_ = now;
  // Quiet: since the source last delivered a byte (a chunk may take long to fill on a slow
  // link; a READ completing is data arriving).
  const SourceStats stats = source_.Stats();
  if (stats.bytes_read != last_source_bytes_ || done_bytes_ == size_) {
    last_source_bytes_ = stats.bytes_read;
    last_data_ = now;
  }
  options_.on_progress(SnapshotProgress{done_bytes_, size_, info_.bytes_new, info_.bytes_stored,
                                        now - start_, now - last_data_, stats});
}

Status Snapshotter::Coordinate() {
  // After a failure of the source (or an interruption) the chunks already read are still
  // finished and recorded, so that the next run finds them stored.
  Status failure;
  for (;;) {
    if (failure.ok() && done_chunks_ == chunk_count_) return Status::Ok();
    if (failure.ok() && CancellationRequested()) {
      failure = Status::Cancelled("snapshot interrupted");
      stop_ = true;  // the reader stops submitting; what it delivered is finished below
    }
    if (!failure.ok() && reader_done_.load() && done_chunks_ == chunks_delivered_.load()) {
      return failure;
    }
    // With progress asked for, a stalled source (a link down) still gets its line, and an
    // interruption is seen while nothing arrives.
    bool timed_out = false;
    std::optional<Outcome> o =
        options_.on_progress
            ? outcomes_.PopFor(std::max<std::chrono::nanoseconds>(options_.progress_interval,
                                                                  std::chrono::milliseconds(100)),
                               &timed_out)
            : outcomes_.Pop();
    if (timed_out) {
      Report(false);
      continue;
    }
    if (!o) return failure.ok() ? Status::Internal("pipeline stopped early") : failure;
    switch (o->kind) {
      case Outcome::Kind::kError:
        if (failure.ok()) failure = o->status;
        break;
      case Outcome::Kind::kReaderDone:
        break;
      case Outcome::Kind::kZero:
        info_.bytes_read += o->length;
        ++info_.chunks_zero;
        WB_RETURN_IF_ERROR(Resolve(o->index, 0, kZeroChunkDigest));
        break;
      case Outcome::Kind::kDeallocated:  // stored as a zero chunk read from the device would be
        bytes_deallocated_ += o->length;
        ++info_.chunks_zero;
        WB_RETURN_IF_ERROR(Resolve(o->index, 0, kZeroChunkDigest));
        break;
      case Outcome::Kind::kHashed:
        WB_RETURN_IF_ERROR(OnHashed(*o));
        break;
      case Outcome::Kind::kEncoded:
        WB_RETURN_IF_ERROR(OnEncoded(*o));
        break;
    }
    Report(false);
  }
}

void Snapshotter::Stop() {
  stop_ = true;
  buffers_->Close();
  jobs_.Close();
  // No worker may stay blocked waiting for a record slot: a record the coordinator stopped
  // before writing (a failed write, one still queued) never gives its slot back.
  record_slots_.Close();
}

// A run that was interrupted (killed, power cut) left its snapshot "running": close it (the
// chunks it committed stay and are found by digest), then start this run's catalog row.

}  // namespace wanbackup::pipeline::internal
