#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/failpoint.h"
#include "common/text.h"
#include "pipeline/internal/snapshotter.h"
#include "pipeline/snapshotter.h"
#include "repository/head.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline {
namespace internal {
namespace {

// Sealed records that may exist at once: one being encoded per worker plus two waiting for the
// coordinator to write them, but never more than this whatever the worker count, so that
// record memory stays bounded (each record is up to a chunk). Workers wait for a slot
// (record_slots_) when writing falls behind.
constexpr int kMaxRecordSlots = 62;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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

// After a failed run (its transaction committed or rolled back): the packs it started since its
// last checkpoint, when the catalog does not name them, hold nothing durable anyone points at
// (their rows were in the transaction that rolled back), and on a full disk they are what keeps
// the disk full; on S3 a pack nobody names makes the next command rebuild the cache. Remove
// them. A pack the catalog names stays, as does one we cannot tell about (prune removes it later).
void Snapshotter::RemoveUncommittedPack() {
  closed_.clear();  // each writer's upload ends before it goes
  pack_.reset();    // closed before it goes
  if (uncommitted_.empty()) return;
  Result<std::vector<catalog::PackInfo>> named = catalog_.Packs();
  if (!named.ok()) return;
  for (const auto& [path, id] : uncommitted_) {
    std::string name;
    if (!IsPackFileName(std::filesystem::path(path).filename().string(), &name)) continue;
    const bool kept = std::any_of(named->begin(), named->end(),
                                  [&](const catalog::PackInfo& p) { return p.name == name; });
    if (!kept) (void)repo_.RemovePack(id, name);  // a pack left behind is prune's to remove
  }
  uncommitted_.clear();
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
  result.peak_upload_bytes = peak_upload_bytes_;
  return result;
}

}  // namespace internal

Result<SnapshotResult> TakeSnapshot(Repository& repo, BlockSource& source,
                                    const SnapshotOptions& options) {
  if (source.geometry().size_bytes == 0) return Status::InvalidArgument("the source is empty");
  internal::Snapshotter s(repo, source, options);
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
  // A tag that reads as another one ('latest ', a zero-width space inside) would be picked for
  // it in `snapshots` and the mount view (round 9, Z6).
  if (HasEdgeSpace(tag)) {
    return Status::InvalidArgument("the tag begins or ends with white space");
  }
  if (const std::optional<uint32_t> cp = FirstInvisibleCharacter(tag)) {
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(*cp));
    return Status::InvalidArgument(std::string("the tag holds ") + code +
                                   ", a character that shows as nothing (a tag with one reads "
                                   "as another tag)");
  }
  // `wanbackup mount` shows each tag as a link beside the snapshots' numbered directories and
  // `latest` (mount/snapshot_tree.h): a tag that cannot be such a name would be left out.
  const bool digits = !tag.empty() && std::all_of(tag.begin(), tag.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
  if (tag == "." || tag == ".." || tag == "latest" || digits ||
      tag.find('/') != std::string_view::npos) {
    return Status::InvalidArgument(
        "the tag '" + std::string(tag) +
        "' is not allowed: a tag may not be '.', '..', 'latest' or all digits, nor hold '/' (the "
        "mount view names snapshots by number and 'latest', and each tag as a link beside them)");
  }
  return Status::Ok();
}

}  // namespace wanbackup::pipeline
