// Catalog: the repository's index in SQLite — packs, chunks (digest -> where its record lives),
// snapshots and their chunk maps. Schema and ordering rules: docs/format.md, docs/durability.md.
//
// Not thread-safe: one thread opens it and makes every call (the pipeline's coordinator).
// Several processes may read concurrently (WAL); the repository lock keeps writers to one.
// Writes are grouped with Transaction (rolled back unless committed); a snapshot becomes
// visible (status complete) only in the transaction that writes its last map segment.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/job_run_store.h"
#include "common/result.h"

namespace wanbackup::catalog {

using Digest = std::array<uint8_t, 32>;

inline constexpr int kSchemaVersion = 6;
// Chunk indices per stored map segment (256 GiB of LUN at 4 MiB chunks).
inline constexpr uint64_t kMapSegmentChunks = 65536;
// Setting: the largest snapshot id ever given out (forgotten snapshots included).
inline constexpr const char kSnapshotIdFloor[] = "snapshot_id_floor";
// Setting: the packs an earlier catalog named that `repair catalog --allow-missing-packs` rebuilt
// without (names, space-separated). A snapshot whose sealed record is in one of them may use
// chunks of packs that are there, and nothing else says so: prune removes nothing while one is
// listed (round 11, AB1). A repair drops the names of packs that are back; `forget --lost-packs`
// drops the rest, once they are gone for good.
inline constexpr const char kMissingPacks[] = "missing_packs";
// Setting: sealed snapshot records a rebuild knew of but did not find in the packs, so that the
// pack holding each is missing, whoever can still read the old catalog: "ID:DIGEST" for one the
// newest head listed, "ID:" for the highest number this client saw (its anchor) when no record
// has it (space-separated). Prune removes nothing while one is listed, as for kMissingPacks; a
// repair drops those it finds (or a forget record names), `forget --lost-packs` the rest
// (round 12, AC1: with the old catalog unreadable, nothing recorded the missing pack).
inline constexpr const char kMissingRecords[] = "missing_records";
// The highest snapshot number a repository gives out (2^48): a catalog whose rows or floor
// would number a snapshot above it is damaged or forged (its settings are not authenticated),
// and BeginSnapshot refuses rather than seal a number nothing can follow (round 8, Y5).
inline constexpr int64_t kMaxSnapshotId = int64_t{1} << 48;
// How far the floor (or a failed run's row) may lead the highest complete snapshot: forgotten
// snapshots and failed runs leave numbers above it, never 2^32 of them. A catalog whose floor
// leads by more was written by someone without the key, and BeginSnapshot refuses it before a
// number derived from it is sealed: a floor of 2^48-1 once had snapshot 2^48 sealed, whose
// record then carried the bound into every rebuilt catalog (round 9, Z4).
inline constexpr int64_t kMaxSnapshotIdLead = int64_t{1} << 32;

// What a chunks row names (the pack record's kind, repository/record.h).
enum class ChunkKind {
  kData = 0,
  kMapSegment = 1,
  kSnapshotRecord = 2,
  kForgetRecord = 3,
  kHeadRecord = 4,
};

struct ChunkRecord {
  int64_t id = 0;
  ChunkKind kind = ChunkKind::kData;
  Digest digest{};
  int64_t pack_id = 0;
  uint64_t offset = 0;       // of the record in its pack
  uint32_t stored_size = 0;  // record payload bytes in the pack
  uint32_t raw_size = 0;     // plaintext bytes
};

enum class SnapshotStatus { kRunning, kComplete, kFailed };

struct SnapshotInfo {
  int64_t id = 0;
  std::string source;
  std::string tag;
  std::string hostname;
  std::string job;  // the config file's job that took it ("" by hand, or before schema 5)
  uint64_t size_bytes = 0;
  uint32_t block_size = 0;
  uint32_t chunk_size = 0;
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;
  SnapshotStatus status = SnapshotStatus::kRunning;
  uint64_t bytes_read = 0;    // from the source
  uint64_t bytes_new = 0;     // plaintext bytes of chunks this snapshot stored first
  uint64_t bytes_stored = 0;  // bytes this snapshot added to packs
  uint64_t chunks_total = 0;
  uint64_t chunks_new = 0;
  uint64_t chunks_zero = 0;
  int64_t record_id = 0;  // the chunks row of its sealed snapshot record (0: none yet)
  uint64_t chunk_count() const {
    return chunk_size == 0 ? 0 : (size_bytes + chunk_size - 1) / chunk_size;
  }
};

struct PackInfo {
  int64_t id = 0;
  std::string name;
  uint64_t size = 0;  // bytes known durable (every record the catalog names lies below this)
};

// A target `wanbackup replicate` keeps as a copy of this repository's snapshots (an iSCSI LUN,
// a block device or a file), and what it is known to hold. Not part of what the packs hold: after
// a catalog rebuild every replica is unknown, and its next replicate reads it to compare.
struct Replica {
  int64_t id = 0;
  std::string identity;  // what makes it the same device: IQN + LUN + VPD id, or device + inode
  std::string target;    // as the user named it (an iSCSI URL without secrets, or a path)
  // The snapshot it holds (0: unknown). While a run writes, the snapshot it was at when the run
  // started stays here, so an interrupted run can be finished from the two maps.
  int64_t snapshot_id = 0;
  int64_t writing_snapshot_id = 0;  // the snapshot a run is writing (0: none; consistent)
  // What the target looked like when the last run finished (size, stable device id, a file's
  // modification time); a run that finds it otherwise compares instead of trusting the record.
  std::string fingerprint;
  // A MAC of the fields above under the repository key (pipeline::ReplicaSeal), so that a record
  // someone without the key wrote or changed is not trusted ('' on rows from before schema 6).
  std::string seal;
  int64_t updated_unix_ms = 0;
  uint64_t bytes_written = 0;   // by the last finished run
  uint64_t chunks_written = 0;  // by the last finished run
  bool consistent() const { return writing_snapshot_id == 0 && snapshot_id != 0; }
};

struct CatalogStats {
  uint64_t chunks = 0;
  uint64_t stored_bytes = 0;
  uint64_t raw_bytes = 0;
  uint64_t packs = 0;
  uint64_t snapshots = 0;
};

class Catalog : public JobRunStore {
 public:
  static constexpr std::chrono::milliseconds kDefaultBusyTimeout{10000};
  // Opens (and with `create`, creates) the catalog at `path`, migrating an older schema. A
  // statement that finds the database locked by another connection retries for up to
  // `busy_timeout`, then fails with Busy.
  static Result<std::unique_ptr<Catalog>> Open(
      const std::string& path, bool create,
      std::chrono::milliseconds busy_timeout = kDefaultBusyTimeout);
  // Opens the catalog at `path` for reading only, for a repository nobody can write (a
  // read-only mount, write-protected media, a directory without write permission): no schema
  // migration, and no -shm needed where none can be made (docs/operations.md). Writes fail.
  static Result<std::unique_ptr<Catalog>> OpenReadOnly(const std::string& path);
  // A glance at another repository's catalog that changes nothing there and waits for nothing:
  // SQLite's immutable mode (no lock, no -shm or -wal made). What a running writer has not yet
  // checkpointed is not seen.
  static Result<std::unique_ptr<Catalog>> Peek(const std::string& path);
  virtual ~Catalog() = default;

