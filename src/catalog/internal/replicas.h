// The replicas table (schema 4): the targets `wanbackup replicate` keeps, behind Catalog's
// replica methods. Not thread-safe: called on the catalog's thread with its Db.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/internal/sqlite.h"

namespace wanbackup::catalog::internal {

Result<std::optional<Replica>> FindReplica(const Db& db, const std::string& identity);
Result<int64_t> PutReplica(const Db& db, const Replica& replica);
Result<std::vector<Replica>> Replicas(const Db& db);
Status DeleteReplica(const Db& db, int64_t id);

}  // namespace wanbackup::catalog::internal
