#include "common/read_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace wanbackup {

std::string FileKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

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

}  // namespace wanbackup
