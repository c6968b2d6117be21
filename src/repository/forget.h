// Forgetting snapshots (`wanbackup forget`), crash-safe and authenticated: one sealed forget
// record (snapshot_record.h) naming each snapshot by id and by the digest of its sealed record
// goes into a new pack and is made durable; then one catalog transaction indexes it and removes
// the snapshots' rows and maps. Their chunks stay until `prune`. A crash before the commit
// leaves the catalog as it was (the new pack is named by nothing; prune removes it); after it,
// the snapshots are gone, and a catalog rebuild leaves them out because of the forget record.
// A format-2 repository is upgraded to format 3 (config.json) before its first forget record.
//
// Runs on the calling thread. REQUIRES: the repository opened with OpenMode::kExclusive.
#pragma once

#include <cstdint>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct ForgetOutcome {
  int64_t record_id = 0;         // the forget record's chunks row
  bool upgraded_format = false;  // config.json went from format 2 to 3
};

Result<ForgetOutcome> ForgetSnapshots(Repository& repo,
                                      const std::vector<catalog::SnapshotInfo>& snapshots);

}  // namespace wanbackup::pipeline
