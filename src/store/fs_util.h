// Small file-system and time helpers the repository's files share. Thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace wanbackup::pipeline {

// fsync of a directory, so that files created or renamed in it survive a crash.
Status SyncDir(const std::string& path);
// The current UTC time as "2026-11-25T10:30:00Z".
std::string NowIso8601();

}  // namespace wanbackup::pipeline
