// Whether a repository may be written where it is (docs/threat-model.md, "A repository another
// user can change"). wanbackup runs as root from timers; whoever else can change the repository
// directory, a directory above it or what it keeps could plant links there that make root write,
// chmod or delete outside the repository (prune removes packs, repair renames catalogs). So a
// command that writes refuses such a place, as sshd's StrictModes refuses such a home. Reading is
// allowed anywhere: what a reader opens there is never followed through a link (config.json,
// the catalog, packs, readers/). Thread-safe (no shared state).
#pragma once

#include <string>

#include "common/status.h"

namespace wanbackup::pipeline {

// Ok when the repository directory `path` and every directory above it (as named and as its
// symlinks resolve) pass file_trust.h's rule (owned by root or the user wanbackup runs as, not
// writable by group or others unless sticky), and what it keeps (packs/, readers/, catalog.db
// and its -wal and -shm, config.json, the lock files) is no symlink, is owned by root or that
// user, and (a directory) is writable by nobody else. PermissionDenied, one line naming the path
// and what to do, otherwise; NotFound when `path` is missing.
[[nodiscard]] Status CheckPlaceForWriting(const std::string& path);

}  // namespace wanbackup::pipeline
