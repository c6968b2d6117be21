// Move-only owners for SQLite handles and the conversion of SQLite errors into Status
// (internal to the catalog module). Not thread-safe: a Db and its statements belong to one
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sqlite3.h>

#include "common/result.h"

namespace wanbackup::catalog::internal {

class Db {
 public:
  static Result<Db> Open(const std::string& path, bool create);
  // Opens read-only. `immutable`: SQLite is told nothing can change the file (URI immutable=1),
  // so it needs no -shm beside it; only for a database with no -wal, in a directory nobody can
  // write (a read-only mount): a -wal's commits would be ignored.
  static Result<Db> OpenReadOnly(const std::string& path, bool immutable);
  Db(Db&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  sqlite3* get() const { return db_; }
  // Runs SQL without results (may hold several statements).
  Status Exec(const char* sql);
  Status Error(std::string_view what) const;

 private:
  static Result<Db> OpenAs(const std::string& name, int flags, const std::string& path);
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
};

// A prepared statement, reset after each use. Columns are 0-based, parameters 1-based.
class Stmt {
 public:
  Stmt() = default;
  static Result<Stmt> Prepare(const Db& db, const char* sql);
  Stmt(Stmt&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, std::string_view text);
  Stmt& BindBlob(int index, const void* data, size_t size);
  Stmt& BindNull(int index);
  // Steps once: true with a row, false when done; errors as Status.
  Result<bool> Step();
  // Steps to the end (for statements without rows) and resets.
  Status Run();
  void Reset();

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string Text(int column) const;
  std::string Blob(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace wanbackup::catalog::internal
