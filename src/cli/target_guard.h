// Refusing to write to a disk that is being backed up. Shared by restore (to a LUN or device)
// and replicate. Called on the command's thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "pipeline/repository.h"

namespace wanbackup::cli {

// The LUN an iSCSI URL names, as "IQN/LUN" (portals may differ for the same LUN); "" when the
// URL names none.
std::string LunName(const std::string& spec);

// InvalidArgument when `to` (an iSCSI URL or a path) is the source of snapshot `snapshot_id`
// (0: none), or, with `running`, of a snapshot running now: a "running" row counts only while
// another process holds the repository's writer lock (a killed run leaves its row behind). A
// LUN is compared by IQN and LUN, a path by the device or inode it resolves to.
Status RefuseSourceOf(pipeline::Repository& repo, const std::string& to, int64_t snapshot_id,
                      bool running);

}  // namespace wanbackup::cli
