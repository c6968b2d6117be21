#include "catalog/internal/replicas.h"

namespace wanbackup::catalog::internal {
namespace {

constexpr const char* kSelect =
    "SELECT id, identity, target, snapshot_id, writing_snapshot_id, updated, bytes_written, "
    "chunks_written, fingerprint, seal FROM replicas ";

Replica FromRow(const Stmt& s) {
  Replica r;
  r.id = s.Int(0);
  r.identity = s.Text(1);
  r.target = s.Text(2);
  r.snapshot_id = s.Int(3);
  r.writing_snapshot_id = s.Int(4);
  r.updated_unix_ms = s.Int(5);
  r.bytes_written = static_cast<uint64_t>(s.Int(6));
  r.chunks_written = static_cast<uint64_t>(s.Int(7));
  r.fingerprint = s.Text(8);
  r.seal = s.Text(9);
  return r;
}

}  // namespace

Result<std::optional<Replica>> FindReplica(const Db& db, const std::string& identity) {
  WB_ASSIGN_OR_RETURN(Stmt s,
                      Stmt::Prepare(db, (std::string(kSelect) + "WHERE identity = ?").c_str()));
  s.Bind(1, identity);
  WB_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<Replica>();
  return std::optional<Replica>(FromRow(s));
}

Result<int64_t> PutReplica(const Db& db, const Replica& r) {
  WB_ASSIGN_OR_RETURN(
      Stmt s,
      Stmt::Prepare(db, r.id == 0 ? "INSERT INTO replicas (identity, target, snapshot_id, "
                                    "writing_snapshot_id, updated, bytes_written, "
                                    "chunks_written, fingerprint, seal) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                                  : "UPDATE replicas SET identity = ?, target = ?, "
                                    "snapshot_id = ?, writing_snapshot_id = ?, updated = ?, "
                                    "bytes_written = ?, chunks_written = ?, fingerprint = ?, "
                                    "seal = ? WHERE id = ?"));
  s.Bind(1, r.identity)
      .Bind(2, r.target)
      .Bind(3, r.snapshot_id)
      .Bind(4, r.writing_snapshot_id)
      .Bind(5, r.updated_unix_ms)
      .Bind(6, static_cast<int64_t>(r.bytes_written))
      .Bind(7, static_cast<int64_t>(r.chunks_written))
      .Bind(8, r.fingerprint)
      .Bind(9, r.seal);
  if (r.id != 0) s.Bind(10, r.id);
  WB_RETURN_IF_ERROR(s.Run());
  if (r.id == 0) return sqlite3_last_insert_rowid(db.get());
  if (sqlite3_changes(db.get()) != 1) return Status::NotFound("no replica " + std::to_string(r.id));
  return r.id;
}

Result<std::vector<Replica>> Replicas(const Db& db) {
  WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, (std::string(kSelect) + "ORDER BY id").c_str()));
  std::vector<Replica> out;
  for (;;) {
    WB_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(FromRow(s));
  }
}

Status DeleteReplica(const Db& db, int64_t id) {
  WB_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "DELETE FROM replicas WHERE id = ?"));
  s.Bind(1, id);
  WB_RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db.get()) != 1) return Status::NotFound("no replica " + std::to_string(id));
  return Status::Ok();
}

}  // namespace wanbackup::catalog::internal
