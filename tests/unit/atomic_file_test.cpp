#include "common/atomic_file.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "support/skip.h"
#include "support/temp_dir.h"

using wanbackup::ReadRegularFileNoFollow;
using wanbackup::StatusCode;
using wanbackup::WriteFileAtomically;
using wanbackup::testing::TempDir;

namespace {

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t EntriesIn(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("atomic file: replaces the file with the mode asked for, leaving nothing else",
          "[atomic_file]") {
  TempDir dir("atomic");
  const std::string path = dir / "out.prom";
  std::ofstream(path) << "old\n";
  REQUIRE(WriteFileAtomically(path, "new\n", 0644).ok());
  CHECK(FileText(path) == "new\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  CHECK(EntriesIn(dir.path()) == 1);
}

TEST_CASE("atomic file: a symlink at the target is replaced, never written through",
          "[atomic_file]") {
  TempDir dir("atomic");
  const std::string victim = dir / "victim";
  std::ofstream(victim) << "precious\n";
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  const std::string path = dir / "out";
  REQUIRE(::symlink(victim.c_str(), path.c_str()) == 0);
  std::string read;
  CHECK(ReadRegularFileNoFollow(path, &read).code() == StatusCode::kInvalidArgument);
  CHECK(read.empty());
  REQUIRE(WriteFileAtomically(path, "mine\n", 0644).ok());
  CHECK(FileText(victim) == "precious\n");
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  REQUIRE(::stat(victim.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("atomic file: a full disk fails in one sentence and leaves no temporary file",
          "[atomic_file]") {
  if (::geteuid() != 0) WB_SKIP("needs root to mount a small tmpfs");
  TempDir dir("atomic");
  const std::string mnt = dir / "small";
  REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
  REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") == 0);
  const std::string path = mnt + "/out";
  std::ofstream(path) << "old\n";
  const wanbackup::Status s = WriteFileAtomically(path, std::string(1 << 20, 'x'), 0644);
  const size_t left = EntriesIn(mnt);
  const std::string kept = FileText(path);
  ::umount2(mnt.c_str(), MNT_DETACH);
  CHECK(s.message() == "writing " + path + ": No space left on device");
  CHECK(left == 1);
  CHECK(kept == "old\n");
}
