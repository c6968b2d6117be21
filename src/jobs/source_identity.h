// Which sources are one disk, for retention: a snapshot series is one source however it was
// spelled (forget's --group-by source, a job's forget step). Thread-safe; reads the file
// system (stat) for local paths.
#pragma once

#include <string>

namespace wanbackup::jobs {

// An iSCSI LUN: "iscsi:IQN/LUN" (the portal left out: `localhost` and `127.0.0.1`, or another
// portal of the same target, are one LUN). A local path that exists: "block:MAJOR:MINOR" for a
// block device, "file:DEV:INODE" otherwise (symlinks and `./`, `..` aliases resolve to it).
// Anything else (a path that is gone, a URL that does not parse): "path:" and the text,
// lexically normalised.
std::string SourceIdentity(const std::string& source);

}  // namespace wanbackup::jobs
