// Whether a file wanbackup reads its orders or secrets from can be trusted: the one check every
// loader of a config file or credential file (passphrase, key file, CHAP secret) goes through.
//
// As sshd's StrictModes and sudo do: the file and every directory above it, up to /, must be
// owned by root or by the user wanbackup runs as (the effective uid) and must not be writable by
// group or others; whoever can write a directory on the way can swap the file. A sticky
// directory (/tmp, /dev/shm) is the one exception, where sshd is stricter: others may add entries
// there but cannot rename or remove what root or the user owns, and everything below it on the
// path is checked for exactly that. A secret file must also not be
// readable or writable by group or others (mode 0600 or 0400); a config file may be readable by
// its group (0640), as it names secrets only by their files. Both the path as given and the path
// its symlinks resolve to are checked, and every symlink on the path as given must be root's or
// the user's. A pipe and a character device (a shell's <(...), /dev/stdin) are the invoker's
// own data and are not checked, except that a named FIFO must be root's or the user's. The failure
// is one line naming the path that fails and why. Thread-safe (no shared state).
#pragma once

#include <sys/stat.h>

#include <string>

#include "common/result.h"
#include "common/status.h"

namespace wanbackup {

enum class TrustedFile {
  kConfig,  // not writable by group or others, not readable by others
  kSecret,  // no access at all for group or others
};

// Checks `path` (stat'ed here) and its directories. PermissionDenied when one fails.
[[nodiscard]] Status CheckTrustedFile(const std::string& path, TrustedFile kind);
// The same for a file already open, whose fstat is `st` (no second lookup of the file itself).
[[nodiscard]] Status CheckTrustedFile(const std::string& path, const struct stat& st,
                                      TrustedFile kind);

// Checks the directory `dir` as a place root may write in: it, every directory above it up to /
// (as named and as its symlinks resolve) and every symlink on the way, by the rule above; `what`
// (e.g. "repository /srv/r") says in the message what the directory holds. PermissionDenied
// when one fails, NotFound when `dir` is missing.
[[nodiscard]] Status CheckTrustedDirectory(const std::string& dir, const std::string& what);

// The whole text of the regular file `path`, read through the one descriptor the check above
// judged (never a second lookup by name, which a swap could win). NotFound, PermissionDenied
// (the check), InvalidArgument (not a regular file) or an I/O error.
[[nodiscard]] Result<std::string> ReadTrustedFile(const std::string& path, TrustedFile kind);

}  // namespace wanbackup
