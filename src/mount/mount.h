// `wanbackup mount`: a repository's snapshots as a read-only file system (FUSE): one directory
// per snapshot holding disk.img and info.json (snapshot_tree.h), read on demand through a
// bounded cache with sequential read-ahead (image_reader.h). The caller keeps the repository
// open for reading while it is mounted, so its reader lock keeps prune from removing a pack
// under the mount. libfuse3 stays inside this module (mount/internal/).
// Threading: ServeMount runs the FUSE loop on the calling thread, which must own the
// repository's catalog; the fetcher threads read packs only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "mount/image_reader.h"
#include "repository/repository.h"

namespace wanbackup::mount {

struct MountOptions {
  std::string mountpoint;
  // >= 0: the mountpoint directory, open (O_PATH will do; the caller keeps it open while
  // ServeMount runs). Root mounts on it through /proc/self/fd/N, so a link or directory put at
  // `mountpoint`'s path after it was opened is not what gets covered. Another user's mount goes
  // through fusermount3, which takes a path: `mountpoint`.
  int mountpoint_fd = -1;
  ReaderOptions reader;
  // Called on the calling thread once the file system is mounted, before any request is
  // served (the CLI detaches a --background mount there). An error unmounts and is returned.
  std::function<Status()> on_mounted;
};

// What stops a mount, each one clear line: the mountpoint missing (NotFound) or not a directory
// (InvalidArgument), something mounted there already (Busy), /dev/fuse absent (NotFound) or
// not this user's to use, not root and no user_allow_other in /etc/fuse.conf
// (PermissionDenied). Changes nothing.
Status CheckCanMount(const std::string& mountpoint);

// Mounts `snapshots` (complete ones, oldest first) at options.mountpoint and serves requests
// until it is unmounted (fusermount3 -u, umount) or SIGINT, SIGTERM or SIGHUP arrives, then
// unmounts. With `stats`, what the reads cost.
Status ServeMount(pipeline::Repository& repo, std::vector<catalog::SnapshotInfo> snapshots,
                  const MountOptions& options, ReaderStats* stats = nullptr);

}  // namespace wanbackup::mount
