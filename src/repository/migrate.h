// Upgrading a repository to the current format (`wanbackup migrate`). From format 1: the
// catalog gains schema 2 (when opened), each complete snapshot gets its sealed record and map
// segments (from the catalog's map, after reading every chunk it names from its pack and
// recomputing its digest under the key), the settings config.json must agree with go into the
// catalog, and config.json is rewritten as format 2, authenticated — last, so an interrupted
// migration is simply run again. No chunk is rewritten.
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kMigrate.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct MigrateReport {
  int from_format = 0;
  int to_format = 0;
  std::vector<int64_t> sealed;  // snapshots given a sealed record
};

struct MigrateOptions {
  // A config.json of format 1 is taken at its word even though the catalog or the packs show a
  // newer format (settings, sealed records, schema 2 or later): what an interrupted migration
  // leaves, but also what a config.json turned back by someone who can write the storage looks
  // like. Without it such a repository is refused (Corruption) and nothing is changed.
  bool assume_format1 = false;
};

Result<MigrateReport> MigrateRepository(Repository& repo, const MigrateOptions& options = {});

}  // namespace wanbackup::pipeline
