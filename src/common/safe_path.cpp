#include "common/safe_path.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <vector>

#include <climits>

namespace wanbackup {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's MAXSYMLINKS
// Directories on the way are only searched, never read: O_PATH needs no read permission.
constexpr int kWalkFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;

bool Ours(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::deque<std::string> Split(const std::string& path) {
  std::deque<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    if (end > start) parts.emplace_back(path.substr(start, end - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

// The directories walked so far, each open, from / to the current one.
class Walk {
 public:
  Walk(const std::string& given, PathPolicy policy) : given_(given), policy_(policy) {}

  int fd() const { return fds_.back().get(); }
  std::string Path() const {
    std::string out;
    for (const std::string& n : names_)
      out += "/" + n;
    return out.empty() ? "/" : out;
  }
  std::string Join(const std::string& name) const {
    return names_.empty() ? "/" + name : Path() + "/" + name;
  }

  Status Start() {
    fds_.clear();
    names_.clear();
    UniqueFd root(::open("/", kWalkFlags));
    if (!root.valid()) return Status::FromErrno(errno, "/");
    return Push(std::move(root), "");
  }
  Status Enter(const std::string& name) {
    UniqueFd dir(::openat(fd(), name.c_str(), kWalkFlags | O_NOFOLLOW));
    if (!dir.valid()) return Status::FromErrno(errno, Join(name));
    return Push(std::move(dir), name);
  }
  void Up() {
    if (fds_.size() <= 1) return;  // /.. is /
    fds_.pop_back();
    names_.pop_back();
  }

  // InvalidArgument when the link `name` (lstat `link`) may have been planted by another user.
  Status MayFollow(const std::string& name, const struct stat& link) const {
    return RefusePlanted(fd(), Path(), name, link, "not followed");
  }

  // Whether the current directory is in /proc (where links name pipes and sockets too).
  bool InProc() const {
    struct statfs fs {};
    return ::fstatfs(fd(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
  }

  // The directory reached is reopened for reading, so that it can be fsynced; one the user may
  // search but not read (0711, 0733, root on NFS with root_squash) stays an O_PATH descriptor,
  // which SyncDirectory skips.
  ResolvedPath Finish(const std::string& name, bool proc_link) {
    ResolvedPath out;
    out.dir_path = Path();
    UniqueFd readable(::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    out.dir = readable.valid() ? std::move(readable) : std::move(fds_.back());
    out.name = name;
    out.proc_link = proc_link;
    return out;
  }

 private:
  Status Push(UniqueFd dir, const std::string& name) {
    fds_.push_back(std::move(dir));
    if (!name.empty()) names_.push_back(name);
    if (policy_ == PathPolicy::kTrusted) return CheckTrusted();
    return Status::Ok();
  }
  // file_trust.h's rule for a directory that holds a file root writes whole.
  Status CheckTrusted() const {
    struct stat st {};
    if (::fstat(fd(), &st) != 0) return Status::FromErrno(errno, Path());
    if (!Ours(st.st_uid)) {
      return Status::InvalidArgument(Path() + ": owned by uid " + std::to_string(st.st_uid) +
                                     ", not root or you, so " + given_ +
                                     " in it could be replaced. Nothing was written");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return Status::InvalidArgument(
          Path() + ": writable by group or others (mode " + Mode(st.st_mode) + "), so " + given_ +
          " in it could be replaced; chmod go-w " + Path() + ". Nothing was written");
    }
    return Status::Ok();
  }

  std::string given_;
  PathPolicy policy_;
  std::vector<UniqueFd> fds_;
  std::vector<std::string> names_;
};

// The target of the link `name` in `dir` into `target` (never empty).
Status ReadLink(int dir, const std::string& name, const std::string& shown, std::string* target) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
  if (n < 0) return Status::FromErrno(errno, shown);
  if (n == 0) return Status::FromErrno(ENOENT, shown);
  if (static_cast<size_t>(n) >= sizeof buf) return Status::FromErrno(ENAMETOOLONG, shown);
  target->assign(buf, static_cast<size_t>(n));
  return Status::Ok();
}

// InvalidArgument when the /proc link `name` (/proc/self/fd/N, /dev/stdout's) names a file that
// was deleted: its text ("/x (deleted)") is no path to write, and a new file there is not
// what was meant.
Status RefuseDeleted(const Walk& walk, const std::string& name, const std::string& target) {
  if (!walk.InProc()) return Status::Ok();
  struct stat followed {};
  if (::fstatat(walk.fd(), name.c_str(), &followed, 0) != 0 || !S_ISREG(followed.st_mode) ||
      followed.st_nlink != 0) {
    return Status::Ok();
  }
  return Status::InvalidArgument(walk.Join(name) + " is a file that was deleted (" + target +
                                 "): nothing to write to. Nothing was written");
}

Status NamesDirectory(const std::string& path) {
  return Status::InvalidArgument(path + " is a directory; give a file or device path");
}

}  // namespace

Status RefusePlanted(int dir, const std::string& dir_path, const std::string& name,
                     const struct stat& st, const std::string& outcome) {
  struct stat holder {};
  if (::fstat(dir, &holder) != 0) return Status::FromErrno(errno, dir_path);
  if (Ours(st.st_uid) || !OthersCanWrite(holder)) return Status::Ok();
  const char* kind = S_ISLNK(st.st_mode) ? "symlink" : S_ISFIFO(st.st_mode) ? "FIFO" : "file";
  return Status::InvalidArgument(
      (dir_path == "/" ? "/" + name : dir_path + "/" + name) + " is a " + kind + " owned by uid " +
      std::to_string(st.st_uid) + " in a directory others can write (" + dir_path +
      ", owned by uid " + std::to_string(holder.st_uid) + ", mode " + Mode(holder.st_mode) +
      "): " + outcome + ", another user may have planted it. Nothing was written");
}

bool OthersCanWrite(const struct stat& dir) {
  return !Ours(dir.st_uid) || (dir.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

std::optional<RenamableDir> DirectoryOthersRenameIn(const std::string& dir_path) {
  std::string dir = dir_path;
  for (;;) {
    struct stat d {};
    if (::lstat(dir.c_str(), &d) == 0 && S_ISDIR(d.st_mode)) {
      const bool sticky_ours = (d.st_mode & S_ISVTX) != 0 && Ours(d.st_uid);
      if (OthersCanWrite(d) && !sticky_ours) return RenamableDir{dir, d.st_uid};
    }
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || dir == "/") return std::nullopt;
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
}

std::optional<RenamableDir> PathOthersRenameIn(const std::string& given,
                                               const std::string& resolved_dir) {
  std::string absolute = given;
  if (absolute.empty() || absolute[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr) absolute = std::string(cwd) + "/" + given;
  }
  const size_t slash = absolute.rfind('/');
  if (slash != std::string::npos && absolute[0] == '/') {
    const std::string parent = slash == 0 ? "/" : absolute.substr(0, slash);
    if (std::optional<RenamableDir> dir = DirectoryOthersRenameIn(parent)) return dir;
  }
  return DirectoryOthersRenameIn(resolved_dir);
}

Result<ResolvedPath> ResolveForWriting(const std::string& path, PathPolicy policy,
                                       LastLink last_link) {
  if (path.empty()) return Status::InvalidArgument("an empty path");
  if (path.back() == '/') return NamesDirectory(path);
  std::string absolute = path;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr)
      return Status::FromErrno(errno, "the working directory");
    absolute = std::string(cwd) + "/" + path;
  }
  Walk walk(path, policy);
  WB_RETURN_IF_ERROR(walk.Start());
  std::deque<std::string> todo = Split(absolute);
  int links = 0;
  while (!todo.empty()) {
    const std::string name = todo.front();
    todo.pop_front();
    const bool last = todo.empty();
    if (name == "." || name == "..") {
      if (last) return NamesDirectory(path);
      if (name == "..") walk.Up();
      continue;
    }
    struct stat st {};
    if (::fstatat(walk.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT && last) return walk.Finish(name, false);
      return Status::FromErrno(errno, walk.Join(name));
    }
    if (S_ISLNK(st.st_mode) && !(last && last_link == LastLink::kKeep)) {
      if (++links > kMaxLinks) return Status::FromErrno(ELOOP, path);
      WB_RETURN_IF_ERROR(walk.MayFollow(name, st));
      std::string target;
      WB_RETURN_IF_ERROR(ReadLink(walk.fd(), name, walk.Join(name), &target));
      WB_RETURN_IF_ERROR(RefuseDeleted(walk, name, target));
      const bool absolute_link = target.starts_with('/');
      if (!absolute_link && target.find(":[") != std::string::npos && walk.InProc()) {
        if (last) return walk.Finish(name, true);  // a pipe, a socket: no path to walk
        return Status::FromErrno(ENOTDIR, walk.Join(name));
      }
      if (absolute_link) WB_RETURN_IF_ERROR(walk.Start());
      std::deque<std::string> parts = Split(target);
      todo.insert(todo.begin(), parts.begin(), parts.end());
      continue;
    }
    if (last) return walk.Finish(name, false);
    if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, walk.Join(name));
    WB_RETURN_IF_ERROR(walk.Enter(name));
  }
  return NamesDirectory(path);
}

Status SyncDirectory(int dir, const std::string& dir_path) {
  const int flags = ::fcntl(dir, F_GETFL);
  if (flags >= 0 && (flags & O_PATH) != 0) return Status::Ok();  // not readable: see the header
  if (::fsync(dir) != 0) return Status::FromErrno(errno, "flushing the directory " + dir_path);
  return Status::Ok();
}

}  // namespace wanbackup
