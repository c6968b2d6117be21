#include "common/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace wanbackup {
namespace {

const char* Kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

Result<std::string> ReadToEnd(int fd, const std::string& what) {
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "reading " + what);
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> ReadRegularFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() && errno == ELOOP) {
    return Status::InvalidArgument(path +
                                   " is a symbolic link, where a regular file belongs; "
                                   "refused (not followed)");
  }
  if (!fd.valid()) return Status::FromErrno(errno, path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + " is " + Kind(st.st_mode) +
                                   ", where a regular file belongs; refused (not read)");
  }
  return ReadToEnd(fd.get(), path);
}

}  // namespace wanbackup
