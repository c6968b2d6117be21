#include "mount/mount.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <climits>

#include "mount/internal/fuse_fs.h"

namespace wanbackup::mount {
namespace {

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out += static_cast<char>(std::strtol(field.substr(i + 1, 3).c_str(), nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

bool IsMountPoint(const std::string& resolved) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devs, root, point;
    if (fields >> id >> parent >> devs >> root >> point && Unescape(point) == resolved) {
      return true;
    }
  }
  return false;
}

bool UserAllowOther() {
  std::ifstream in("/etc/fuse.conf");
  std::string line;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line.compare(start, 16, "user_allow_other") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

Status CheckCanMount(const std::string& mountpoint) {
  struct stat st {};
  if (::stat(mountpoint.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Status::NotFound("mountpoint " + mountpoint + " does not exist (mkdir it first)");
    }
    return Status::FromErrno(errno, "mountpoint " + mountpoint);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("mountpoint " + mountpoint + " is not a directory");
  }
  char resolved[PATH_MAX];
  if (::realpath(mountpoint.c_str(), resolved) != nullptr && IsMountPoint(resolved)) {
    return Status::Busy("mountpoint " + mountpoint +
                        " is busy: something is mounted there already (fusermount3 -u or "
                        "umount it first)");
  }
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    if (errno == EACCES || errno == EPERM) {
      return Status::PermissionDenied(
          "this user may not use /dev/fuse: mount as root, or give the user read and write "
          "access to it");
    }
    return Status::NotFound(
        "/dev/fuse is absent: load the fuse kernel module (modprobe fuse), or give the "
        "container the device (--device /dev/fuse)");
  }
  if (::geteuid() != 0 && !UserAllowOther()) {
    return Status::PermissionDenied(
        "mounting as a user other than root needs user_allow_other in /etc/fuse.conf (so that "
        "root can read the mount, e.g. losetup): add that line, or mount as root");
  }
  return Status::Ok();
}

Status ServeMount(pipeline::Repository& repo, std::vector<catalog::SnapshotInfo> snapshots,
                  const MountOptions& options, ReaderStats* stats) {
  WB_RETURN_IF_ERROR(CheckCanMount(options.mountpoint));
  WB_RETURN_IF_ERROR(repo.LoadPacks());
  const SnapshotTree tree(std::move(snapshots));
  ImageReader reader(repo, tree, options.reader);
  internal::FuseContext context{tree, reader, ::geteuid(), ::getegid()};
  const std::string mount_at = options.mountpoint_fd >= 0 && ::geteuid() == 0
                                   ? "/proc/self/fd/" + std::to_string(options.mountpoint_fd)
                                   : options.mountpoint;
  Status served = internal::RunFuse(options.mountpoint, mount_at, context, options.on_mounted);
  if (stats != nullptr) *stats = reader.stats();
  return served;
}

}  // namespace wanbackup::mount
