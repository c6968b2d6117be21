// Upgrading a repository to the current format (`wanbackup migrate`). From format 1: the
// catalog gains schema 2 (when opened), each complete snapshot gets its sealed record and map
// segments (from the catalog's map, after checking that every chunk it names is the record its
// pack holds), the settings config.json must agree with go into the catalog, and config.json is
// rewritten as format 2, authenticated — last, so an interrupted migration is simply run again.
// No chunk is rewritten.
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kMigrate.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "pipeline/repository.h"

namespace wanbackup::pipeline {

struct MigrateReport {
  int from_format = 0;
  int to_format = 0;
  std::vector<int64_t> sealed;  // snapshots given a sealed record
};

Result<MigrateReport> MigrateRepository(Repository& repo);

}  // namespace wanbackup::pipeline
