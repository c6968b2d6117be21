// Writing a whole file so that readers see the old contents or the new, never a part, and so that
// nobody who can write the file's directory can redirect the write.
//
// wanbackup runs as root from timers and writes files in directories others may write (a
// node_exporter textfile directory, a unit directory, a repository on shared storage). The
// temporary file is therefore created in the target's directory under a random name with
// O_CREAT|O_EXCL|O_NOFOLLOW (a planted file or symlink makes the create fail, it is never opened),
// given its mode with fchmod on the descriptor (never chmod by name), written, fsynced and renamed
// over the target (rename replaces a symlink at the target, it does not follow it), and the
// directory fsynced. On any failure the temporary is unlinked: a full disk leaves nothing behind.
// Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/result.h"
#include "common/status.h"

namespace wanbackup {

// `prefix` followed by 12 random letters and digits (getrandom), for a temporary file created
// with O_EXCL beside the one it replaces. Retried on EINTR; any other getrandom error is
// returned.
Result<std::string> RandomName(const std::string& prefix);

// Replaces `path` with a file of `mode` that holds `content`. The file is owned by the caller.
[[nodiscard]] Status WriteFileAtomically(const std::string& path, std::string_view content,
                                         mode_t mode);

// The same in the directory open as `dir` (named `dir_path` in messages): for a directory
// resolved without following planted links (common/safe_path.h).
[[nodiscard]] Status WriteFileAtomicallyAt(int dir, const std::string& dir_path,
                                           const std::string& name, std::string_view content,
                                           mode_t mode);

// Reads `path` when it is a regular file, without following a symlink at its last component and
// without blocking on a FIFO; a missing file is NotFound. For files wanbackup rewrites in place
// of others (the metrics textfile): what a planted link points to is never read.
[[nodiscard]] Status ReadRegularFileNoFollow(const std::string& path, std::string* content);
// The same for `name` in the directory open as `dir` (`path` names it in messages).
[[nodiscard]] Status ReadRegularFileNoFollowAt(int dir, const std::string& name,
                                               const std::string& path, std::string* content);

}  // namespace wanbackup
