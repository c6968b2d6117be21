#include "pipeline/snapshotter.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <unordered_map>

#include "common/cancel.h"
#include "common/failpoint.h"
#include "common/text.h"
#include "pipeline/deallocation.h"
#include "pipeline/work_queue.h"
#include "pipeline/zero.h"
#include "repository/head.h"
#include "repository/record.h"
#include "repository/snapshot_sealer.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// Sealed records that may exist at once: one being encoded per worker plus two waiting for the
// coordinator to write them, but never more than this whatever the worker count, so that
// record memory stays bounded (each record is up to a chunk). Workers wait for a slot
// (record_slots_) when writing falls behind.
constexpr int kMaxRecordSlots = 62;

// The reader asks the source which chunks are deallocated this many chunks ahead at first
// (the window then doubles, deallocation.h).
constexpr uint64_t kDeallocationWindowChunks = 64;

int64_t ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// CPU time per stage in nanoseconds, added from any thread.
struct StageClock {
  std::atomic<int64_t> zero{0}, digest{0}, dedup{0}, compress{0}, encrypt{0}, write{0}, catalog{0};
  StageTimes Seconds() const {
    auto s = [](const std::atomic<int64_t>& v) { return static_cast<double>(v.load()) / 1e9; };
    return {s(zero), s(digest), s(dedup), s(compress), s(encrypt), s(write), s(catalog)};
  }
};

struct Job {
  enum class Kind { kHash, kEncode } kind;
  uint64_t index;
  uint8_t* buffer;
  uint32_t length;
  Digest digest;
};

struct Outcome {
  // kDeallocated: a chunk the source said holds no data (never read): a zero chunk.
  enum class Kind { kZero, kDeallocated, kHashed, kEncoded, kError, kReaderDone } kind;
  uint64_t index = 0;
  uint8_t* buffer = nullptr;  // kHashed: still holds the chunk
  uint32_t length = 0;
  Digest digest{};
  std::vector<uint8_t> record;  // kEncoded
  Status status;                // kError
};

class Snapshotter {
 public:
  Snapshotter(Repository& repo, BlockSource& source, const SnapshotOptions& options)
      : repo_(repo),
        catalog_(repo.catalog()),
        source_(source),
        options_(options),
        chunk_size_(repo.config().chunk_size),
        size_(source.geometry().size_bytes),
        chunk_count_((size_ + chunk_size_ - 1) / chunk_size_),
        workers_(options.workers > 0
                     ? options.workers
                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

  Result<SnapshotResult> Run();

 private:
  void ReaderLoop();
  void WorkerLoop();
  Status Coordinate();
  Status OnHashed(Outcome& o);
  Status CheckStillStored(int64_t chunk_id, uint64_t index);
  Status OnEncoded(Outcome& o);
  Status Resolve(uint64_t index, int64_t chunk_id, const Digest& digest);
  Result<int64_t> StoreRecord(const std::vector<uint8_t>& record, const Digest& digest,
                              RecordKind kind, uint32_t raw_size);
  Status Commit(bool force);
  Status BeginSnapshotRow(SnapshotResult* result);
  uint64_t ReserveMemory();
  Status SealSnapshot();
  void KeepWhatIsDurable();
  void MarkRunFailed();
  void RemoveUncommittedPack();
  Status StartPack();
  Status SyncPack();
  void Stop();
  void Report(bool force);
  uint64_t ChunkLength(uint64_t index) const {
    return std::min(chunk_size_, size_ - index * chunk_size_);
  }

  Repository& repo_;
  catalog::Catalog& catalog_;
  BlockSource& source_;
  const SnapshotOptions options_;
  const uint64_t chunk_size_;
  const uint64_t size_;
  const uint64_t chunk_count_;
  const int workers_;

  std::unique_ptr<BufferPool> buffers_;
  WorkQueue<Job> jobs_;
  WorkQueue<Outcome> outcomes_;
  std::mutex records_mu_;
  std::vector<std::vector<uint8_t>> spare_records_;  // GUARDED_BY(records_mu_)
  SlotCounter record_slots_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reader_done_{false};
  std::atomic<uint64_t> chunks_delivered_{0};  // handed to the workers by the reader
  StageClock clock_;

  // Coordinator state.
  catalog::SnapshotInfo info_;
  int64_t clock_offset_ms_ = 0;  // fake_start_unix_ms minus the real start
  std::unique_ptr<catalog::Catalog::Transaction> txn_;
  std::unique_ptr<SnapshotSealer> sealer_;
  std::unique_ptr<PackWriter> pack_;
  int64_t pack_id_ = 0;
  // A write or fdatasync of the pack failed: the page cache may hold bytes the disk never got,
  // and a retried fdatasync would report success for them. Nothing may sync or name it again.
  bool pack_failed_ = false;
  uint64_t stored_since_commit_ = 0;
  Clock::time_point last_commit_ = Clock::now();
  std::unordered_map<Digest, std::vector<uint64_t>, DigestHash> pending_;   // being encoded
  std::map<uint64_t, std::pair<std::vector<int64_t>, uint64_t>> segments_;  // first -> ids, filled
  uint64_t done_chunks_ = 0;
  uint64_t done_bytes_ = 0;
  uint64_t last_source_bytes_ = 0;              // SourceStats::bytes_read at the last report ...
  Clock::time_point last_data_ = Clock::now();  // ... and when it last changed
  uint64_t bytes_deallocated_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_report_ = Clock::now();
};

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
  return Status::Ok();
}

