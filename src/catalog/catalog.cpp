#include "catalog/catalog.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "catalog/internal/job_runs.h"
#include "catalog/internal/replicas.h"
#include "catalog/internal/schema.h"
#include "catalog/internal/sqlite.h"
#include "catalog/map_codec.h"
#include "common/failpoint.h"

namespace wanbackup::catalog {
namespace {

using internal::Db;
using internal::Stmt;

SnapshotStatus StatusFromName(const std::string& s) {
  if (s == "running") return SnapshotStatus::kRunning;
  if (s == "complete") return SnapshotStatus::kComplete;
  return SnapshotStatus::kFailed;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kSnapshotColumns =
    "id, source, tag, hostname, size_bytes, block_size, chunk_size, started, finished, status, "
    "bytes_read, bytes_new, bytes_stored, chunks_total, chunks_new, chunks_zero, "
    "coalesce(record_id, 0), job";

SnapshotInfo SnapshotFromRow(const Stmt& s) {
  SnapshotInfo i;
  i.id = s.Int(0);
  i.source = s.Text(1);
  i.tag = s.Text(2);
  i.hostname = s.Text(3);
  i.size_bytes = static_cast<uint64_t>(s.Int(4));
  i.block_size = static_cast<uint32_t>(s.Int(5));
  i.chunk_size = static_cast<uint32_t>(s.Int(6));
  i.started_unix_ms = s.Int(7);
  i.finished_unix_ms = s.Int(8);
  i.status = StatusFromName(s.Text(9));
  i.bytes_read = static_cast<uint64_t>(s.Int(10));
  i.bytes_new = static_cast<uint64_t>(s.Int(11));
  i.bytes_stored = static_cast<uint64_t>(s.Int(12));
  i.chunks_total = static_cast<uint64_t>(s.Int(13));
  i.chunks_new = static_cast<uint64_t>(s.Int(14));
  i.chunks_zero = static_cast<uint64_t>(s.Int(15));
  i.record_id = s.Int(16);
  i.job = s.Text(17);
  return i;
}

class SqliteCatalog final : public Catalog {
 public:
  explicit SqliteCatalog(Db db) : db_(std::move(db)) {}

  // `read_only`: opened so; nothing is set that writes, and an older schema is not migrated.
  Status Init(bool create, std::chrono::milliseconds busy_timeout, bool read_only = false) {
    const std::string busy = "PRAGMA busy_timeout = " + std::to_string(busy_timeout.count());
    WB_RETURN_IF_ERROR(db_.Exec(busy.c_str()));
    if (!read_only) {
      // WAL: readers never block the writer. FULL: a commit is durable when it returns.
      WB_RETURN_IF_ERROR(db_.Exec("PRAGMA journal_mode = WAL"));
      WB_RETURN_IF_ERROR(db_.Exec("PRAGMA synchronous = FULL"));
    }
    WB_RETURN_IF_ERROR(db_.Exec("PRAGMA foreign_keys = ON"));
    // The digest index takes random inserts and lookups: with SQLite's default 2 MiB cache,
    // each one goes to the kernel once the catalog outgrows it (a few hundred thousand chunks).
    // 64 MiB keeps the index's upper levels and most hot pages in memory.
    WB_RETURN_IF_ERROR(db_.Exec("PRAGMA cache_size = -65536"));
    WB_ASSIGN_OR_RETURN(Stmt version, Stmt::Prepare(db_, "PRAGMA user_version"));
    WB_ASSIGN_OR_RETURN(bool row, version.Step());
    version_ = row ? static_cast<int>(version.Int(0)) : 0;
    version.Reset();
    if (version_ == 0 && !create) {
      return Status::Corruption("catalog: the database holds no wanbackup catalog");
    }
    if (version_ > kSchemaVersion) {
      return Status::Unsupported("catalog: schema version " + std::to_string(version_) +
                                 " is newer than this wanbackup understands (" +
                                 std::to_string(kSchemaVersion) + "); upgrade wanbackup");
    }
    if (read_only && version_ < kSchemaVersion) {
      return Status::Unsupported("catalog: schema version " + std::to_string(version_) +
                                 " must be upgraded, and the repository is read-only; run "
                                 "'wanbackup snapshots' once where it can be written");
    }
    while (version_ < kSchemaVersion) {
      WB_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
      Status s = db_.Exec(internal::SchemaMigration(version_));
      if (s.ok()) {
        const std::string bump = "PRAGMA user_version = " + std::to_string(version_ + 1);
        s = db_.Exec(bump.c_str());
      }
      if (!s.ok()) {
        (void)db_.Exec("ROLLBACK");
        return s.WithContext("migrating to schema " + std::to_string(version_ + 1));
      }
      WB_RETURN_IF_ERROR(db_.Exec("COMMIT"));
      ++version_;
    }
    return Prepare();
  }

  Result<std::unique_ptr<Transaction>> Begin() override {
    if (WB_INJECT_ERROR("catalog.begin")) return Status::IoError("catalog: BEGIN: disk I/O error");
    WB_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
    return std::make_unique<Transaction>(this);
  }

  int schema_version() const override { return version_; }

  Result<int64_t> AddPack(const std::string& name) override {
    add_pack_.Bind(1, name).Bind(2, NowMs());
    WB_RETURN_IF_ERROR(add_pack_.Run());
    return sqlite3_last_insert_rowid(db_.get());
  }

  Result<int64_t> AddPackWithSize(const std::string& name, uint64_t size) override {
    WB_ASSIGN_OR_RETURN(int64_t id, AddPack(name));
    WB_RETURN_IF_ERROR(SetPackSize(id, size));
    return id;
  }

  Status SetPackSize(int64_t pack_id, uint64_t size) override {
    set_pack_size_.Bind(1, static_cast<int64_t>(size)).Bind(2, pack_id);
    return set_pack_size_.Run();
  }

  Status DeletePack(int64_t pack_id) override {
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "DELETE FROM packs WHERE id = ?"));
    s.Bind(1, pack_id);
    return s.Run();
  }

