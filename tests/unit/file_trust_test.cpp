#include "common/file_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <catch2/catch.hpp>

#include "support/other_user.h"
#include "support/skip.h"
#include "support/temp_dir.h"

using wanbackup::CheckTrustedFile;
using wanbackup::StatusCode;
using wanbackup::TrustedFile;
using wanbackup::testing::kOtherGid;
using wanbackup::testing::kOtherUid;
using wanbackup::testing::TempDir;

namespace {

std::string Made(const std::string& path, mode_t mode) {
  std::ofstream(path) << "x\n";
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("file trust: a file of yours, mode 0600, in directories only root and you write, passes",
          "[file_trust]") {
  TempDir dir("trust");
  CHECK(CheckTrustedFile(Made(dir / "secret", 0600), TrustedFile::kSecret).ok());
  CHECK(CheckTrustedFile(Made(dir / "config", 0640), TrustedFile::kConfig).ok());
}

TEST_CASE(
    "file trust: a secret others or the group can read is refused, a config the group reads "
    "is not",
    "[file_trust]") {
  TempDir dir("trust");
  const std::string path = Made(dir / "secret", 0640);
  const wanbackup::Status s = CheckTrustedFile(path, TrustedFile::kSecret);
  CHECK(s.code() == StatusCode::kPermissionDenied);
  CHECK(s.message() ==
        path + ": readable by group (mode 0640); it holds a secret: chmod 600 " + path);
  CHECK(CheckTrustedFile(path, TrustedFile::kConfig).ok());
  REQUIRE(::chmod(path.c_str(), 0604) == 0);
  CHECK(CheckTrustedFile(path, TrustedFile::kConfig).message().find("readable by others") !=
        std::string::npos);
  REQUIRE(::chmod(path.c_str(), 0620) == 0);
  CHECK(CheckTrustedFile(path, TrustedFile::kConfig).message().find("writable by group") !=
        std::string::npos);
}

TEST_CASE("file trust: a file another user owns is refused, naming the uid", "[file_trust]") {
  if (::geteuid() != 0) WB_SKIP("needs root to give a file away");
  TempDir dir("trust");
  const std::string path = Made(dir / "config", 0600);
  REQUIRE(::chown(path.c_str(), kOtherUid, kOtherGid) == 0);
  CHECK(CheckTrustedFile(path, TrustedFile::kConfig).message() ==
        path + ": owned by uid 65534, not root or you");
}

TEST_CASE("file trust: a directory on the way that others can write is refused", "[file_trust]") {
  TempDir dir("trust");
  const std::string shared = dir / "shared";
  REQUIRE(::mkdir(shared.c_str(), 0755) == 0);
  const std::string inner = shared + "/inner";
  REQUIRE(::mkdir(inner.c_str(), 0700) == 0);
  const std::string path = Made(inner + "/secret", 0600);
  for (const mode_t mode : {0777, 0775, 0757}) {
    REQUIRE(::chmod(shared.c_str(), mode) == 0);
    const wanbackup::Status s = CheckTrustedFile(path, TrustedFile::kSecret);
    CHECK(s.code() == StatusCode::kPermissionDenied);
    CHECK(s.message().rfind(shared + ": writable by group or others", 0) == 0);
  }
}

TEST_CASE("file trust: a sticky directory on the way is trusted only for what is ours below it",
          "[file_trust]") {
  TempDir dir("trust");
  const std::string sticky = dir / "sticky";
  REQUIRE(::mkdir(sticky.c_str(), 0755) == 0);
  REQUIRE(::chmod(sticky.c_str(), 01777) == 0);  // as /tmp and /dev/shm
  const std::string ours = sticky + "/ours";
  REQUIRE(::mkdir(ours.c_str(), 0700) == 0);
  CHECK(CheckTrustedFile(Made(ours + "/secret", 0600), TrustedFile::kSecret).ok());
  CHECK(CheckTrustedFile(Made(sticky + "/secret", 0600), TrustedFile::kSecret).ok());
  if (::geteuid() != 0) return;  // handing a directory to another user needs root
  const std::string theirs = sticky + "/theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  const std::string path = Made(theirs + "/secret", 0600);
  REQUIRE(::chown(theirs.c_str(), kOtherUid, kOtherGid) == 0);
  CHECK(
      CheckTrustedFile(path, TrustedFile::kSecret).message().rfind(theirs + ": owned by uid", 0) ==
      0);
}

TEST_CASE("file trust: a symlink is checked where it is and where it leads", "[file_trust]") {
  TempDir dir("trust");
  const std::string open = dir / "open";
  REQUIRE(::mkdir(open.c_str(), 0777) == 0);
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  const std::string target = Made(open + "/secret", 0600);
  const std::string link = dir / "link";
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK(CheckTrustedFile(link, TrustedFile::kSecret).message().rfind(open + ": ", 0) == 0);
  const std::string safe = Made(dir / "safe", 0600);
  const std::string planted = open + "/link";
  REQUIRE(::symlink(safe.c_str(), planted.c_str()) == 0);
  CHECK(CheckTrustedFile(planted, TrustedFile::kSecret).message().rfind(open + ": ", 0) == 0);
}
