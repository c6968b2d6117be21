// Reading a descriptor to its end, and naming what a non-file is, for the loaders of small files
// (configs, anchors, the metrics textfile; atomic_file.h's ReadRegularFileNoFollow and
// file_trust.h's ReadTrustedFile). Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace wanbackup {

// Everything `fd` reads until its end; an error names `what`.
[[nodiscard]] Result<std::string> ReadToEnd(int fd, const std::string& what);

// "a FIFO", "a socket", "a directory", "a device", "a symbolic link", or "not a regular file",
// for a message about a file of type `mode` found where a regular file belongs.
std::string FileKind(mode_t mode);

}  // namespace wanbackup
