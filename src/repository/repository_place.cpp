#include "repository/repository_place.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/file_trust.h"
#include "common/unique_fd.h"

namespace wanbackup::pipeline {
namespace {

constexpr const char* kKept[] = {"packs",          "readers",     "catalog.db", "catalog.db-wal",
                                 "catalog.db-shm", "config.json", "lock",       "lock.shared"};

constexpr const char kWhy[] =
    ": a command that writes a repository refuses one another user can change (links planted "
    "there would make it write or delete outside the repository); nothing was changed";

bool TrustedOwner(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

// What is wrong with the entry `path` (lstat `st`) of a repository, or "" when nothing is.
std::string Problem(const std::string& path, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link (wanbackup never makes one)";
  if (!TrustedOwner(st.st_uid)) {
    return path + " is owned by uid " + std::to_string(st.st_uid) + ", not root or you";
  }
  if (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
      (st.st_mode & S_ISVTX) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return path + " is writable by group or others (mode " + mode + "; chmod go-w " + path + ")";
  }
  return "";
}

// packs/ab: new packs are made there and prune removes them there, so each is held to the
// same rule as packs/ itself (at most 256 of them).
Status CheckPackDirectories(const std::string& packs) {
  const UniqueFd dir(::open(packs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return errno == ENOENT ? Status::Ok() : Status::FromErrno(errno, packs);
  DIR* listing = ::fdopendir(::dup(dir.get()));
  if (listing == nullptr) return Status::FromErrno(errno, packs);
  Status result = Status::Ok();
  while (const dirent* e = ::readdir(listing)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;  // the pack listing judges files
    std::string entry = packs;
    entry += "/" + name;
    if (std::string problem = Problem(entry, st); !problem.empty()) {
      result = Status::PermissionDenied(problem + kWhy);
      break;
    }
  }
  ::closedir(listing);
  return result;
}

}  // namespace

Status CheckPlaceForWriting(const std::string& path) {
  Status place = CheckTrustedDirectory(path, "repository " + path);
  if (place.code() == StatusCode::kPermissionDenied) return place.WithSuffix(kWhy);
  WB_RETURN_IF_ERROR(place);
  for (const char* name : kKept) {
    const std::string entry = path + "/" + name;
    struct stat st {};
    if (::lstat(entry.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return Status::FromErrno(errno, entry);
    }
    const std::string problem = Problem(entry, st);
    if (!problem.empty()) return Status::PermissionDenied(problem + kWhy);
  }
  return CheckPackDirectories(path + "/packs");
}

}  // namespace wanbackup::pipeline
