// Resolving a path that wanbackup (often root) is about to write, without being turned aside by
// a symlink or a directory another local user planted on the way (docs/threat-model.md, "Write
// targets").
//
// The path is walked one component at a time from / (a relative one from the working
// directory), each directory opened with openat(O_PATH|O_DIRECTORY|O_NOFOLLOW) relative to the
// one before (searching a directory needs execute permission only, as the kernel's own walk), so
// the directory checked is the directory used: the caller creates, opens or renames the last
// component relative to the returned descriptor (openat/renameat with O_NOFOLLOW), and a link
// swapped in after the walk is not followed. Symlinks are followed as the kernel follows them (a
// /dev/disk/by-id link, the user's own link to a file), except one another user could have planted:
// a symlink owned by neither root nor the user wanbackup runs as, in a directory that somebody else
// can write (writable by group or others, sticky or not, or owned by another user). That is Linux's
// fs.protected_symlinks, also where it is off and also without the sticky bit. With kTrusted, every
// directory on the way must in addition pass file_trust.h's rule (owned by root or the user, not
// writable by group or others unless sticky): for files written whole as root that a service reads
// (the metrics textfile, systemd units). A link in /proc to something that is not a path (a pipe, a
// socket) ends the walk there. Thread-safe (no shared state).
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace wanbackup {

enum class PathPolicy {
  kNoPlantedLinks,  // refuse a link another user could have planted
  kTrusted,         // and every directory must be one only root or the user can change
};

struct ResolvedPath {
  // The directory that holds the last component: open for reading, or O_PATH when the user may
  // search it but not read it (usable with the *at calls and fstat, not fsync: SyncDirectory).
  UniqueFd dir;
  std::string dir_path;  // that directory, with symlinks resolved (for messages)
  std::string name;      // the last component: a file, a device, or not there yet
  // The last component is a kernel link in /proc to something that is not a path (a pipe):
  // open it following the link.
  bool proc_link = false;
  std::string path() const { return dir_path == "/" ? "/" + name : dir_path + "/" + name; }
};

// What becomes of a symlink at the last component.
enum class LastLink {
  kFollow,  // followed under the policy (a file written in place, a device)
  kKeep,    // returned as the name (a file replaced whole: rename replaces the link)
};

// InvalidArgument, one line naming the link or directory and the rule, for a refused one or a
// path that names a directory; NotFound (from errno) for a directory on the way that is missing.
Result<ResolvedPath> ResolveForWriting(const std::string& path, PathPolicy policy,
                                       LastLink last_link = LastLink::kFollow);

// Whether somebody other than root and the user can add, remove or rename entries of `dir`
// (its owner is another user, or it is writable by group or others, sticky or not).
bool OthersCanWrite(const struct stat& dir);

// A directory whose entries somebody other than root and the user can rename.
struct RenamableDir {
  std::string path;
  uid_t owner = 0;
};

// The first directory, from `dir_path` (resolved, as ResolvedPath::dir_path) up to /, in which
// another user can rename entries (OthersCanWrite), a sticky directory of root's or the user's
// excepted (there only an entry's owner renames it); nullopt when there is none. A file of root's
// reached through such a directory may be one that user renamed into the name given (round 5, V1
// and V4): read or overwritten, it is a file the user never named.
std::optional<RenamableDir> DirectoryOthersRenameIn(const std::string& dir_path);

// The same for a path as given and the directory it resolved to: the directories of `given`
// (made absolute, not resolved: where a link or device node of root's was found by name) and
// then those of `resolved_dir`. A link of root's another user renamed into place in their
// directory leads anywhere (round 6, W4 and W5).
std::optional<RenamableDir> PathOthersRenameIn(const std::string& given,
                                               const std::string& resolved_dir);

// InvalidArgument, one line ending in `outcome` ("not followed", "not written to"), when `st`
// (a symlink, a FIFO: the entry `name` of `dir`) is owned by neither root nor the user and `dir`
// is one somebody else can write: another user may have planted it. Ok otherwise.
Status RefusePlanted(int dir, const std::string& dir_path, const std::string& name,
                     const struct stat& st, const std::string& outcome);

// fsync(dir), the directory a name was created or renamed in. A directory the user may search
// but not read (an O_PATH `dir` from ResolveForWriting) cannot be opened to be fsynced: then
// nothing is done, Ok. The file itself was fsynced; only its new name waits for the kernel's
// own writeback of the directory (seconds), as it did before wanbackup synced directories.
[[nodiscard]] Status SyncDirectory(int dir, const std::string& dir_path);

}  // namespace wanbackup