  class Transaction {
   public:
    explicit Transaction(Catalog* catalog) : catalog_(catalog) {}
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    ~Transaction() {
      if (catalog_ != nullptr) catalog_->Rollback();
    }
    // Commits once; a second call (or after a failed one) is an error, not a crash.
    Status Commit() {
      Catalog* c = catalog_;
      if (c == nullptr) return Status::Internal("catalog: the transaction is already finished");
      catalog_ = nullptr;
      return c->CommitTransaction();
    }

   private:
    Catalog* catalog_;
  };
  // Begins a write transaction; it rolls back unless committed.
  virtual Result<std::unique_ptr<Transaction>> Begin() = 0;

  virtual int schema_version() const = 0;

  // Packs.
  virtual Result<int64_t> AddPack(const std::string& name) = 0;
  // For a catalog rebuild: a pack as found on disk.
  virtual Result<int64_t> AddPackWithSize(const std::string& name, uint64_t size) = 0;
  virtual Status SetPackSize(int64_t pack_id, uint64_t size) = 0;
  virtual Result<std::vector<PackInfo>> Packs() = 0;
  // For prune: forgets a pack. REQUIRES: no chunks row names it any more.
  virtual Status DeletePack(int64_t pack_id) = 0;

  // Chunks. FindChunk returns the id of a stored chunk with this digest, if any.
  virtual Result<std::optional<int64_t>> FindChunk(const Digest& digest) = 0;
  virtual Result<int64_t> AddChunk(const ChunkRecord& chunk) = 0;
  virtual Result<ChunkRecord> GetChunk(int64_t id) = 0;
  // Every chunks row, ordered by pack and offset.
  virtual Status ForEachChunk(const std::function<Status(const ChunkRecord&)>& fn) = 0;
  // The rows of one pack, by offset.
  virtual Result<std::vector<ChunkRecord>> ChunksInPack(int64_t pack_id) = 0;
  // For prune: the record now lives at (pack_id, offset), a copy of the one the row named.
  virtual Status MoveChunk(int64_t id, int64_t pack_id, uint64_t offset) = 0;
  // For prune: drops a row no snapshot names (its bytes go when its pack does).
  virtual Status DeleteChunk(int64_t id) = 0;
  // The largest chunk id in use (0 when none).
  virtual Result<int64_t> MaxChunkId() = 0;

