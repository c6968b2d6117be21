// The catalog's schema: the SQL that builds it, one migration per version, applied in order by
// Catalog::Open (docs/format.md, "Catalog (catalog.db)"). Stateless, thread-safe.
#pragma once

namespace wanbackup::catalog::internal {

// The SQL that upgrades the schema from `version` to `version` + 1 (0 <= version <
// kSchemaVersion).
const char* SchemaMigration(int version);

}  // namespace wanbackup::catalog::internal
