#include "catalog/internal/sqlite.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <climits>

namespace wanbackup::catalog::internal {
namespace {

Status FromSqlite(int rc, sqlite3* db, std::string_view what) {
  // A full disk is one sentence naming the file, as any other write's: not the SQL that hit it.
  if ((rc & 0xff) == SQLITE_FULL ||
      ((rc & 0xff) == SQLITE_IOERR && db != nullptr && sqlite3_system_errno(db) == ENOSPC)) {
    const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
    return Status::FromErrno(ENOSPC, file != nullptr && *file != '\0' ? file : "catalog");
  }
  std::string msg = "catalog: " + std::string(what) + ": " +
                    (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Busy(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(msg +
                                " (catalog.db is damaged: 'wanbackup repair catalog' rebuilds it "
                                "from the packs)");
    case SQLITE_CANTOPEN:
      if (db != nullptr && sqlite3_extended_errcode(db) == SQLITE_CANTOPEN_SYMLINK) {
        return Status::PermissionDenied(msg + " (a symbolic link on the way: not followed)");
      }
      return Status::NotFound(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Status::PermissionDenied(msg);
    case SQLITE_FULL:
    case SQLITE_IOERR:
      return Status::IoError(msg);
    case SQLITE_CONSTRAINT:
      return Status::AlreadyExists(msg);
    default:
      return Status::Internal(msg);
  }
}

}  // namespace

// Opens `name` (a path, or a URI with SQLITE_OPEN_URI) with `flags`; errors name `path`.
Result<Db> Db::OpenAs(const std::string& name, int flags, const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status s = FromSqlite(rc, db, "opening " + path);
    sqlite3_close(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  return Db(db);
}

namespace {

// The name SQLite is given for `path`: its directory with symlinks resolved, so that
// SQLITE_OPEN_NOFOLLOW (no symlink anywhere on the name; the -wal and -shm files are opened
// O_NOFOLLOW beside it) refuses only a link swapped in since. A catalog is never a link nor
// anything but a regular file: one planted in a repository another user can write is refused
// here, in a sentence, before SQLite follows it or writes through it.
Result<std::string> NameToOpen(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::PermissionDenied(
        path + (S_ISLNK(st.st_mode) ? " is a symbolic link" : " is not a regular file") +
        "; wanbackup never makes one there and does not follow or open it (whoever can write "
        "the directory may have planted it)");
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  char resolved[PATH_MAX];
  if (::realpath(dir.empty() ? "/" : dir.c_str(), resolved) == nullptr) return path;
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string canonical = resolved;
  return canonical == "/" ? "/" + base : canonical + "/" + base;
}

}  // namespace

Result<Db> Db::Open(const std::string& path, bool create) {
  WB_ASSIGN_OR_RETURN(const std::string name, NameToOpen(path));
  return OpenAs(name,
                SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW |
                    (create ? SQLITE_OPEN_CREATE : 0),
                path);
}

Result<Db> Db::OpenReadOnly(const std::string& path, bool immutable) {
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
  WB_ASSIGN_OR_RETURN(std::string name, NameToOpen(path));
  if (immutable) {
    // A URI: '%', '?' and '#' in the path must be escaped.
    const std::string plain = name;
    name = "file:";
    for (const char c : plain) {
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        name += hex;
      } else {
        name += c;
      }
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  return OpenAs(name, flags, path);
}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close(db_);
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}

Db::~Db() {
  if (db_ != nullptr) sqlite3_close(db_);
}

Status Db::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string what = err != nullptr ? err : "";
    sqlite3_free(err);
    return FromSqlite(rc, db_, std::string_view(sql).substr(0, 40));
  }
  return Status::Ok();
}

Status Db::Error(std::string_view what) const {
  return FromSqlite(sqlite3_errcode(db_), db_, what);
}

Result<Stmt> Stmt::Prepare(const Db& db, const char* sql) {
  Stmt s;
  s.db_ = db.get();
  const int rc =
      sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s.stmt_, nullptr);
  if (rc != SQLITE_OK) return FromSqlite(rc, db.get(), std::string("preparing ") + sql);
  return s;
}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Stmt& Stmt::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Stmt& Stmt::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindBlob(int index, const void* data, size_t size) {
  sqlite3_bind_blob(stmt_, index, data, static_cast<int>(size), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Stmt::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = FromSqlite(rc, db_, sqlite3_sql(stmt_));
  sqlite3_reset(stmt_);
  return s;
}

Status Stmt::Run() {
  Result<bool> r = Step();
  Reset();
  return r.status();
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::Text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p != nullptr ? std::string(reinterpret_cast<const char*>(p)) : std::string();
}

std::string Stmt::Blob(int column) const {
  const void* p = sqlite3_column_blob(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  return p != nullptr ? std::string(static_cast<const char*>(p), static_cast<size_t>(n))
                      : std::string();
}

}  // namespace wanbackup::catalog::internal
