// The FUSE side of the mount: libfuse3's high-level API over the SnapshotTree and the
// ImageReader. Only this file pair includes <fuse.h>.
// Threading: RunFuse runs libfuse's single-threaded loop on the calling thread (which owns the
// repository's catalog); every callback runs there.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "common/status.h"
#include "mount/image_reader.h"
#include "mount/snapshot_tree.h"

namespace wanbackup::mount::internal {

struct FuseContext {
  const SnapshotTree& tree;
  ImageReader& reader;
  uid_t uid;  // owner of every node (the mounting user); modes 0500 / 0400
  gid_t gid;
};

// Mounts read-only at `mount_at` (allow_other, so root can loop-mount the image of a user's
// mount; default_permissions, so the kernel keeps everyone else out), calls on_mounted, serves
// until unmounted or SIGINT/SIGTERM/SIGHUP, then unmounts. `mount_at` may be /proc/self/fd/N
// of an open directory (as root: mount(2) and umount2(2) follow that link to the directory
// itself); messages name `mountpoint`.
Status RunFuse(const std::string& mountpoint, const std::string& mount_at, FuseContext& context,
               const std::function<Status()>& on_mounted);

}  // namespace wanbackup::mount::internal