  Result<std::vector<ChunkRecord>> ChunksInPack(int64_t pack_id) override {
    WB_ASSIGN_OR_RETURN(Stmt s,
                        Stmt::Prepare(db_,
                                      "SELECT id, digest, pack_id, offset, stored_size, raw_size, "
                                      "kind FROM chunks WHERE pack_id = ? ORDER BY offset"));
    s.Bind(1, pack_id);
    std::vector<ChunkRecord> out;
    for (;;) {
      WB_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return out;
      out.push_back(ChunkFromRow(s));
    }
  }

  Status MoveChunk(int64_t id, int64_t pack_id, uint64_t offset) override {
    WB_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db_, "UPDATE chunks SET pack_id = ?, offset = ? WHERE id = ?"));
    s.Bind(1, pack_id).Bind(2, static_cast<int64_t>(offset)).Bind(3, id);
    return s.Run();
  }

  Status DeleteChunk(int64_t id) override {
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "DELETE FROM chunks WHERE id = ?"));
    s.Bind(1, id);
    return s.Run();
  }

  Result<int64_t> MaxChunkId() override {
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "SELECT coalesce(max(id), 0) FROM chunks"));
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Int(0) : 0;
  }

  Status DeleteSnapshot(int64_t id) override {
    WB_ASSIGN_OR_RETURN(Stmt maps,
                        Stmt::Prepare(db_, "DELETE FROM snapshot_maps WHERE snapshot_id = ?"));
    maps.Bind(1, id);
    WB_RETURN_IF_ERROR(maps.Run());
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "DELETE FROM snapshots WHERE id = ?"));
    s.Bind(1, id);
    WB_RETURN_IF_ERROR(s.Run());
    if (sqlite3_changes(db_.get()) != 1) {
      return Status::NotFound("no snapshot " + std::to_string(id));
    }
    return Status::Ok();
  }

  Result<std::vector<PackInfo>> Packs() override {
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "SELECT id, name, size FROM packs ORDER BY id"));
    std::vector<PackInfo> packs;
    for (;;) {
      WB_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      packs.push_back({s.Int(0), s.Text(1), static_cast<uint64_t>(s.Int(2))});
    }
    return packs;
  }

  Result<std::optional<int64_t>> FindChunk(const Digest& digest) override {
    find_chunk_.BindBlob(1, digest.data(), digest.size());
    Result<bool> row = find_chunk_.Step();
    std::optional<int64_t> id;
    if (row.ok() && *row) id = find_chunk_.Int(0);
    find_chunk_.Reset();
    if (!row.ok()) return row.status();
    return id;
  }

  Result<int64_t> AddChunk(const ChunkRecord& c) override {
    add_chunk_.BindBlob(1, c.digest.data(), c.digest.size())
        .Bind(2, c.pack_id)
        .Bind(3, static_cast<int64_t>(c.offset))
        .Bind(4, c.stored_size)
        .Bind(5, c.raw_size)
        .Bind(6, static_cast<int64_t>(c.kind));
    WB_RETURN_IF_ERROR(add_chunk_.Run());
    return sqlite3_last_insert_rowid(db_.get());
  }

  Result<ChunkRecord> GetChunk(int64_t id) override {
    get_chunk_.Bind(1, id);
    Result<bool> row = get_chunk_.Step();
    if (!row.ok()) return row.status();
    if (!*row) {
      get_chunk_.Reset();
      return Status::Corruption("catalog: chunk " + std::to_string(id) +
                                " is referenced but missing");
    }
    ChunkRecord c = ChunkFromRow(get_chunk_);
    get_chunk_.Reset();
    return c;
  }

  Status ForEachChunk(const std::function<Status(const ChunkRecord&)>& fn) override {
    WB_ASSIGN_OR_RETURN(Stmt s,
                        Stmt::Prepare(db_,
                                      "SELECT id, digest, pack_id, offset, stored_size, raw_size, "
                                      "kind FROM chunks ORDER BY pack_id, offset"));
    for (;;) {
      WB_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return Status::Ok();
      WB_RETURN_IF_ERROR(fn(ChunkFromRow(s)));
    }
  }

  Result<int64_t> BeginSnapshot(const SnapshotInfo& i) override {
    // Above every number given out, forgotten ones included; checked before it is used. The
    // complete snapshots were checked against the sealed head when the repository was opened;
    // the floor and the rows of failed runs are not authenticated.
    WB_ASSIGN_OR_RETURN(Stmt next,
                        Stmt::Prepare(db_,
                                      "SELECT (SELECT coalesce(max(id), 0) FROM snapshots WHERE "
                                      "status = 'complete'), max((SELECT coalesce(max(id), 0) "
                                      "FROM snapshots), (SELECT coalesce(max(CAST(value AS "
                                      "INTEGER)), 0) FROM settings WHERE key = ?))"));
    next.Bind(1, std::string(kSnapshotIdFloor));
    WB_ASSIGN_OR_RETURN(const bool row, next.Step());
    const int64_t sealed = row ? next.Int(0) : 0;
    const int64_t highest = row ? std::max(sealed, next.Int(1)) : 0;
    if (highest < 0 || highest >= kMaxSnapshotId || highest - sealed > kMaxSnapshotIdLead) {
      return Status::Corruption(
          "the catalog would number the next snapshot after " + std::to_string(highest) +
          (highest - sealed > kMaxSnapshotIdLead
               ? ", far above its highest snapshot (" + std::to_string(sealed) + ")"
               : ", beyond the 2^48 a repository gives out") +
          ": its snapshot numbers or their floor are damaged or forged; run 'wanbackup repair "
          "catalog', which takes them from the packs");
    }
    WB_ASSIGN_OR_RETURN(Stmt s,
                        Stmt::Prepare(db_,
                                      "INSERT INTO snapshots (id, source, tag, hostname, "
                                      "size_bytes, block_size, chunk_size, started, status, job) "
                                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)"));
    s.Bind(1, highest + 1)
        .Bind(2, i.source)
        .Bind(3, i.tag)
        .Bind(4, i.hostname)
        .Bind(5, static_cast<int64_t>(i.size_bytes))
        .Bind(6, i.block_size)
        .Bind(7, i.chunk_size)
        .Bind(8, i.started_unix_ms)
        .Bind(9, i.job);
    WB_RETURN_IF_ERROR(s.Run());
    return sqlite3_last_insert_rowid(db_.get());
  }

  Status PutMapSegment(int64_t snapshot_id, uint64_t first_index,
                       const std::vector<int64_t>& ids) override {
    const std::string encoded = EncodeChunkMap(ids);
    put_map_.Bind(1, snapshot_id)
        .Bind(2, static_cast<int64_t>(first_index))
        .Bind(3, static_cast<int64_t>(ids.size()))
        .BindBlob(4, encoded.data(), encoded.size());
    return put_map_.Run();
  }

  Status FinishSnapshot(const SnapshotInfo& i) override {
    WB_ASSIGN_OR_RETURN(Stmt s,
                        Stmt::Prepare(db_,
                                      "UPDATE snapshots SET status = 'complete', finished = ?, "
                                      "bytes_read = ?, bytes_new = ?, bytes_stored = ?, "
                                      "chunks_total = ?, chunks_new = ?, chunks_zero = ?, "
                                      "record_id = ? WHERE id = ? AND status = 'running'"));
    s.Bind(1, i.finished_unix_ms)
        .Bind(2, static_cast<int64_t>(i.bytes_read))
        .Bind(3, static_cast<int64_t>(i.bytes_new))
        .Bind(4, static_cast<int64_t>(i.bytes_stored))
        .Bind(5, static_cast<int64_t>(i.chunks_total))
        .Bind(6, static_cast<int64_t>(i.chunks_new))
        .Bind(7, static_cast<int64_t>(i.chunks_zero));
    if (i.record_id != 0) {
      s.Bind(8, i.record_id);
    } else {
      s.BindNull(8);
    }
    s.Bind(9, i.id);
    WB_RETURN_IF_ERROR(s.Run());
    if (sqlite3_changes(db_.get()) != 1) {
      return Status::Internal("catalog: snapshot " + std::to_string(i.id) + " is not running");
    }
    return Status::Ok();
  }

  Status InsertCompleteSnapshot(const SnapshotInfo& i) override {
    WB_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db_,
                              "INSERT INTO snapshots (id, source, tag, hostname, size_bytes, "
                              "block_size, chunk_size, started, finished, status, bytes_read, "
                              "bytes_new, bytes_stored, chunks_total, chunks_new, chunks_zero, "
                              "record_id, job) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'complete', "
                              "?, ?, ?, ?, ?, ?, ?, ?)"));
    s.Bind(1, i.id)
        .Bind(2, i.source)
        .Bind(3, i.tag)
        .Bind(4, i.hostname)
        .Bind(5, static_cast<int64_t>(i.size_bytes))
        .Bind(6, i.block_size)
        .Bind(7, i.chunk_size)
        .Bind(8, i.started_unix_ms)
        .Bind(9, i.finished_unix_ms)
        .Bind(10, static_cast<int64_t>(i.bytes_read))
        .Bind(11, static_cast<int64_t>(i.bytes_new))
        .Bind(12, static_cast<int64_t>(i.bytes_stored))
        .Bind(13, static_cast<int64_t>(i.chunks_total))
        .Bind(14, static_cast<int64_t>(i.chunks_new))
        .Bind(15, static_cast<int64_t>(i.chunks_zero))
        .Bind(16, i.record_id)
        .Bind(17, i.job);
    return s.Run();
  }

  Status SetSnapshotRecord(int64_t snapshot_id, int64_t record_id) override {
    WB_ASSIGN_OR_RETURN(Stmt s,
                        Stmt::Prepare(db_, "UPDATE snapshots SET record_id = ? WHERE id = ?"));
    s.Bind(1, record_id).Bind(2, snapshot_id);
    return s.Run();
  }

  Result<std::string> GetSetting(const std::string& key) override {
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, "SELECT value FROM settings WHERE key = ?"));
    s.Bind(1, key);
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Text(0) : std::string();
  }

  Status PutSetting(const std::string& key, const std::string& value) override {
    WB_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db_, "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)"));
    s.Bind(1, key).Bind(2, value);
    return s.Run();
  }

  Result<int64_t> AddJobRun(const JobRun& run) override {
    return internal::AddJobRun(db_, run, kJobRunsKept);
  }
  Status UpdateJobRun(const JobRun& run) override { return internal::UpdateJobRun(db_, run); }
  Result<std::vector<JobRun>> JobRuns(const std::string& job, int limit) override {
    return internal::JobRuns(db_, job, limit);
  }

  Result<std::optional<Replica>> FindReplica(const std::string& identity) override {
    return internal::FindReplica(db_, identity);
  }
  Result<int64_t> PutReplica(const Replica& replica) override {
    return internal::PutReplica(db_, replica);
  }
  Result<std::vector<Replica>> Replicas() override { return internal::Replicas(db_); }
  Status DeleteReplica(int64_t id) override { return internal::DeleteReplica(db_, id); }

  Result<int> AbandonRunningSnapshots() override {
    WB_RETURN_IF_ERROR(
        db_.Exec("DELETE FROM snapshot_maps WHERE snapshot_id IN "
                 "(SELECT id FROM snapshots WHERE status = 'running')"));
    WB_RETURN_IF_ERROR(db_.Exec("UPDATE snapshots SET status = 'failed' WHERE status = 'running'"));
    return sqlite3_changes(db_.get());
  }

  Result<std::vector<SnapshotInfo>> Snapshots(bool include_incomplete) override {
    const std::string sql = std::string("SELECT ") + kSnapshotColumns + " FROM snapshots" +
                            (include_incomplete ? "" : " WHERE status = 'complete'") +
                            " ORDER BY id";
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, sql.c_str()));
    std::vector<SnapshotInfo> out;
    for (;;) {
      WB_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(SnapshotFromRow(s));
    }
    return out;
  }

  Result<SnapshotInfo> GetSnapshot(int64_t id) override {
    const std::string sql =
        std::string("SELECT ") + kSnapshotColumns + " FROM snapshots WHERE id = ?";
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_, sql.c_str()));
    s.Bind(1, id);
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) {
      // A damaged page can hide a row without SQLite noticing on the lookup: "no snapshot" only
      // when the table is whole, else the damage (exit 3, as `snapshots` says).
      WB_RETURN_IF_ERROR(CheckTable("snapshots"));
      return Status::NotFound("no snapshot " + std::to_string(id));
    }
    return SnapshotFromRow(s);
  }

  // PRAGMA quick_check of one table (its b-tree and indexes: a small table is quick).
  Status CheckTable(const char* table) {
    const std::string sql = std::string("PRAGMA quick_check(") + table + ")";
    Result<Stmt> check = Stmt::Prepare(db_, sql.c_str());
    if (!check.ok()) return check.status();
    Result<bool> row = check->Step();
    if (!row.ok()) return row.status();
    if (*row && check->Text(0) == "ok") return Status::Ok();
    return Status::Corruption(std::string("catalog: table ") + table +
                              " is damaged (catalog.db is damaged: 'wanbackup repair catalog' "
                              "rebuilds it from the packs)");
  }

  Status ForEachMapSegment(
      int64_t snapshot_id,
      const std::function<Status(uint64_t, const std::vector<int64_t>&)>& fn) override {
    WB_ASSIGN_OR_RETURN(SnapshotInfo info, GetSnapshot(snapshot_id));
    WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db_,
                                              "SELECT first_index, count, encoded FROM "
                                              "snapshot_maps WHERE snapshot_id = ? "
                                              "ORDER BY first_index"));
    s.Bind(1, snapshot_id);
    uint64_t expected = 0;
    for (;;) {
      WB_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      const auto first = static_cast<uint64_t>(s.Int(0));
      const auto count = static_cast<uint64_t>(s.Int(1));
      if (count == 0 || count > kMapSegmentChunks) {
        return Status::Corruption("snapshot " + std::to_string(snapshot_id) +
                                  ": a chunk map segment claims " + std::to_string(count) +
                                  " entries");
      }
      if (first != expected) {
        return Status::Corruption("snapshot " + std::to_string(snapshot_id) +
                                  ": chunk map segment at " + std::to_string(expected) +
                                  " is missing");
      }
      WB_ASSIGN_OR_RETURN(std::vector<int64_t> ids, DecodeChunkMap(s.Blob(2), count));
      WB_RETURN_IF_ERROR(fn(first, ids));
      expected = first + count;
    }
    if (expected != info.chunk_count()) {
      return Status::Corruption("snapshot " + std::to_string(snapshot_id) + ": chunk map covers " +
                                std::to_string(expected) + " of " +
                                std::to_string(info.chunk_count()) + " chunks");
    }
    return Status::Ok();
  }

  Result<CatalogStats> Stats() override {
    WB_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db_,
                              "SELECT (SELECT count(*) FROM chunks), "
                              "(SELECT coalesce(sum(stored_size), 0) FROM chunks), "
                              "(SELECT coalesce(sum(raw_size), 0) FROM chunks), "
                              "(SELECT count(*) FROM packs), "
                              "(SELECT count(*) FROM snapshots WHERE status = 'complete')"));
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    (void)row;
    return CatalogStats{static_cast<uint64_t>(s.Int(0)), static_cast<uint64_t>(s.Int(1)),
                        static_cast<uint64_t>(s.Int(2)), static_cast<uint64_t>(s.Int(3)),
                        static_cast<uint64_t>(s.Int(4))};
  }

 protected:
  Status CommitTransaction() override {
    if (WB_INJECT_ERROR("catalog.commit")) {
      Rollback();  // as SQLite leaves a transaction whose COMMIT failed on I/O
      return Status::IoError("catalog: COMMIT: disk I/O error");
    }
    Status s = db_.Exec("COMMIT");
    if (!s.ok()) Rollback();  // never leave the connection inside a half transaction
    return s;
  }
  void Rollback() override { (void)db_.Exec("ROLLBACK"); }

 private:
  static ChunkRecord ChunkFromRow(const Stmt& s) {
    ChunkRecord c;
    c.id = s.Int(0);
    const std::string digest = s.Blob(1);
    if (digest.size() == c.digest.size())
      std::memcpy(c.digest.data(), digest.data(), digest.size());
    c.pack_id = s.Int(2);
    c.offset = static_cast<uint64_t>(s.Int(3));
    c.stored_size = static_cast<uint32_t>(s.Int(4));
    c.raw_size = static_cast<uint32_t>(s.Int(5));
    c.kind = static_cast<ChunkKind>(s.Int(6));
    return c;
  }

  Status Prepare() {
    WB_ASSIGN_OR_RETURN(add_pack_,
                        Stmt::Prepare(db_, "INSERT INTO packs (name, created) VALUES (?, ?)"));
    WB_ASSIGN_OR_RETURN(set_pack_size_,
                        Stmt::Prepare(db_, "UPDATE packs SET size = ? WHERE id = ?"));
    WB_ASSIGN_OR_RETURN(find_chunk_, Stmt::Prepare(db_, "SELECT id FROM chunks WHERE digest = ?"));
    WB_ASSIGN_OR_RETURN(add_chunk_, Stmt::Prepare(db_,
                                                  "INSERT INTO chunks (digest, pack_id, offset, "
                                                  "stored_size, raw_size, kind) "
                                                  "VALUES (?, ?, ?, ?, ?, ?)"));
    WB_ASSIGN_OR_RETURN(get_chunk_,
                        Stmt::Prepare(db_,
                                      "SELECT id, digest, pack_id, offset, "
                                      "stored_size, raw_size, kind FROM chunks WHERE id = ?"));
    WB_ASSIGN_OR_RETURN(put_map_, Stmt::Prepare(db_,
                                                "INSERT OR REPLACE INTO snapshot_maps "
                                                "(snapshot_id, first_index, count, encoded) "
                                                "VALUES (?, ?, ?, ?)"));
    return Status::Ok();
  }

  Db db_;
  int version_ = 0;
  Stmt add_pack_, set_pack_size_, find_chunk_, add_chunk_, get_chunk_, put_map_;
};

}  // namespace

