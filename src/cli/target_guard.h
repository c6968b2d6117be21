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

// Which rows make a disk off limits: a restore may write any disk but one being read by a
// snapshot running now; a replica must be no disk this repository holds a complete snapshot of
// (replicate holds the writer lock, so no snapshot runs meanwhile).
enum class SourceRule { kRunning, kAnySnapshot };

// InvalidArgument when `to` (an iSCSI URL or a path) is the source of a snapshot the rule
// names. A "running" row counts only while another process holds the repository's writer lock
// (a killed run leaves its row behind). A LUN is compared by IQN and LUN, a path by the device
// or inode it resolves to.
Status RefuseSourceOf(pipeline::Repository& repo, const std::string& to, SourceRule rule);

}  // namespace wanbackup::cli
