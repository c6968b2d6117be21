// Reading small files whole (configs, anchors, records kept as files) without being held up or
// turned aside: a FIFO planted in their place must not hang the command, and a symlink planted
// at their name must not be followed. Thread-safe (no shared state).
#pragma once

#include <string>

#include "common/result.h"

namespace wanbackup {

// Everything `fd` reads until its end; an error names `what`.
[[nodiscard]] Result<std::string> ReadToEnd(int fd, const std::string& what);

// The whole of the regular file `path`, opened O_NOFOLLOW | O_NONBLOCK: NotFound when it is
// missing; InvalidArgument, one line, when it is a symlink, a FIFO, a device or a directory.
[[nodiscard]] Result<std::string> ReadRegularFile(const std::string& path);

}  // namespace wanbackup
