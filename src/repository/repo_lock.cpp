#include "repository/repo_lock.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "store/fs_util.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char kWriterLock[] = "lock";
constexpr const char kSharedLock[] = "lock.shared";
constexpr const char kReadersDir[] = "readers";
constexpr auto kRetry = std::chrono::milliseconds(100);

// The first line of a holder file, with control characters shown as \xNN: whoever can write
// the repository writes these lines, and they end up in messages on a terminal or in a log.
std::string ReadLine(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  s = s.substr(0, s.find_first_of(std::string("\n\0", 2)));
  return EscapeControl(s);
}

void WriteLine(int fd, const std::string& line) {
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, line.data(), line.size(), 0);
}

// Opens (creating, 0600) a lock file, never through a symlink (root must not write where a link
// planted in a shared repository points) nor from a FIFO (a planted one would block); read-only
// where it cannot be created or written.
int OpenLockFile(const std::string& path, bool* read_only) {
  *read_only = false;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    const int err = errno;
    fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) {
      errno = err;
      return -1;
    }
    *read_only = true;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    errno = EINVAL;  // "Invalid argument": not a lock file wanbackup made
    return -1;
  }
  return fd.Release();
}

// REPO/readers, made if missing, opened without following a link planted in its place: reader
// lines are made and stale ones removed only in the directory itself. -1 when it cannot be had.
int OpenReadersDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return -1;
  return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// A regular file `name` in the directory `dir_fd`, opened read-write without following a link
// or blocking on a FIFO; -1 otherwise.
int OpenReaderLine(int dir_fd, const std::string& name, int create_flags) {
  UniqueFd fd(::openat(dir_fd, name.c_str(),
                       O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | create_flags, 0600));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return fd.Release();
}

// The readers still holding their line in REPO/readers/; stale lines are removed.
std::string LiveReaders(const std::string& dir) {
  std::string who;
  int count = 0;
  const UniqueFd dir_fd(OpenReadersDir(dir));
  if (!dir_fd.valid()) return who;
  DIR* d = ::fdopendir(::dup(dir_fd.get()));
  if (d == nullptr) return who;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const UniqueFd fd(OpenReaderLine(dir_fd.get(), name, 0));
    if (!fd.valid()) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      ::unlinkat(dir_fd.get(), name.c_str(), 0);  // its reader is gone
    } else if (++count <= 3) {
      who += (who.empty() ? "" : "; ") + ReadLine(fd.get());
    }
  }
  if (count > 3) who += "; and " + std::to_string(count - 3) + " more";
  return who;
}

}  // namespace

std::string ReadersHolding(const std::string& repo_path) {
  return LiveReaders(repo_path + "/" + kReadersDir);
}

bool WriterRunning(const std::string& repo_path) {
  const std::string path = repo_path + "/lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  // Shared: it conflicts with a writer's exclusive lock, works on a read-only descriptor (also
  // where flock is emulated with byte-range locks, NFS), and two probes do not block each other.
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases it if we took it
  return held;
}

namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// Takes flock()s on the lock files of one repository, each tried every kRetry until the same
// deadline: options.wait from when the acquisition started.
class LockWaiter {
 public:
  LockWaiter(const std::string& repo, const LockOptions& options)
      : repo_(repo),
        wait_(options.wait),
        wait_setting_(options.wait_setting),
        deadline_(Clock::now() + options.wait) {}

  // flock(fd, op); when it cannot be had in time, Busy naming `holder()` (who is in the way).
  Status Take(int fd, int op, const std::function<std::string()>& holder) const {
    for (;;) {
      if (::flock(fd, op | LOCK_NB) == 0) return Status::Ok();
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return Status::FromErrno(errno, "locking repository " + repo_);
      }
      WB_RETURN_IF_ERROR(Pause(holder));
    }
  }

  // One retry interval; Cancelled on request, Busy naming `holder()` once the time is up.
  Status Pause(const std::function<std::string()>& holder) const {
    if (CancellationRequested()) return Status::Cancelled("interrupted waiting for the lock");
    if (Clock::now() >= deadline_) return GaveUp(holder());
    std::this_thread::sleep_for(kRetry);
    return Status::Ok();
  }

 private:
  Status GaveUp(std::string who) const {
    if (who.empty()) who = "another wanbackup process";
    std::string msg = "repository " + repo_;
    msg += " is in use by ";
    msg += who;
    msg += "; gave up after ";
    msg += Seconds(wait_);
    msg += " (" + wait_setting_ + ")";
    return Status::Busy(msg);
  }

  std::string repo_;
  std::chrono::milliseconds wait_;
  std::string wait_setting_;
  Clock::time_point deadline_;
};

