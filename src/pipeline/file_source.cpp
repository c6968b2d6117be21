#include "pipeline/file_source.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/cancel.h"
#include "common/safe_path.h"

namespace wanbackup::pipeline {
namespace {

constexpr uint64_t kDirectAlign = 4096;  // covers every logical block size Linux supports

// Leaves direct I/O for cached reads of pages that are dropped first.
void DropDirect(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_DIRECT);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

class FileSourceImpl final : public FileSource {
 public:
  FileSourceImpl(int fd, SourceGeometry geometry, int threads, bool direct)
      : fd_(fd), geometry_(std::move(geometry)), direct_(direct) {
    for (int i = 0; i < threads; ++i)
      workers_.emplace_back([this] { Work(); });
  }
  ~FileSourceImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_)
      t.join();
    ::close(fd_);
  }

  const SourceGeometry& geometry() const override { return geometry_; }
  uint64_t preferred_request_size() const override { return 4 << 20; }
  size_t preferred_in_flight() const override { return workers_.size() * 2; }

  Status Submit(const ReadRequest& r) override {
    if (r.length == 0 || r.buffer == nullptr || r.offset > geometry_.size_bytes ||
        r.length > geometry_.size_bytes - r.offset) {
      return Status::InvalidArgument("read request outside " + geometry_.name);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(r);
      ++outstanding_;
    }
    work_cv_.notify_one();
    return Status::Ok();
  }

  Result<ReadCompletion> Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!done_.empty()) {
        ReadCompletion c = std::move(done_.front());
        done_.pop_front();
        --outstanding_;
        return c;
      }
      if (outstanding_ == 0) return Status::Internal("Wait() with nothing submitted");
      if (CancellationRequested()) {
        // Nothing may write into the caller's buffers once we return: drop what has not
        // started and wait for the reads in progress.
        outstanding_ -= queue_.size();
        queue_.clear();
        done_cv_.wait(lock, [this] { return done_.size() == outstanding_; });
        outstanding_ = 0;
        done_.clear();
        return Status::Cancelled("reading " + geometry_.name + ": interrupted");
      }
      done_cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
  }

  SourceStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    SourceStats s;
    s.bytes_read = bytes_read_;
    s.connections = 1;
    s.peak_connections = 1;
    s.commands_in_flight = static_cast<uint32_t>(outstanding_ - done_.size());
    s.io_size = 4 << 20;
    s.queue_depth = static_cast<uint32_t>(workers_.size());
    return s;
  }

 private:
  void Work() {
    MallocBuffer bounce;  // direct reads: aligned, this thread's
    size_t bounce_size = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      ReadRequest r = queue_.front();
      queue_.pop_front();
      lock.unlock();
      Status status = direct_.load() ? ReadDirect(r, bounce, bounce_size) : ReadFully(r);
      lock.lock();
      if (status.ok()) bytes_read_ += r.length;
      done_.push_back(ReadCompletion{r, std::move(status)});
      done_cv_.notify_one();
    }
  }

  // Reads the aligned span around `r` with O_DIRECT into `bounce` and copies `r`'s part out.
  Status ReadDirect(const ReadRequest& r, MallocBuffer& bounce, size_t& bounce_size) {
    const uint64_t start = r.offset / kDirectAlign * kDirectAlign;
    const uint64_t end = r.offset + r.length;
    const size_t span = static_cast<size_t>((end - start + kDirectAlign - 1) / kDirectAlign) *
                        static_cast<size_t>(kDirectAlign);
    if (bounce_size < span) {
      bounce.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, span)));
      bounce_size = bounce ? span : 0;
      if (!bounce) return Status::Internal("out of memory for a direct read");
    }
    uint64_t done = 0;
    while (start + done < end) {
      const ssize_t n =
          ::pread(fd_, bounce.get() + done, span - done, static_cast<off_t>(start + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL) {  // the file system refuses direct reads after all
          direct_ = false;
          DropDirect(fd_);
          return ReadFully(r);
        }
        if (errno == EIO) {
          return Status::MediumError("reading " + geometry_.name + " at offset " +
                                     std::to_string(start + done) + ": I/O error");
        }
        return Status::FromErrno(errno, "reading " + geometry_.name);
      }
      if (n == 0) {
        return Status::IoError(geometry_.name + " ended at " + std::to_string(start + done) +
                               " (it shrank while being read?)");
      }
      done += static_cast<uint64_t>(n);
    }
    std::memcpy(r.buffer, bounce.get() + (r.offset - start), r.length);
    return Status::Ok();
  }

  Status ReadFully(const ReadRequest& r) {
    uint64_t done = 0;
    while (done < r.length) {
      const ssize_t n =
          ::pread(fd_, r.buffer + done, r.length - done, static_cast<off_t>(r.offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EIO) {
          return Status::MediumError("reading " + geometry_.name + " at offset " +
                                     std::to_string(r.offset + done) + ": I/O error");
        }
        return Status::FromErrno(errno, "reading " + geometry_.name);
      }
      if (n == 0) {
        return Status::IoError(geometry_.name + " ended at " + std::to_string(r.offset + done) +
                               " (it shrank while being read?)");
      }
      done += static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  const int fd_;
  const SourceGeometry geometry_;
  std::atomic<bool> direct_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<ReadRequest> queue_;    // GUARDED_BY(mu_)
  std::deque<ReadCompletion> done_;  // GUARDED_BY(mu_)
  size_t outstanding_ = 0;           // GUARDED_BY(mu_)
  uint64_t bytes_read_ = 0;          // GUARDED_BY(mu_)
  bool stop_ = false;                // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;
};

}  // namespace

