#include "pipeline/file_sink.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/atomic_file.h"
#include "common/char_device.h"
#include "common/failpoint.h"
#include "common/safe_path.h"
#include "common/units.h"

namespace wanbackup::pipeline {
Result<std::unique_ptr<FileSink>> FileSink::Open(const std::string& path,
                                                 const FileSinkOptions& options) {
  std::unique_ptr<FileSink> sink(new FileSink());
  sink->name_ = path;
  if (path == "-") {
    sink->fd_ = STDOUT_FILENO;
    sink->owns_fd_ = false;
    sink->sequential_ = true;
    sink->name_ = "standard output";
    return sink;
  }
  Result<ResolvedPath> resolved = ResolveForWriting(path, PathPolicy::kNoPlantedLinks);
  if (!resolved.ok()) {  // a refused link says so; a missing directory names the path too
    const Status why = resolved.status();
    return why.code() == StatusCode::kInvalidArgument ? why
                                                      : why.WithContext("cannot open " + path);
  }
  ResolvedPath where = std::move(resolved).value();
  sink->dir_ = std::move(where.dir);
  sink->dir_path_ = where.dir_path;
  sink->file_name_ = where.name;
  sink->proc_link_ = where.proc_link;
  const int dir = sink->dir_.get();
  const char* name = sink->file_name_.c_str();
  struct stat st {};
  // A /proc link to a pipe or socket (/dev/stdout on a pipe): it has no other name to open.
  const int follow = where.proc_link ? 0 : AT_SYMLINK_NOFOLLOW;
  if (::fstatat(dir, name, &st, follow) == 0) {
    WB_RETURN_IF_ERROR(sink->OpenExisting(st, options));
    return sink;
  }
  if (errno != ENOENT) return Status::FromErrno(errno, "cannot examine " + path);
  sink->regular_ = true;
  sink->zeros_free_ = true;
  sink->fd_ = ::openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (sink->fd_ < 0 && errno == EEXIST) {
    return options.in_place ? Status::Busy(path + " appeared while it was being opened; try again")
                            : Status::AlreadyExists(path + " exists; use --force to overwrite it");
  }
  if (sink->fd_ < 0) return Status::FromErrno(errno, "cannot create " + path);
  sink->sync_dir_ = true;
  sink->created_ = true;
  sink->remove_unfinished_ = !options.in_place;
  return sink;
}

// An existing file, device or pipe, whose fstatat is `st`.
Status FileSink::OpenExisting(const struct stat& st, const FileSinkOptions& options) {
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(name_ + " is a directory; give a file or device path");
  }
  if (S_ISBLK(st.st_mode)) {
    // A device node of root's, or root's link to one, that another user renamed into place.
    WB_RETURN_IF_ERROR(RefuseRenamedIn(st));
    return OpenBlockDevice(options.expected_size);
  }
  if (S_ISCHR(st.st_mode)) {
    // Refused before it is opened: opening some of them acts (a watchdog starts).
    if (std::string refusal = CharacterDeviceRefusal(name_, st.st_rdev); !refusal.empty()) {
      return Status::InvalidArgument(refusal);
    }
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return OpenStream();
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(name_ + " is neither a file nor a device; nothing was written");
  }
  if (options.in_place) return OpenInPlace();
  if (!options.overwrite) {
    return Status::AlreadyExists(name_ + " exists; use --force to overwrite it");
  }
  // The directory the file is replaced in is the one held from here on: what is checked now is
  // what the replacement removes.
  WB_RETURN_IF_ERROR(RefuseRenamedIn(st));
  regular_ = true;
  zeros_free_ = true;
  return OpenReplacement(st);
}

