#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/read_file.h"
#include "common/safe_path.h"
#include "common/unique_fd.h"

namespace wanbackup {
namespace {

// Ends a failed write: the temporary goes, the error is the first one's.
Status Abandon(int fd, int dir, const std::string& tmp, const Status& why) {
  if (fd >= 0) ::close(fd);
  ::unlinkat(dir, tmp.c_str(), 0);
  return why;
}

std::string Joined(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

}  // namespace

Result<std::string> RandomName(const std::string& prefix) {
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  uint8_t random[12] = {};
  size_t got = 0;
  while (got < sizeof random) {
    const ssize_t n = ::getrandom(random + got, sizeof random - got, 0);
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "getrandom");
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string name = prefix;
  for (const uint8_t b : random)
    name += kLetters[b % (sizeof kLetters - 1)];
  return name;
}

Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return Status::InvalidArgument(path + ": names a directory, not a file");
  const UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid()) return Status::FromErrno(errno, "opening " + dir);
  return WriteFileAtomicallyAt(dfd.get(), dir, name, content, mode);
}

Status WriteFileAtomicallyAt(int dir, const std::string& dir_path, const std::string& name,
                             std::string_view content, mode_t mode) {
  const std::string path = Joined(dir_path, name);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    // ".<name>.tmp-<12 random letters>": hidden, and not ending as the target does (a
    // node_exporter reads *.prom only).
    WB_ASSIGN_OR_RETURN(tmp, RandomName("." + name + ".tmp-"));
    fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && (errno != EEXIST || attempt == 8)) {
      return Status::FromErrno(errno, "creating a temporary file in " + dir_path);
    }
  }
  if (::fchmod(fd, mode) != 0) {
    return Abandon(fd, dir, tmp, Status::FromErrno(errno, "chmod " + Joined(dir_path, tmp)));
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Abandon(fd, dir, tmp, Status::FromErrno(n < 0 ? errno : EIO, "writing " + path));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return Abandon(fd, dir, tmp, Status::FromErrno(errno, "writing " + path));
  if (::close(fd) != 0) return Abandon(-1, dir, tmp, Status::FromErrno(errno, "writing " + path));
  if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    return Abandon(-1, dir, tmp, Status::FromErrno(errno, "replacing " + path));
  }
  return SyncDirectory(dir, dir_path);
}

Status ReadRegularFileNoFollow(const std::string& path, std::string* content) {
  return ReadRegularFileNoFollowAt(AT_FDCWD, path, path, content);
}

Status ReadRegularFileNoFollowAt(int dir, const std::string& name, const std::string& path,
                                 std::string* content) {
  content->clear();
  const UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() && errno == ELOOP) {
    return Status::InvalidArgument(path +
                                   " is a symbolic link, where a regular file belongs; refused "
                                   "(not followed)");
  }
  if (!fd.valid()) return Status::FromErrno(errno, "opening " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + " is " + FileKind(st.st_mode) +
                                   ", where a regular file belongs; refused (not read)");
  }
  WB_ASSIGN_OR_RETURN(*content, ReadToEnd(fd.get(), path));
  return Status::Ok();
}

}  // namespace wanbackup
