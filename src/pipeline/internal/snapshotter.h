// The snapshot's machinery behind TakeSnapshot (snapshotter.h): one Snapshotter per run. Its
// stages — the reader thread, the workers (zero check, digest, compress, encrypt) and the
// coordinator (dedup, pack writes, catalog commits) — are in snapshotter.cpp; the run's life —
// its catalog row, memory, sealing, and what stays after a failure — in snapshot_run.cpp.
// Run() is called once, on the calling thread, which becomes the coordinator.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "common/block_io.h"
#include "pipeline/snapshotter.h"
#include "pipeline/work_queue.h"
#include "repository/record.h"
#include "repository/snapshot_sealer.h"
#include "store/pack.h"

namespace wanbackup::pipeline::internal {

using Clock = std::chrono::steady_clock;

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
        options_(ForStore(repo, options)),
        chunk_size_(repo.config().chunk_size),
        size_(source.geometry().size_bytes),
        chunk_count_((size_ + chunk_size_ - 1) / chunk_size_),
        workers_(options.workers > 0
                     ? options.workers
                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

  Result<SnapshotResult> Run();

 private:
  // On object storage a pack is uploaded whole at each Sync: packs of kObjectPackSize, each
  // uploaded once, in the background when it is full (or at a checkpoint), several at once
  // (snapshotter.cpp, ClosePack); checkpoints come less often there.
  static SnapshotOptions ForStore(const Repository& repo, SnapshotOptions options) {
    const bool remote = repo.remote();
    if (remote) options.pack_size = std::min<uint64_t>(options.pack_size, kObjectPackSize);
    if (options.commit_bytes == 0)
      options.commit_bytes = remote ? kObjectCheckpointBytes : kCheckpointBytes;
    if (options.commit_interval.count() == 0)
      options.commit_interval = remote ? kObjectCheckpointInterval : kCheckpointInterval;
    if (options.upload_bytes == 0) options.upload_bytes = kObjectUploadPacks * options.pack_size;
    return options;
  }
  static constexpr uint64_t kObjectPackSize = 64ull << 20;
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
  Status ClosePack();
  Status SyncClosedPack(size_t index);
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
  // Object storage: full packs whose upload runs in the background (oldest first), named in
  // the open transaction; the next checkpoint waits for every one (SyncPack).
  struct ClosedPack {
    std::unique_ptr<PackWriter> writer;
    int64_t id = 0;
  };
  std::deque<ClosedPack> closed_;
  uint64_t peak_upload_bytes_ = 0;  // the most closed_ held at once
  uint64_t ClosedBytes() const {
    uint64_t bytes = 0;
    for (const ClosedPack& p : closed_)
      bytes += p.writer->size();
    return bytes;
  }
  // Every pack started since the last checkpoint (where it is, its id): what a failed run
  // removes unless the catalog names it.
  std::vector<std::pair<std::string, int64_t>> uncommitted_;
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

}  // namespace wanbackup::pipeline::internal