// An existing regular file written where it is (a replica): the file opened is the one checked
// (a FIFO swapped in is not waited on). Another user's file is written only in a directory that
// nobody but root or us can change (a standby VM's image that its service user owns): where that
// user can create files, theirs could have taken the inode number of the replica wanbackup wrote,
// and they would read the disk written into it.
Status FileSink::OpenInPlace() {
  fd_ = ::openat(dir_.get(), file_name_.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) return Status::FromErrno(errno, "cannot open " + name_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "cannot examine " + name_);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(name_ +
                                   " changed while it was being opened; nothing was written");
  }
  WB_RETURN_IF_ERROR(RefuseRenamedIn(st));
  struct stat dir {};
  const auto ours = [](uid_t uid) { return uid == 0 || uid == ::geteuid(); };
  if (!ours(st.st_uid) && (::fstat(dir_.get(), &dir) != 0 || !ours(dir.st_uid) ||
                           (dir.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
    return Status::InvalidArgument(
        name_ + " is owned by uid " + std::to_string(st.st_uid) + " in " + dir_path_ +
        ", where others can create files: it may not be the replica written before, and its "
        "owner could read the disk written into it; remove it or chown it. Nothing was written");
  }
  regular_ = true;
  return Status::Ok();
}

// A file or device of root's (or ours) reached through a directory another user can change, on
// the path as given or where its links led: that user may have renamed a directory, file, link
// or device node only root may write into the name given (a root-only directory renamed to the
// VM's), and the disk would be written over a file nobody named (round 5, V4; round 6, W4). Such a
// file is written only from directories only root or we control; a file of the user who controls
// the directory is theirs (OpenInPlace's rule).
Status FileSink::RefuseRenamedIn(const struct stat& st) const {
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) return Status::Ok();
  const std::optional<RenamableDir> dir = PathOthersRenameIn(name_, dir_path_);
  if (!dir) return Status::Ok();
  return Status::InvalidArgument(
      name_ + " is a file of uid " + std::to_string(st.st_uid) + " in " + dir->path +
      ", which another user can change (owned by uid " + std::to_string(dir->owner) +
      "): they could have renamed a file only root may write into its place. Nothing was "
      "written; give a path through directories only root or you control, or make the file "
      "that user's");
}

// A character device (/dev/null) or a FIFO, opened without waiting for a reader (a FIFO nobody
// reads is refused, not waited on), then written blocking. A FIFO by name (not standard output's
// pipe) that another user could have planted is refused as a planted symlink is (safe_path.h).
Status FileSink::OpenStream() {
  const int nofollow = proc_link_ ? 0 : O_NOFOLLOW;
  fd_ = ::openat(dir_.get(), file_name_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | nofollow);
  if (fd_ < 0 && errno == ENXIO) {
    return Status::InvalidArgument(name_ + " is a FIFO that nobody reads; nothing was written");
  }
  if (fd_ < 0) return Status::FromErrno(errno, "cannot open " + name_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "cannot examine " + name_);
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    return Status::InvalidArgument(name_ +
                                   " changed while it was being opened; nothing was written");
  }
  if (S_ISFIFO(st.st_mode) && !proc_link_) {
    WB_RETURN_IF_ERROR(RefusePlanted(dir_.get(), dir_path_, file_name_, st, "not written to"));
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "cannot open " + name_);
  }
  sequential_ = S_ISFIFO(st.st_mode);
  return Status::Ok();
}

// Exclusively (a mounted or otherwise held device is refused), and only when it is large enough.
Status FileSink::OpenBlockDevice(uint64_t expected_size) {
  fd_ = ::openat(dir_.get(), file_name_.c_str(), O_WRONLY | O_EXCL | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == EBUSY) {
      return Status::Busy(name_ +
                          " is in use (mounted, or held by LVM/RAID/swap); refusing to "
                          "write to it");
    }
    return Status::FromErrno(errno, "cannot open " + name_);
  }
  uint64_t size = 0;
  if (::ioctl(fd_, BLKGETSIZE64, &size) != 0) {
    return Status::FromErrno(errno, "cannot read the size of " + name_);
  }
  if (size < expected_size) {
    return Status::InvalidArgument(name_ + " holds " + FormatBytes(size) + ", less than the " +
                                   FormatBytes(expected_size) + " to write");
  }
  block_device_ = true;
  return Status::Ok();
}

// Replacing a file: through a temporary file beside it (in the directory the walk reached: a
// symlink's target, not the link), renamed over it by Finish.
namespace {

constexpr char kTempPrefix[] = ".wanbackup-restore-";

// Removes the temporaries of replacements that were killed (SIGKILL, a power loss) in `dir`:
// ".wanbackup-restore-PID-…" files of ours whose process is gone. A directory we may search but
// not read is left as it is.
void RemoveStaleTemporaries(int dir) {
  const int listing_fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing_fd < 0) return;
  DIR* listing = ::fdopendir(listing_fd);
  if (listing == nullptr) {
    ::close(listing_fd);
    return;
  }
  while (const dirent* e = ::readdir(listing)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(kTempPrefix)) continue;
    const std::string rest(name.substr(sizeof kTempPrefix - 1));
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (pid <= 0 || end == rest.c_str() || *end != '-') continue;  // an older name: left alone
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    struct stat st {};
    if (::fstatat(::dirfd(listing), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    ::unlinkat(::dirfd(listing), e->d_name, 0);
  }
  ::closedir(listing);
}

}  // namespace