  // Snapshots. A new snapshot's id is above every id the repository ever used, forgotten ones
  // included (the setting kSnapshotIdFloor), so an id names one snapshot for life.
  virtual Result<int64_t> BeginSnapshot(const SnapshotInfo& info) = 0;
  virtual Status PutMapSegment(int64_t snapshot_id, uint64_t first_index,
                               const std::vector<int64_t>& chunk_ids) = 0;
  // Records the final counters and the sealed record (info.record_id) and marks the snapshot
  // complete.
  virtual Status FinishSnapshot(const SnapshotInfo& info) = 0;
  // For a catalog rebuild or a migration: a complete snapshot with its original id.
  virtual Status InsertCompleteSnapshot(const SnapshotInfo& info) = 0;
  // For a migration: records the sealed record of an existing complete snapshot.
  virtual Status SetSnapshotRecord(int64_t snapshot_id, int64_t record_id) = 0;
  // Marks every snapshot still "running" as failed and drops its map (a run that was
  // interrupted; its stored chunks stay and are reused). Returns how many.
  virtual Result<int> AbandonRunningSnapshots() = 0;
  virtual Result<std::vector<SnapshotInfo>> Snapshots(bool include_incomplete) = 0;
  // For forget: removes the snapshot's row and map (its chunks stay until prune).
  virtual Status DeleteSnapshot(int64_t id) = 0;
  virtual Result<SnapshotInfo> GetSnapshot(int64_t id) = 0;
  // Calls `fn` for each map segment of the snapshot in index order; ids are chunk ids, 0 for
  // an all-zero chunk. Fails with Corruption when segments are missing or malformed.
  virtual Status ForEachMapSegment(
      int64_t snapshot_id,
      const std::function<Status(uint64_t first_index, const std::vector<int64_t>& ids)>& fn) = 0;

  virtual Result<CatalogStats> Stats() = 0;

  // Job history: JobRunStore's methods, on the catalog's job_runs table (a local repository's).

  // Replicas. PutReplica inserts (replica.id == 0) or rewrites the row and returns its id.
  virtual Result<std::optional<Replica>> FindReplica(const std::string& identity) = 0;
  virtual Result<int64_t> PutReplica(const Replica& replica) = 0;
  virtual Result<std::vector<Replica>> Replicas() = 0;
  // NotFound when there is no replica `id`.
  virtual Status DeleteReplica(int64_t id) = 0;

  // Repository settings kept beside config.json (repository id, encryption, KDF floor), so a
  // config.json edited on its own is noticed. Empty when unset.
  virtual Result<std::string> GetSetting(const std::string& key) = 0;
  virtual Status PutSetting(const std::string& key, const std::string& value) = 0;

 protected:
  virtual Status CommitTransaction() = 0;
  virtual void Rollback() = 0;
};

}  // namespace wanbackup::catalog
