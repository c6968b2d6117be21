#include "common/file_trust.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <climits>

#include "common/read_file.h"
#include "common/unique_fd.h"

namespace wanbackup {
namespace {

std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool TrustedOwner(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

Status Owner(const std::string& path, uid_t uid) {
  return Status::PermissionDenied(path + ": owned by uid " + std::to_string(uid) +
                                  ", not root or you");
}

// The canonical path, or "" when it cannot be resolved (the caller's open says why).
std::string Resolved(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// Whether the directory `dir` (stat `st`) may hold `file`: root's or ours, and writable by
// nobody else unless sticky.
Status CheckDirectory(const std::string& dir, const struct stat& st, const std::string& file) {
  if (!TrustedOwner(st.st_uid)) return Owner(dir, st.st_uid).WithSuffix(" (it holds " + file + ")");
  // A sticky directory (/tmp, /dev/shm) lets others add entries but not rename or remove
  // another's: what sits below it on this path is checked to be root's or ours, so nobody
  // else can swap it.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    std::string why = dir;
    why += ": writable by group or others (mode ";
    why += Mode(st.st_mode);
    why += "), so ";
    why += file;
    why += " in it could be replaced; move it or chmod go-w ";
    why += dir;
    return Status::PermissionDenied(why);
  }
  return Status::Ok();
}

// Every directory from `dir` (canonical) up to /.
Status CheckDirectories(std::string dir, const std::string& file) {
  for (;;) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, dir);
    WB_RETURN_IF_ERROR(CheckDirectory(dir, st, file));
    if (dir == "/") return Status::Ok();
    const size_t slash = dir.rfind('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
}

// The path as named, before any symlink is resolved: each directory on it passes
// CheckDirectory, and each symlink on it is root's or ours (another user's link, in their own
// directory, could be pointed elsewhere between the check and the open). `what` is what the
// path holds, for messages.
Status CheckNamedPath(const std::string& path, const std::string& what) {
  std::string absolute = path;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr)
      return Status::FromErrno(errno, "the working directory");
    absolute = std::string(cwd) + "/" + path;
  }
  std::string prefix;
  for (size_t start = 1; start < absolute.size();) {
    size_t slash = absolute.find('/', start);
    if (slash == std::string::npos) break;  // the file itself: checked by the caller
    prefix = absolute.substr(0, slash);
    start = slash + 1;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) return Status::FromErrno(errno, prefix);
    if (S_ISLNK(st.st_mode)) {
      if (!TrustedOwner(st.st_uid)) {
        std::string why = prefix;
        why += ": a symlink owned by uid ";
        why += std::to_string(st.st_uid);
        why += ", not root or you (it leads to ";
        why += what;
        why += ")";
        return Status::PermissionDenied(why);
      }
    } else if (S_ISDIR(st.st_mode)) {
      WB_RETURN_IF_ERROR(CheckDirectory(prefix, st, what));
    }
  }
  return Status::Ok();
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status CheckTrustedFile(const std::string& path, TrustedFile kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, path);
  return CheckTrustedFile(path, st, kind);
}

Status CheckTrustedFile(const std::string& path, const struct stat& st, TrustedFile kind) {
  // A pipe (a shell's <(...)) is the invoker's own data, and so is a terminal or /dev/stdin;
  // a named FIFO another user made is not: it could feed a key root then locks a repository
  // with.
  if (S_ISFIFO(st.st_mode) && !TrustedOwner(st.st_uid)) return Owner(path, st.st_uid);
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return Status::Ok();
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if (!TrustedOwner(st.st_uid)) return Owner(path, st.st_uid);
  const mode_t refused =
      kind == TrustedFile::kSecret ? mode_t{S_IRWXG | S_IRWXO} : mode_t{S_IWGRP | S_IRWXO};
  if ((st.st_mode & refused) != 0) {
    const bool read = (st.st_mode & refused & (S_IRGRP | S_IROTH)) != 0;
    return Status::PermissionDenied(
        path + ": " + (read ? "readable" : "writable") + " by " +
        ((st.st_mode & refused & S_IRWXO) != 0 ? "others" : "group") + " (mode " +
        Mode(st.st_mode) + "); " +
        (kind == TrustedFile::kSecret
             ? "it holds a secret: chmod 600 "
             : "it says what runs as whom with which secrets: chmod 600 ") +
        path);
  }
  // The directories the path names, and those its symlinks lead to.
  WB_RETURN_IF_ERROR(CheckNamedPath(path, path));
  const std::string given_dir = Resolved(Parent(path));
  const std::string resolved = Resolved(path);
  if (given_dir.empty() || resolved.empty()) return Status::FromErrno(errno, path);
  WB_RETURN_IF_ERROR(CheckDirectories(given_dir, path));
  const std::string resolved_dir = Parent(resolved);
  if (resolved_dir != given_dir) WB_RETURN_IF_ERROR(CheckDirectories(resolved_dir, path));
  return Status::Ok();
}

Status CheckTrustedDirectory(const std::string& dir, const std::string& what) {
  // "DIR/." walks every component of DIR as named (the last one, ".", is not looked at).
  WB_RETURN_IF_ERROR(CheckNamedPath(dir + "/.", what));
  const std::string resolved = Resolved(dir);
  if (resolved.empty()) return Status::FromErrno(errno, dir);
  return CheckDirectories(resolved, what);
}

Result<std::string> ReadTrustedFile(const std::string& path, TrustedFile kind) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
  WB_RETURN_IF_ERROR(CheckTrustedFile(path, st, kind));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  return ReadToEnd(fd.get(), path);
}

}  // namespace wanbackup