// The holder line the last writer left in REPO/lock ("" when there is none to read).
std::string WriterHolder(const std::string& writer_path) {
  const int fd = ::open(writer_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string();
  std::string s = ReadLine(fd);
  ::close(fd);
  return s;
}

// This reader's line in REPO/readers/ (created, flocked, holding the holder line), so that a
// writer kept waiting can name it. Returns its descriptor, or -1 where it cannot be kept.
int AddReaderLine(int dir_fd, const std::string& command, std::string* name) {
  static int serial = 0;
  *name = std::to_string(::getpid()) + "-" + std::to_string(++serial) + ".reader";
  UniqueFd fd(OpenReaderLine(dir_fd, *name, O_CREAT | O_EXCL));
  // A line a killed reader with this pid left: ours once nobody holds it.
  if (!fd.valid() && errno == EEXIST) fd = UniqueFd(OpenReaderLine(dir_fd, *name, 0));
  if (!fd.valid() || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return -1;
  WriteLine(fd.get(), HolderLine(command));
  return fd.Release();
}

}  // namespace

std::string HolderLine(const std::string& command) {
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  return "wanbackup pid " + std::to_string(::getpid()) + " on " + host + " running '" + command +
         "' since " + NowIso8601() + "\n";
}

Result<std::unique_ptr<RepoLock>> RepoLock::Acquire(const std::string& repo_path, LockKind kind,
                                                    const LockOptions& options) {
  std::unique_ptr<RepoLock> lock(new RepoLock());
  lock->kind_ = kind;
  const LockWaiter waiter(repo_path, options);
  const std::string writer_path = repo_path + "/" + kWriterLock;
  const std::string shared_path = repo_path + "/" + kSharedLock;
  const std::string readers = repo_path + "/" + kReadersDir;
  auto writer_holder = [&writer_path] { return WriterHolder(writer_path); };
  bool read_only = false;
  if (kind == LockKind::kShared) {
    lock->shared_fd_ = OpenLockFile(shared_path, &read_only);
    if (lock->shared_fd_ < 0) {
      if (errno == EROFS || errno == EACCES || errno == ENOENT) return lock;  // nobody writes
      return Status::FromErrno(errno, "opening " + shared_path);
    }
    // Only an exclusive writer holds it exclusively, and it holds REPO/lock too.
    WB_RETURN_IF_ERROR(waiter.Take(lock->shared_fd_, LOCK_SH, writer_holder));
    if (!read_only) {
      lock->readers_dir_fd_ = OpenReadersDir(readers);
      if (lock->readers_dir_fd_ >= 0) {
        lock->reader_fd_ =
            AddReaderLine(lock->readers_dir_fd_, options.command, &lock->reader_name_);
      }
    }
    return lock;
  }
  lock->writer_fd_ = OpenLockFile(writer_path, &read_only);
  if (lock->writer_fd_ < 0) return Status::FromErrno(errno, "opening " + writer_path);
  if (kind == LockKind::kExclusive) {
    lock->shared_fd_ = OpenLockFile(shared_path, &read_only);
    if (lock->shared_fd_ < 0) return Status::FromErrno(errno, "opening " + shared_path);
  }
  // An exclusive writer kept waiting by readers (a mount open for days, a long restore) does
  // not wait holding the writer lock: it lets it go between tries, so that appending writers
  // (the nightly snapshots) run meanwhile instead of being refused (round 5, V6).
  for (;;) {
    WB_RETURN_IF_ERROR(waiter.Take(lock->writer_fd_, LOCK_EX, writer_holder));
    if (!read_only) WriteLine(lock->writer_fd_, HolderLine(options.command));
    if (kind != LockKind::kExclusive || ::flock(lock->shared_fd_, LOCK_EX | LOCK_NB) == 0) {
      return lock;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Status::FromErrno(errno, "locking repository " + repo_path);
    }
    ::flock(lock->writer_fd_, LOCK_UN);
    WB_RETURN_IF_ERROR(waiter.Pause([&readers] {
      const std::string who = LiveReaders(readers);
      return who.empty() ? std::string("a reader") : who;
    }));
  }
}

RepoLock::~RepoLock() {
  if (reader_fd_ >= 0) {
    // Before the lock goes, so nobody takes a live line as stale.
    ::unlinkat(readers_dir_fd_, reader_name_.c_str(), 0);
    ::close(reader_fd_);
  }
  if (readers_dir_fd_ >= 0) ::close(readers_dir_fd_);
  if (shared_fd_ >= 0) ::close(shared_fd_);
  if (writer_fd_ >= 0) ::close(writer_fd_);
}

}  // namespace wanbackup::pipeline
