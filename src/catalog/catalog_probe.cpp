#include "catalog/catalog_probe.h"

#include "catalog/internal/sqlite.h"

namespace wanbackup::catalog {
namespace {

using internal::Db;
using internal::Stmt;

Result<uint64_t> Count(const Db& db, const char* sql) {
  WB_ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, sql));
  WB_ASSIGN_OR_RETURN(bool row, st.Step());
  const uint64_t n = row ? static_cast<uint64_t>(st.Int(0)) : 0;
  st.Reset();
  return n;
}

}  // namespace

Result<CatalogProbe> ProbeCatalog(const std::string& path) {
  WB_ASSIGN_OR_RETURN(Db db, Db::Open(path, false));
  WB_RETURN_IF_ERROR(db.Exec("PRAGMA busy_timeout = 10000"));
  CatalogProbe p;
  WB_ASSIGN_OR_RETURN(const uint64_t version, Count(db, "PRAGMA user_version"));
  p.schema_version = static_cast<int>(version);
  if (p.schema_version < 2) return p;
  WB_ASSIGN_OR_RETURN(p.settings, Count(db, "SELECT count(*) FROM settings"));
  WB_ASSIGN_OR_RETURN(p.sealed_records, Count(db, "SELECT count(*) FROM chunks WHERE kind != 0"));
  WB_ASSIGN_OR_RETURN(p.sealed_snapshots,
                      Count(db, "SELECT count(*) FROM snapshots WHERE record_id != 0"));
  return p;
}

std::string NewerThanFormat1(const CatalogProbe& p) {
  if (p.schema_version < 2) return "";
  std::string what = "catalog schema " + std::to_string(p.schema_version);
  if (p.settings > 0) what += ", " + std::to_string(p.settings) + " repository settings";
  if (p.sealed_records > 0) what += ", " + std::to_string(p.sealed_records) + " sealed records";
  if (p.sealed_snapshots > 0) {
    what += ", " + std::to_string(p.sealed_snapshots) + " sealed snapshots";
  }
  return what;
}

}  // namespace wanbackup::catalog
