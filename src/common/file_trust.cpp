#include "common/file_trust.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <climits>

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

// Every directory from `dir` (canonical) up to /.
Status CheckDirectories(std::string dir, const std::string& file) {
  for (;;) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, dir);
    if (!TrustedOwner(st.st_uid))
      return Owner(dir, st.st_uid).WithSuffix(" (it holds " + file + ")");
    // A sticky directory (/tmp, /dev/shm) lets others add entries but not rename or remove
    // another's: what sits below it on this path was checked above to be root's or ours, so
    // nobody else can swap it.
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      std::string why = dir;
      why += ": writable by group or others (mode ";
      why += Mode(st.st_mode);
      why += "), so ";
      why += file;
      why += " in it could be replaced; move the file or chmod go-w ";
      why += dir;
      return Status::PermissionDenied(why);
    }
    if (dir == "/") return Status::Ok();
    const size_t slash = dir.rfind('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
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
  const std::string given_dir = Resolved(Parent(path));
  const std::string resolved = Resolved(path);
  if (given_dir.empty() || resolved.empty()) return Status::FromErrno(errno, path);
  WB_RETURN_IF_ERROR(CheckDirectories(given_dir, path));
  const std::string resolved_dir = Parent(resolved);
  if (resolved_dir != given_dir) WB_RETURN_IF_ERROR(CheckDirectories(resolved_dir, path));
  return Status::Ok();
}

}  // namespace wanbackup
