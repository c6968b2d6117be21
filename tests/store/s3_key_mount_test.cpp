// `key change` and `mount` on a repository on S3, through the real binary in site A against the
// s3lab fixture's radosgw in site B. config.json is one object there, replaced by one PUT: the
// old key unlocks until the new one is in place, and a kill on either side of the PUT leaves
// exactly one of them working.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "store/s3_host.h"
#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/subprocess.h"

using namespace wanbackup;
using wanbackup::testing::Background;
using wanbackup::testing::CheckOneLineError;
using wanbackup::testing::NewS3RepoUrl;
using wanbackup::testing::Run;
using wanbackup::testing::RunResult;
using wanbackup::testing::S3Host;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::WriteNoiseImage;

namespace {

// Opens the repository with `key` only (no passphrase in the environment).
RunResult ListWith(const S3Host& host, const std::string& key) {
  return host.Wb({"snapshots"}, {{"WANBACKUP_KEY_FILE", key}});
}

}  // namespace

TEST_CASE(
    "s3 key change: the new key file unlocks on every host and the old one no longer does, "
    "and a kill on either side of the config.json PUT leaves one key working",
    "[s3lab]") {
  TempDir dir("s3key");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "disk.img", 81, 2);
  a.Ok({"snapshot", dir / "disk.img"});
  CHECK(b.SnapshotCount() == 1);  // b has a cache and an anchor from before the change

  // Killed before the PUT: the new key file exists, the old key still unlocks, the new does not.
  const std::string killed = dir / "killed.key";
  const RunResult before = a.Wb({"key", "change", "--new-key-file", killed},
                                {{"WANBACKUP_FAILPOINT", "key-change.before-config"}});
  CHECK(before.exit_code != 0);
  a.Ok({"snapshots"});
  CheckOneLineError(ListWith(a, killed), 5, "");

  // Killed after it: the new key unlocks, on this host and on the other, and the old one not.
  const std::string second = dir / "second.key";
  const RunResult after = a.Wb({"key", "change", "--new-key-file", second},
                               {{"WANBACKUP_FAILPOINT", "key-change.after-config"}});
  CHECK(after.exit_code != 0);
  CHECK(ListWith(a, second).exit_code == 0);
  CHECK(ListWith(b, second).exit_code == 0);
  CheckOneLineError(a.Wb({"snapshots"}), 5, "");

  // A whole change, to a passphrase: b restores with it, through its old cache.
  const std::string pass = dir / "pass";
  { std::ofstream(pass) << "a passphrase long enough\n"; }
  REQUIRE(::chmod(pass.c_str(), 0600) == 0);
  const RunResult change =
      a.Wb({"key", "change", "--new-password-file", pass}, {{"WANBACKUP_KEY_FILE", second}});
  INFO(change.err);
  REQUIRE(change.exit_code == 0);
  const std::map<std::string, std::string> by_passphrase = {{"WANBACKUP_KEY_FILE", ""},
                                                            {"WANBACKUP_PASSWORD_FILE", pass}};
  const RunResult restored = b.Wb({"restore", "1", "--to", dir / "restored.img"}, by_passphrase);
  INFO(restored.err);
  CHECK(restored.exit_code == 0);
  CHECK(SameFile(dir / "disk.img", dir / "restored.img"));
  CHECK(a.Wb({"verify"}, by_passphrase).exit_code == 0);
  CheckOneLineError(ListWith(b, second), 2, "unlocked by a passphrase, not a key file");
}

TEST_CASE(
    "s3 mount: every snapshot of an S3 repository reads back bit-exact through FUSE, and prune "
    "waits for the mount",
    "[s3lab]") {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0 ||
      Run({"sh", "-c", "command -v fusermount3"}).exit_code != 0) {
    WB_SKIP("needs root, /dev/fuse and fusermount3");
    return;
  }
  namespace fs = std::filesystem;
  TempDir dir("s3mount");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 91, 2);
  WriteNoiseImage(dir / "two.img", 92, 3);
  a.Ok({"snapshot", dir / "one.img", "--tag", "nightly"});
  a.Ok({"snapshot", dir / "two.img"});

  const std::string mnt = dir / "mnt";
  fs::create_directories(mnt);
  const std::string log = dir / "mount.log";
  Background mount({"sh", "-c", "exec \"$0\" \"$@\" 2>>" + log, WB_WANBACKUP_BIN, "mount", mnt},
                   a.Options());
  for (int i = 0; i < 1200 && !fs::exists(mnt + "/latest"); ++i) {
    if (mount.Wait(std::chrono::milliseconds(50)) != -1) break;  // it ended: failed
  }
  INFO(testing::FileContents(log));
  REQUIRE(fs::exists(mnt + "/latest"));
  CHECK(SameFile(mnt + "/1/disk.img", dir / "one.img"));
  CHECK(SameFile(mnt + "/latest/disk.img", dir / "two.img"));
  CHECK(SameFile(mnt + "/nightly/disk.img", dir / "one.img"));
  CHECK(fs::exists(mnt + "/2/info.json"));
  // The mount holds the repository's reader lock: prune is refused, naming it.
  CheckOneLineError(a.Wb({"prune"}), 7, "mount");

  REQUIRE(Run({"fusermount3", "-u", mnt}).exit_code == 0);
  CHECK(mount.Wait(std::chrono::seconds(60)) == 0);
  a.Ok({"prune"});  // the mount is gone, and with it its lock
}
