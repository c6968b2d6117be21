#include "common/secret.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace wanbackup {

Secret::Secret(Secret&& other) noexcept : value_(std::move(other.value_)) {
  other.Wipe();
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    Wipe();
    value_ = std::move(other.value_);
    other.Wipe();
  }
  return *this;
}

Secret::~Secret() {
  Wipe();
}

void Secret::Wipe() {
  if (!value_.empty()) explicit_bzero(value_.data(), value_.size());
  value_.clear();
}

Result<Secret> ReadSecretFile(const std::string& path, std::string* warning) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "cannot open secret file " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "cannot stat secret file " + path);
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("secret file " + path + " is not a regular file");
  }
  if (S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0 && warning != nullptr) {
    *warning = "secret file " + path + " is readable by group or others; chmod 600 it";
  }
  std::string content;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      explicit_bzero(buf, sizeof buf);
      return Status::FromErrno(err, "cannot read secret file " + path);
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > 64 * 1024) break;
  }
  ::close(fd);
  explicit_bzero(buf, sizeof buf);
  Secret whole(std::move(content));
  const std::string& text = whole.reveal();
  size_t end = text.find('\n');
  if (end == std::string::npos) end = text.size();
  if (end > 0 && text[end - 1] == '\r') --end;
  if (end == 0) return Status::InvalidArgument("secret file " + path + " is empty");
  return Secret(text.substr(0, end));
}

Secret SecretFromEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return Secret();
  return Secret(std::string(value));
}

}  // namespace wanbackup