Status FileSink::OpenReplacement(const struct stat& replaced) {
  RemoveStaleTemporaries(dir_.get());
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_name_.clear();  // a name another file holds is never ours to remove
    WB_ASSIGN_OR_RETURN(std::string name,
                        RandomName(kTempPrefix + std::to_string(::getpid()) + "-"));
    temp_name_ = std::move(name);
    fd_ = ::openat(dir_.get(), temp_name_.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0 && (errno != EEXIST || attempt == 8)) {
      const int err = errno;
      temp_name_.clear();
      return Status::FromErrno(err, "cannot create a file beside " + name_);
    }
  }
  sync_dir_ = true;
  return KeepOwner(replaced);
}

// Another user's file replaced whole (a VM image its service user owns): the new file gets its
// owner, group and permissions, as a replica written in place keeps them, where only root or we
// can change the directory. Where its owner can, the file stays ours and 0600 (they could have
// put their file at a name root restores to, to be handed the disk), and the user hears so
// (round 6, W3).
Status FileSink::KeepOwner(const struct stat& replaced) {
  if (replaced.st_uid == ::geteuid()) return Status::Ok();
  struct stat dir {};
  const bool ours_to_change = ::fstat(dir_.get(), &dir) == 0 && !OthersCanWrite(dir) &&
                              !PathOthersRenameIn(name_, dir_path_);
  if (ours_to_change && ::geteuid() == 0) {
    if (::fchown(fd_, replaced.st_uid, replaced.st_gid) != 0 ||
        ::fchmod(fd_, replaced.st_mode & 0777) != 0) {
      return Status::FromErrno(errno, "giving the new " + name_ + " its owner's uid and mode");
    }
    return Status::Ok();
  }
  notice_ = name_ + " was a file of uid " + std::to_string(replaced.st_uid) +
            "; it is replaced by a file of uid " + std::to_string(::geteuid()) +
            ", mode 0600, since that user can change " + dir_path_ +
            " (chown the file if they should read the disk)";
  return Status::Ok();
}

FileSink::~FileSink() {
  if (remove_unfinished_ && fd_ >= 0) {
    // Only the file this sink made: the name must still lead to it.
    struct stat ours {};
    struct stat named {};
    if (::fstat(fd_, &ours) == 0 &&
        ::fstatat(dir_.get(), file_name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        ours.st_dev == named.st_dev && ours.st_ino == named.st_ino) {
      ::unlinkat(dir_.get(), file_name_.c_str(), 0);
    }
  }
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  if (!temp_name_.empty()) {  // not finished: the old file stays
    ::unlinkat(dir_.get(), temp_name_.c_str(), 0);
  }
}

Status FileSink::Write(uint64_t offset, const uint8_t* data, size_t length) {
  if (sequential_ && offset != position_) {
    return Status::Internal(name_ + ": out-of-order write at " + std::to_string(offset) +
                            ", expected " + std::to_string(position_));
  }
  size_t done = 0;
  while (done < length) {
    const ssize_t n =
        sequential_ ? ::write(fd_, data + done, length - done)
                    : ::pwrite(fd_, data + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno,
                               "writing " + name_ + " at offset " + std::to_string(offset + done));
    }
    if (n == 0) return Status::IoError("writing " + name_ + ": no progress (device full?)");
    done += static_cast<size_t>(n);
  }
  if (sequential_) position_ = offset + length;
  return Status::Ok();
}

Status FileSink::Finish(uint64_t total_size) {
  if (regular_ && ::ftruncate(fd_, static_cast<off_t>(total_size)) != 0) {
    return Status::FromErrno(errno, "setting the size of " + name_);
  }
  if ((regular_ || block_device_) && ::fsync(fd_) != 0) {
    return Status::FromErrno(errno, "flushing " + name_ + " to stable storage");
  }
  if (!temp_name_.empty()) {
    if (WB_INJECT_ERROR("restore.before-rename")) {
      return Status::FromErrno(EIO, "replacing " + name_);
    }
    if (::renameat(dir_.get(), temp_name_.c_str(), dir_.get(), file_name_.c_str()) != 0) {
      return Status::FromErrno(errno, "replacing " + name_);
    }
    temp_name_.clear();
  }
  // A new file's name is durable only once its directory is.
  if (sync_dir_) WB_RETURN_IF_ERROR(SyncDirectory(dir_.get(), dir_path_));
  remove_unfinished_ = false;
  if (owns_fd_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Status::FromErrno(errno, "closing " + name_);
  }
  return Status::Ok();
}

}  // namespace wanbackup::pipeline
