#include "pipeline/file_sink.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/failpoint.h"
#include "common/units.h"

namespace wanbackup::pipeline {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

Status SyncDirectory(const std::string& dir_path) {
  const int dir = ::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || ::fsync(dir) != 0) {
    const int err = errno;
    if (dir >= 0) ::close(dir);
    return Status::FromErrno(err, "flushing the directory " + dir_path);
  }
  ::close(dir);
  return Status::Ok();
}

}  // namespace

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
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + " is a directory; give a file or device path");
  }
  if (exists && S_ISBLK(st.st_mode)) {
    WB_RETURN_IF_ERROR(sink->OpenBlockDevice(path, options.expected_size));
    return sink;
  }
  if (exists && S_ISCHR(st.st_mode)) {
    sink->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (sink->fd_ < 0) return Status::FromErrno(errno, "cannot open " + path);
    return sink;
  }
  if (exists && S_ISFIFO(st.st_mode)) {
    sink->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (sink->fd_ < 0) return Status::FromErrno(errno, "cannot open " + path);
    sink->sequential_ = true;
    return sink;
  }
  if (exists && S_ISREG(st.st_mode) && options.in_place) {
    sink->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (sink->fd_ < 0) return Status::FromErrno(errno, "cannot open " + path);
    sink->regular_ = true;
    return sink;
  }
  if (exists && !options.overwrite && !options.in_place) {
    return Status::AlreadyExists(path + " exists; use --force to overwrite it");
  }
  sink->regular_ = true;
  sink->zeros_free_ = true;
  if (!exists) {
    sink->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (sink->fd_ < 0 && errno == EEXIST) {
      return options.in_place
                 ? Status::Busy(path + " appeared while it was being opened; try again")
                 : Status::AlreadyExists(path + " exists; use --force to overwrite it");
    }
    if (sink->fd_ < 0) return Status::FromErrno(errno, "cannot create " + path);
    sink->created_in_ = DirectoryOf(path);
    sink->created_ = true;
    return sink;
  }
  WB_RETURN_IF_ERROR(sink->OpenReplacement(path));
  return sink;
}

// Exclusively (a mounted or otherwise held device is refused), and only when it is large enough.
Status FileSink::OpenBlockDevice(const std::string& path, uint64_t expected_size) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_EXCL | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == EBUSY) {
      return Status::Busy(path +
                          " is in use (mounted, or held by LVM/RAID/swap); refusing to "
                          "write to it");
    }
    return Status::FromErrno(errno, "cannot open " + path);
  }
  uint64_t size = 0;
  if (::ioctl(fd_, BLKGETSIZE64, &size) != 0) {
    return Status::FromErrno(errno, "cannot read the size of " + path);
  }
  if (size < expected_size) {
    return Status::InvalidArgument(path + " holds " + FormatBytes(size) + ", less than the " +
                                   FormatBytes(expected_size) + " to write");
  }
  block_device_ = true;
  return Status::Ok();
}

// Replacing a file: through a temporary file beside the real one (a symlink's target, not the
// link), renamed over it by Finish.
Status FileSink::OpenReplacement(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return Status::FromErrno(errno, "cannot resolve " + path);
  replace_path_ = real;
  std::free(real);
  created_in_ = DirectoryOf(replace_path_);
  std::string temp = created_in_ + "/.wanbackup-restore-XXXXXX";
  fd_ = ::mkostemp(temp.data(), O_CLOEXEC);  // O_EXCL, mode 0600
  if (fd_ < 0) return Status::FromErrno(errno, "cannot create a file beside " + path);
  temp_path_ = temp;
  return Status::Ok();
}

FileSink::~FileSink() {
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());  // not finished: the old file stays
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
  if (!temp_path_.empty()) {
    if (WB_INJECT_ERROR("restore.before-rename")) {
      return Status::FromErrno(EIO, "replacing " + name_);
    }
    if (::rename(temp_path_.c_str(), replace_path_.c_str()) != 0) {
      return Status::FromErrno(errno, "replacing " + name_);
    }
    temp_path_.clear();
  }
  // A new file's name is durable only once its directory is.
  if (!created_in_.empty()) WB_RETURN_IF_ERROR(SyncDirectory(created_in_));
  if (owns_fd_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Status::FromErrno(errno, "closing " + name_);
  }
  return Status::Ok();
}

}  // namespace wanbackup::pipeline