Result<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path, bool create,
                                               std::chrono::milliseconds busy_timeout) {
  WB_ASSIGN_OR_RETURN(Db db, Db::Open(path, create));
  auto catalog = std::make_unique<SqliteCatalog>(std::move(db));
  WB_RETURN_IF_ERROR(catalog->Init(create, busy_timeout));
  return std::unique_ptr<Catalog>(std::move(catalog));
}

Result<std::unique_ptr<Catalog>> Catalog::OpenReadOnly(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  struct stat st {};
  const bool has_wal = ::stat((path + "-wal").c_str(), &st) == 0;
  // Where -shm can be neither found nor made, SQLite reads a WAL database only as immutable;
  // a leftover -wal (a writer killed on a writable mount) is then read through its -shm.
  const bool immutable = !has_wal && ::access(dir.c_str(), W_OK) != 0;
  WB_ASSIGN_OR_RETURN(Db db, Db::OpenReadOnly(path, immutable));
  auto catalog = std::make_unique<SqliteCatalog>(std::move(db));
  WB_RETURN_IF_ERROR(catalog->Init(false, kDefaultBusyTimeout, true));
  return std::unique_ptr<Catalog>(std::move(catalog));
}

Result<std::unique_ptr<Catalog>> Catalog::Peek(const std::string& path) {
  WB_ASSIGN_OR_RETURN(Db db, Db::OpenReadOnly(path, true));
  auto catalog = std::make_unique<SqliteCatalog>(std::move(db));
  WB_RETURN_IF_ERROR(catalog->Init(false, std::chrono::milliseconds(0), true));
  return std::unique_ptr<Catalog>(std::move(catalog));
}

}  // namespace wanbackup::catalog
