// What a catalog shows of the repository format that wrote it, read without migrating its
// schema (catalog::Catalog::Open would): for a config.json that claims format 1, to tell a
// repository an old wanbackup made from one whose config.json was turned back
// (docs/threat-model.md, "Storage an attacker can write"). Thread-compatible: one call, one
// connection of its own.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace wanbackup::catalog {

struct CatalogProbe {
  int schema_version = 0;         // SQLite user_version as found
  uint64_t settings = 0;          // rows in `settings` (schema 2 on)
  uint64_t sealed_records = 0;    // chunks rows of a kind other than a chunk (schema 2 on)
  uint64_t sealed_snapshots = 0;  // snapshots that name a sealed record (schema 2 on)
};

// Reads the catalog at `path` (an existing file) without changing it.
Result<CatalogProbe> ProbeCatalog(const std::string& path);

// Empty when the probe shows nothing newer than format 1; else what does, for a message
// ("catalog schema 4, 3 settings, 7 sealed records").
std::string NewerThanFormat1(const CatalogProbe& probe);

}  // namespace wanbackup::catalog
