#include "common/safe_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "common/atomic_file.h"
#include "pipeline/file_sink.h"
#include "support/other_user.h"
#include "support/skip.h"
#include "support/temp_dir.h"

using wanbackup::LastLink;
using wanbackup::PathPolicy;
using wanbackup::ResolvedPath;
using wanbackup::ResolveForWriting;
using wanbackup::Result;
using wanbackup::StatusCode;
using wanbackup::testing::TempDir;

namespace {

// A directory of mode `mode` (umask aside) at `path`.
void MakeDir(const std::string& path, mode_t mode) {
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

// A symlink at `at` to `to`, owned by the other user (root only).
void ForeignLink(const std::string& to, const std::string& at) {
  REQUIRE(::symlink(to.c_str(), at.c_str()) == 0);
  REQUIRE(::lchown(at.c_str(), wanbackup::testing::kOtherUid, wanbackup::testing::kOtherGid) == 0);
}

}  // namespace

TEST_CASE("safe path: the user's own links, . and .. are followed to the directory that is written",
          "[safe_path]") {
  TempDir dir("safe-path");
  MakeDir(dir / "real", 0755);
  REQUIRE(::symlink((dir / "real").c_str(), (dir / "link").c_str()) == 0);
  REQUIRE(::symlink("real/disk.img", (dir / "file-link").c_str()) == 0);
  for (const std::string& given :
       {dir / "link/disk.img", dir / "./real/../link/disk.img", dir / "file-link"}) {
    INFO(given);
    Result<ResolvedPath> r = ResolveForWriting(given, PathPolicy::kNoPlantedLinks);
    REQUIRE(r.ok());
    CHECK(r->path() == dir / "real/disk.img");
    struct stat a {
    }, b{};
    REQUIRE(::fstat(r->dir.get(), &a) == 0);
    REQUIRE(::stat((dir / "real").c_str(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);
  }
  // Kept: the link itself is the name (a file replaced whole replaces the link).
  Result<ResolvedPath> kept =
      ResolveForWriting(dir / "file-link", PathPolicy::kNoPlantedLinks, LastLink::kKeep);
  REQUIRE(kept.ok());
  CHECK(kept->name == "file-link");
  CHECK(ResolveForWriting(dir / "real/", PathPolicy::kNoPlantedLinks).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("safe path: a link another user owns, in a directory others can write, is refused",
          "[safe_path]") {
  if (!wanbackup::testing::CanSwitchUser()) WB_SKIP("needs root to own a link as another user");
  TempDir dir("safe-path");
  MakeDir(dir / "sticky", 01777);
  MakeDir(dir / "private", 0755);
  ForeignLink(dir / "private", dir / "sticky/dir");
  ForeignLink(dir / "private/x", dir / "sticky/file");
  ForeignLink(dir / "private/y", dir / "private/theirs");  // only root could have made it here
  for (const std::string& given : {dir / "sticky/dir/x", dir / "sticky/file"}) {
    INFO(given);
    const wanbackup::Status s = ResolveForWriting(given, PathPolicy::kNoPlantedLinks).status();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("is a symlink owned by uid 65534 in a directory "
                                            "others can write"));
  }
  CHECK(ResolveForWriting(dir / "private/theirs", PathPolicy::kNoPlantedLinks).ok());
}

TEST_CASE(
    "safe path: trusted, every directory on the way is root's or ours and not writable by "
    "others unless sticky",
    "[safe_path]") {
  TempDir dir("safe-path");
  MakeDir(dir / "open", 0777);
  MakeDir(dir / "sticky", 01777);
  MakeDir(dir / "group", 0775);
  CHECK(ResolveForWriting(dir / "sticky/a.prom", PathPolicy::kTrusted).ok());
  CHECK(ResolveForWriting(dir / "open/a.prom", PathPolicy::kNoPlantedLinks).ok());
  for (const char* name : {"open", "group"}) {
    const wanbackup::Status s =
        ResolveForWriting(dir / (std::string(name) + "/a.prom"), PathPolicy::kTrusted).status();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(dir / name + ": writable by group or others"));
  }
}

// As the other user: `path` resolved, written whole through a temporary (atomic_file.h) and
// written as a restore writes a new image (pipeline/file_sink.h), each with its fsyncs.
bool WritesAsOtherUser(const std::string& path) {
  return wanbackup::testing::AsOtherUser([&path] {
    Result<ResolvedPath> where = ResolveForWriting(path, PathPolicy::kNoPlantedLinks);
    if (!where.ok()) return false;
    if (!wanbackup::WriteFileAtomicallyAt(where->dir.get(), where->dir_path, where->name, "x\n",
                                          0644)
             .ok()) {
      return false;
    }
    auto sink = wanbackup::pipeline::FileSink::Open(path + ".img", {});
    const uint8_t byte = 7;
    return sink.ok() && (*sink)->Write(0, &byte, 1).ok() && (*sink)->Finish(1).ok();
  });
}

TEST_CASE(
    "safe path: a directory the user may search but not read (0711, 0733) is walked and written "
    "in",
    "[safe_path]") {
  if (!wanbackup::testing::CanSwitchUser()) WB_SKIP("needs root to act as another user");
  TempDir dir("safe-path");
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  MakeDir(dir / "searchable", 0711);  // root's, others may only pass through
  MakeDir(dir / "searchable/mine", 0755);
  REQUIRE(::chown((dir / "searchable/mine").c_str(), wanbackup::testing::kOtherUid,
                  wanbackup::testing::kOtherGid) == 0);
  MakeDir(dir / "searchable/drop", 0733);  // others may add files, not list them
  CHECK(WritesAsOtherUser(dir / "searchable/mine/a.prom"));
  CHECK(WritesAsOtherUser(dir / "searchable/drop/a.prom"));
  struct stat st {};
  CHECK(::stat((dir / "searchable/drop/a.prom").c_str(), &st) == 0);
  CHECK(::stat((dir / "searchable/drop/a.prom.img").c_str(), &st) == 0);
  CHECK(st.st_size == 1);
}