namespace {

// A second name of a file that only root may read, made in a directory others can write (a hard
// link, where fs.protected_hardlinks is off): refused; the file `st` is read only by a name its
// owner chose.
Status RefuseSecondName(const std::string& path, const ResolvedPath& where, const struct stat& st) {
  struct stat dir {};
  if (!S_ISREG(st.st_mode) || st.st_nlink < 2 || (st.st_uid != 0 && st.st_uid != ::geteuid()) ||
      ::fstat(where.dir.get(), &dir) != 0 || !OthersCanWrite(dir)) {
    return Status::Ok();
  }
  return Status::InvalidArgument(
      path + " is a file of uid " + std::to_string(st.st_uid) + " with " +
      std::to_string(st.st_nlink) + " names in " + where.dir_path +
      ", a directory others can write: it may be a hard link another user made to a file they "
      "cannot read. Copy the disk image elsewhere, or back up the file by its other name");
}

// A file of root's (or ours) read through a directory another user controls: that user can
// rename any file or directory there, so the name may now lead to a file of root's that was
// never this source (a root-only disk renamed into the VM image's place, or two root-owned
// directories swapped). Such a file is read only when every directory on the way is one only
// root or we can change; a file of the user who controls the directory is theirs to give.
Status RefuseRenamedIn(const std::string& path, const std::string& dir_path,
                       const struct stat& st) {
  if ((!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) ||
      (st.st_uid != 0 && st.st_uid != ::geteuid())) {
    return Status::Ok();
  }
  // The path as given too: a link of root's renamed into place leads anywhere (round 6, W5).
  const std::optional<RenamableDir> dir = PathOthersRenameIn(path, dir_path);
  if (!dir) return Status::Ok();
  return Status::InvalidArgument(
      path + " is a file of uid " + std::to_string(st.st_uid) + " in " + dir->path +
      ", which another user can change (owned by uid " + std::to_string(dir->owner) +
      "): they could have renamed a file only root may read into its place. Back it up from a "
      "directory only root or you control, or make it that user's file");
}

// A file that may not be the one the user named: a second name, or a rename, that another user
// could have made (the two above).
Status RefuseUntrustedName(const std::string& path, const ResolvedPath& where,
                           const struct stat& st) {
  WB_RETURN_IF_ERROR(RefuseSecondName(path, where, st));
  return RefuseRenamedIn(path, where.dir_path, st);
}

}  // namespace

Result<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path, int threads,
                                                     bool direct) {
  // O_NONBLOCK: a FIFO swapped in after the caller looked at the path (by whoever can write its
  // directory) is refused below, not waited on while the repository's lock is held.
  // Reached as a destination is (common/safe_path.h): a symlink another user planted on the way
  // (the VM image's owner replacing it by a link to /etc/shadow) is not followed, since what is
  // read here is written on to replicas that user may own.
  WB_ASSIGN_OR_RETURN(const ResolvedPath where,
                      ResolveForWriting(path, PathPolicy::kNoPlantedLinks, LastLink::kFollow));
  const int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (where.proc_link ? 0 : O_NOFOLLOW);
  const auto open_it = [&where](int flags) {
    return ::openat(where.dir.get(), where.name.c_str(), flags);
  };
  int fd = direct ? open_it(kFlags | O_DIRECT) : -1;
  if (direct && fd < 0 && errno == EINVAL) {  // O_DIRECT refused (tmpfs): drop the cache instead
    direct = false;
    fd = open_it(kFlags);
    if (fd >= 0) DropDirect(fd);
  } else if (!direct) {
    fd = open_it(kFlags);
  }
  if (fd < 0 && errno == ELOOP) {
    return Status::InvalidArgument(path + " changed into a symlink while it was being opened");
  }
  if (fd < 0) return Status::FromErrno(errno, "cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "cannot stat " + path);
  }
  if (Status named = RefuseUntrustedName(path, where, st); !named.ok()) {
    ::close(fd);
    return named;
  }
  SourceGeometry geometry;
  geometry.name = path;
  if (S_ISREG(st.st_mode)) {
    geometry.size_bytes = static_cast<uint64_t>(st.st_size);
    geometry.block_size = 1;
  } else if (S_ISBLK(st.st_mode)) {
    int logical = 512;
    if (::ioctl(fd, BLKGETSIZE64, &geometry.size_bytes) != 0 ||
        ::ioctl(fd, BLKSSZGET, &logical) != 0) {
      const int err = errno;
      ::close(fd);
      return Status::FromErrno(err, "cannot read the geometry of " + path);
    }
    geometry.block_size = static_cast<uint32_t>(logical);
  } else {
    ::close(fd);
    return Status::InvalidArgument(path + " is neither a regular file nor a block device");
  }
  if (geometry.size_bytes == 0) {
    ::close(fd);
    return Status::InvalidArgument(path + " is empty");
  }
  return std::unique_ptr<FileSource>(
      new FileSourceImpl(fd, std::move(geometry), std::max(1, threads), direct));
}

}  // namespace wanbackup::pipeline
