#include "common/secret.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sodium.h>

#include "common/cancel.h"
#include "common/file_trust.h"
#include "common/read_file.h"

namespace wanbackup {
namespace {

// sodium_malloc needs sodium_init (it reads the page size there); idempotent and thread-safe.
void InitSodiumOnce() {
  static const bool ok = sodium_init() >= 0;
  if (!ok) {
    std::fputs("wanbackup: libsodium failed to initialize\n", stderr);
    std::abort();
  }
}

// A first line longer than this is not a passphrase; reading stops there.
constexpr size_t kMaxSecretFileBytes = size_t{64} * 1024;
constexpr size_t kReadStep = 512;
// How long a FIFO or device named as a secret file may stay silent (its writer is a person or
// a slow program, not a disk).
constexpr std::chrono::seconds kSecretStreamWait{60};
// sodium_malloc takes whole pages anyway; start with most of one.
constexpr size_t kMinCapacity = 255;

}  // namespace

Secret::Secret(std::string_view value) {
  Resize(value.size());
  if (!value.empty()) std::memcpy(data_, value.data(), value.size());
}

Secret::Secret(Secret&& other) noexcept
    : data_(other.data_), size_(other.size_), capacity_(other.capacity_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.capacity_ = 0;
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = other.data_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.capacity_ = 0;
  }
  return *this;
}

Secret::~Secret() {
  Free();
}

void Secret::Free() {
  // sodium_free zeroes the block (and unlocks it) before unmapping it.
  if (data_ != nullptr) sodium_free(data_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

void Secret::Reserve(size_t capacity) {
  if (data_ != nullptr && capacity <= capacity_) return;
  InitSodiumOnce();
  const size_t grown = std::max({capacity, 2 * capacity_, kMinCapacity});
  auto* fresh = static_cast<char*>(sodium_malloc(grown + 1));
  if (fresh == nullptr) throw std::bad_alloc();
  std::memset(fresh, 0, grown + 1);  // sodium_malloc fills with 0xdb
  if (size_ > 0) std::memcpy(fresh, data_, size_);
  const size_t size = size_;
  Free();
  data_ = fresh;
  size_ = size;
  capacity_ = grown;
}

void Secret::Resize(size_t size) {
  if (size == 0 && data_ == nullptr) return;  // an empty Secret owns no memory
  Reserve(size);
  if (size < size_) sodium_memzero(data_ + size, size_ - size);
  size_ = size;
  data_[size_] = '\0';
}

namespace {

// Waits a slice for `fd` (a FIFO or device of type `mode`) to have something to read: Cancelled
// at SIGINT/SIGTERM, Timeout past `deadline`.
Status WaitForStream(int fd, const std::string& path, mode_t mode,
                     std::chrono::steady_clock::time_point deadline) {
  if (CancellationRequested()) {
    return Status::Cancelled("interrupted while waiting for secret file " + path);
  }
  if (std::chrono::steady_clock::now() >= deadline) {
    return Status::Timeout("secret file " + path + " is " + FileKind(mode) +
                           " and nothing came from it in " +
                           std::to_string(kSecretStreamWait.count()) + " s");
  }
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, 200);  // EINTR (a signal) included: the caller's loop comes back here
  return Status::Ok();
}

}  // namespace

Result<Secret> ReadSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO nobody writes is not waited for at open (it reads as empty); cleared
  // below once the file is known to be trusted.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
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
  if (Status trusted = CheckTrustedFile(path, st, TrustedFile::kSecret); !trusted.ok()) {
    ::close(fd);
    return trusted;
  }
  // A regular file is read as it is; a FIFO or a device stays non-blocking and is waited on in
  // slices, so that a writer that never writes ends the wait (SIGINT, SIGTERM or the deadline)
  // instead of holding the command, and its repository lock, for ever.
  const bool stream = !S_ISREG(st.st_mode);
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0 && !stream) {
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  const auto deadline = std::chrono::steady_clock::now() + kSecretStreamWait;
  // Straight into locked memory, until the first line is complete.
  Secret text;
  while (text.size() < kMaxSecretFileBytes) {
    const size_t old = text.size();
    text.Resize(old + kReadStep);
    const ssize_t n = ::read(fd, text.data() + old, kReadStep);
    text.Resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && stream && errno == EAGAIN) {
      if (Status waited = WaitForStream(fd, path, st.st_mode, deadline); !waited.ok()) {
        ::close(fd);
        return waited;
      }
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::FromErrno(err, "cannot read secret file " + path);
    }
    if (n == 0 || std::memchr(text.data() + old, '\n', static_cast<size_t>(n)) != nullptr) break;
  }
  ::close(fd);
  size_t end = text.reveal().find('\n');
  if (end == std::string_view::npos) end = text.size();
  if (end > 0 && text.reveal()[end - 1] == '\r') --end;
  if (text.empty()) return Status::InvalidArgument("secret file " + path + " is empty");
  if (end == 0) {
    return Status::InvalidArgument("secret file " + path +
                                   ": its first line is empty; put the secret on the first line");
  }
  text.Resize(end);
  return text;
}

Result<Secret> ReadSecretLine(int fd) {
  Secret line;
  char c = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      sodium_memzero(&c, sizeof c);
      return Status::FromErrno(err, "reading from the terminal");
    }
    if (n == 0 || c == '\n') break;
    line.Resize(line.size() + 1);
    line.data()[line.size() - 1] = c;
  }
  sodium_memzero(&c, sizeof c);
  return line;
}

Secret SecretFromEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return Secret();
  return Secret(std::string_view(value));
}

}  // namespace wanbackup