// Makes the pack durable and records its size, in the open transaction (no pack: nothing to do).
Status Snapshotter::SyncPack() {
  if (!pack_) return Status::Ok();
  if (pack_failed_) return Status::IoError(pack_->path() + " failed earlier; not trusted");
  WB_FAILPOINT("snapshot.before-pack-sync");
  if (Status s = pack_->Sync(); !s.ok()) {
    pack_failed_ = true;
    return s;
  }
  WB_FAILPOINT("snapshot.after-pack-sync");
  return catalog_.SetPackSize(pack_id_, pack_->size());
}

// Pack data first, then the catalog that points at it (docs/durability.md).
Status Snapshotter::Commit(bool force) {
  const bool due = stored_since_commit_ >= options_.commit_bytes ||
                   Clock::now() - last_commit_ >= options_.commit_interval;
  if (!force && !due) return Status::Ok();
  const int64_t t0 = ThreadCpuNs();
  WB_RETURN_IF_ERROR(SyncPack());
  const Status committed = txn_->Commit();
  txn_.reset();
  WB_RETURN_IF_ERROR(committed);
  WB_FAILPOINT("snapshot.after-commit");
  if (pack_ && pack_->size() >= options_.pack_size)
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
Status Snapshotter::BeginSnapshotRow(SnapshotResult* result) {
  // The snapshot record is JSON, which holds only UTF-8: refuse before anything is written.
  if (!IsUtf8(options_.source_name)) {
    return Status::InvalidArgument("the source's name '" + options_.source_name +
                                   "' is not UTF-8 text; name it by a path that is (a symlink)");
  }
  if (Status tag = CheckTag(options_.tag); !tag.ok()) return tag;
  WB_ASSIGN_OR_RETURN(auto txn, catalog_.Begin());
  WB_ASSIGN_OR_RETURN(result->abandoned_runs, catalog_.AbandonRunningSnapshots());
  info_.source = options_.source_name;
  info_.tag = options_.tag;
  info_.job = options_.job;
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  info_.hostname = host;
  info_.size_bytes = size_;
  info_.block_size = source_.geometry().block_size;
  info_.chunk_size = static_cast<uint32_t>(chunk_size_);
  info_.started_unix_ms = options_.fake_start_unix_ms != 0 ? options_.fake_start_unix_ms : UnixMs();
  clock_offset_ms_ = info_.started_unix_ms - UnixMs();
  WB_ASSIGN_OR_RETURN(info_.id, catalog_.BeginSnapshot(info_));
  return txn->Commit();
}

// After a failed run, keeps what is durable for the next one: flushes the pack and commits the
// chunks already recorded (never the snapshot itself), then marks the run failed. When the
// pack itself failed, SyncPack refuses and the open transaction rolls back: the catalog stays
// at the last good checkpoint.
void Snapshotter::KeepWhatIsDurable() {
  Status keep = SyncPack();
  if (keep.ok() && txn_) keep = txn_->Commit();
  txn_.reset();
  MarkRunFailed();
}

// Marking the run failed names nothing in the pack: done whatever else failed (if this fails
// too, the next run does it).
void Snapshotter::MarkRunFailed() {
  if (auto t = catalog_.Begin(); t.ok()) {
    if (catalog_.AbandonRunningSnapshots().ok()) (void)(*t)->Commit();
  }
}

// After a failed run (its transaction committed or rolled back): the pack it was writing, when
// the catalog does not name it, holds nothing durable anyone points at (its row was in the
// transaction that rolled back), and on a full disk it is what keeps the disk full: remove it.
// A pack the catalog names stays, as does one we cannot tell about (prune removes it later).
void Snapshotter::RemoveUncommittedPack() {
  if (!pack_) return;
  std::string name;
  const bool ours = IsPackFileName(std::filesystem::path(pack_->path()).filename().string(), &name);
  pack_.reset();  // closed before it goes
  if (!ours) return;
  Result<std::vector<catalog::PackInfo>> named = catalog_.Packs();
  if (!named.ok()) return;
  for (const catalog::PackInfo& p : *named) {
    if (p.name == name) return;
  }
  (void)repo_.RemovePack(pack_id_, name);  // a pack left behind is prune's to remove
}

// Buffers enough for the source's window and every worker, within the memory budget, and the
// record slots; returns the most memory they can hold.
uint64_t Snapshotter::ReserveMemory() {
  const size_t wanted = source_.preferred_in_flight() + 2 * static_cast<size_t>(workers_) + 2;
  const size_t affordable =
      std::max<size_t>(static_cast<size_t>(workers_) + 2,
                       options_.max_memory / chunk_size_ > static_cast<uint64_t>(workers_) + 2
                           ? static_cast<size_t>(options_.max_memory / chunk_size_ - workers_ - 2)
                           : static_cast<size_t>(workers_) + 2);
  buffers_ = std::make_unique<BufferPool>(std::min(wanted, affordable), chunk_size_);
  const int record_slots = std::min(kMaxRecordSlots, workers_ + 2);
  record_slots_.Release(record_slots);
  return (buffers_->count() + record_slots) * chunk_size_;
}

// The sealed snapshot record goes into the pack with everything it names, and the same fsync
// makes it durable before the catalog's final commit (docs/durability.md).
Status Snapshotter::SealSnapshot() {
  info_.finished_unix_ms = UnixMs() + clock_offset_ms_;
  info_.status = catalog::SnapshotStatus::kComplete;
  const uint64_t bytes_stored = info_.bytes_stored;
  WB_ASSIGN_OR_RETURN(const int64_t record_id, sealer_->Finish(repo_.config().id, info_));
  // The new head (head.h) goes into the same pack, under the same fsync and commit.
  WB_ASSIGN_OR_RETURN(const catalog::ChunkRecord sealed, catalog_.GetChunk(record_id));
  WB_ASSIGN_OR_RETURN(const SealedHead head, SealHeadAdding(repo_, {info_.id, sealed.digest}));
  WB_RETURN_IF_ERROR(
      StoreRecord(head.bytes, head.digest, RecordKind::kHead, head.raw_size).status());
  info_.bytes_stored = bytes_stored;  // as sealed: the records cannot count their own bytes
  WB_FAILPOINT("snapshot.before-finish");
  WB_RETURN_IF_ERROR(SyncPack());
  info_.record_id = record_id;
  WB_RETURN_IF_ERROR(catalog_.FinishSnapshot(info_));
  WB_RETURN_IF_ERROR(RecordHead(catalog_, head.record, head.digest));
  WB_RETURN_IF_ERROR(txn_->Commit());
  txn_.reset();
  repo_.HeadCommitted(head.record.counter);
  WB_FAILPOINT("snapshot.after-finish");
  return Status::Ok();
}

Result<SnapshotResult> Snapshotter::Run() {
  SnapshotResult result;
  WB_RETURN_IF_ERROR(BeginSnapshotRow(&result));
  info_.chunks_total = chunk_count_;
  sealer_ = std::make_unique<SnapshotSealer>(
      repo_.keys(), repo_.config().zstd_level, catalog_, chunk_count_,
      [this](const std::vector<uint8_t>& record, const Digest& digest, RecordKind kind,
             uint32_t raw_size) { return StoreRecord(record, digest, kind, raw_size); });

  result.peak_buffer_bytes = ReserveMemory();
  WB_ASSIGN_OR_RETURN(txn_, catalog_.Begin());
  start_ = Clock::now();
  last_data_ = start_;
  std::thread reader([this] {
    ReaderLoop();
    reader_done_ = true;
    outcomes_.Push(
        Outcome{Outcome::Kind::kReaderDone, 0, nullptr, 0, {}, {}, {}});  // wakes the coordinator
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < workers_; ++i)
    workers.emplace_back([this] { WorkerLoop(); });

  Status status = Coordinate();  // TakeSnapshot refuses an empty source: there is a chunk
  Stop();
  reader.join();
  for (auto& w : workers)
    w.join();

  if (!status.ok()) {
    KeepWhatIsDurable();
    RemoveUncommittedPack();
    return status;
  }
  if (Status sealed = SealSnapshot(); !sealed.ok()) {
    // Nothing since the last checkpoint is kept: the open transaction may hold half of the
    // final one (a complete snapshot), so it rolls back rather than commit.
    txn_.reset();
    MarkRunFailed();
    RemoveUncommittedPack();
    return sealed;
  }
  Report(true);
  result.info = info_;
  result.stages = clock_.Seconds();
  result.elapsed = Clock::now() - start_;
  result.source = source_.Stats();
  result.bytes_deallocated = bytes_deallocated_;
  return result;
}

}  // namespace

Result<SnapshotResult> TakeSnapshot(Repository& repo, BlockSource& source,
                                    const SnapshotOptions& options) {
  if (source.geometry().size_bytes == 0) return Status::InvalidArgument("the source is empty");
  Snapshotter s(repo, source, options);
  return s.Run();
}

Status CheckTag(std::string_view tag) {
  if (tag.size() > kMaxTagBytes) {
    return Status::InvalidArgument("the tag is longer than " + std::to_string(kMaxTagBytes) +
                                   " bytes");
  }
  if (!IsUtf8(tag)) return Status::InvalidArgument("the tag is not UTF-8 text");
  for (const char c : tag) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Status::InvalidArgument("the tag holds a control character (a tab or a newline)");
    }
  }
  return Status::Ok();
}

}  // namespace wanbackup::pipeline
