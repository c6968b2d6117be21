// The write guard (guard/write_guard.h): one test per rule on identities filled in by hand, and
// the identities guard/identity.h gives aliases of one file, device or LUN.
#include "guard/write_guard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "guard/identity.h"
#include "support/other_user.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace wanbackup::guard {
namespace {

Identity File(uint64_t ino, std::vector<FileId> directories = {}) {
  Identity id;
  id.kind = Identity::Kind::kPath;
  id.exists = true;
  id.file = FileId{1, ino};
  id.directories = std::move(directories);
  return id;
}

Identity Lun(const std::string& lun, std::vector<std::string> hosts) {
  Identity id;
  id.kind = Identity::Kind::kLun;
  id.lun = lun;
  id.hosts = std::move(hosts);
  return id;
}

Protected Of(Rule rule, Identity id, const std::string& what) {
  Protected p;
  p.rule = rule;
  p.identity = std::move(id);
  p.what = what;
  return p;
}

Destination To(const std::string& name, Identity id) {
  Destination d;
  d.name = name;
  d.identity = std::move(id);
  return d;
}

Destination Replicating(const std::string& name, Identity id, Identity series) {
  Destination d = To(name, std::move(id));
  d.replicate_series = std::move(series);
  return d;
}

Destination Overwriting(const std::string& name, Identity id) {
  Destination d = To(name, std::move(id));
  d.overwrite_source = true;
  return d;
}

std::string Refused(const Destination& to, const std::vector<Protected>& protect) {
  const Status s = CheckWriteTarget(to, protect);
  if (s.ok()) return "";
  CHECK(s.code() == StatusCode::kInvalidArgument);
  return s.message();
}

TEST_CASE("write guard: a file inside a repository, or its directory, or its device is refused",
          "[guard]") {
  Protected repo = Of(Rule::kRepository, File(10), "repository /x");
  repo.tree = true;
  CHECK(Refused(To("/x/config.json", File(11, {{1, 10}, {1, 2}})), {repo}) ==
        "/x/config.json is a file of repository /x. Nothing was written");
  CHECK(Refused(To("/x", File(10, {{1, 2}})), {repo}) ==
        "/x is repository /x. Nothing was written");
  Identity fresh;  // a new file in the packs directory
  fresh.kind = Identity::Kind::kPath;
  fresh.directories = {{1, 12}, {1, 10}, {1, 2}};
  CHECK(Refused(To("/x/packs/new", fresh), {repo}) ==
        "/x/packs/new is a file of repository /x. Nothing was written");
  Identity device;
  device.kind = Identity::Kind::kBlock;
  device.exists = true;
  device.rdev = 1;  // the st_dev of the repository's files
  CHECK(Refused(To("/dev/sdb1", device), {repo}) ==
        "/dev/sdb1 is the device that holds repository /x. Nothing was written");
  CHECK(Refused(To("/y/a.img", File(20, {{1, 21}, {1, 2}})), {repo}).empty());
  // A hard link elsewhere to one of its files: listed by inode.
  const Protected linked = Of(Rule::kRepository, File(11), "repository /x");
  CHECK(Refused(To("/y/link", File(11, {{1, 21}})), {linked}) ==
        "/y/link is a file of repository /x. Nothing was written");
}

TEST_CASE("write guard: a loop device is refused for what its backing file is refused for",
          "[guard]") {
  Identity loop;
  loop.kind = Identity::Kind::kBlock;
  loop.exists = true;
  loop.rdev = 7;
  Identity backing = File(5, {{1, 21}, {1, 2}});
  backing.spelling = "/y/disk.img";
  loop.backing.push_back(backing);
  const Protected source = Of(Rule::kJobSource, File(5), "the source of job db");
  CHECK(Refused(To("/dev/loop3", loop), {source}) ==
        "/dev/loop3 (a loop device on /y/disk.img) is the source of job db. Nothing was written");
  Protected repo = Of(Rule::kRepository, File(21), "repository /y");
  repo.tree = true;
  CHECK(Refused(To("/dev/loop3", loop), {repo}) ==
        "/dev/loop3 (a loop device on /y/disk.img) is a file of repository /y. Nothing was "
        "written");
  loop.backing.clear();  // another loop device, on another file
  CHECK(Refused(To("/dev/loop3", loop), {source, repo}).empty());
}

TEST_CASE("write guard: the source of a job in the config is refused", "[guard]") {
  Protected job = Of(Rule::kJobSource, Lun("iqn.x:db/1", {"10.0.0.5"}), "the source of job db");
  job.hint = "a replica is a standby copy";
  CHECK(Refused(To("iscsi://san/iqn.x:db/1", Lun("iqn.x:db/1", {"10.0.0.5"})), {job}) ==
        "iscsi://san/iqn.x:db/1 is the source of job db; a replica is a standby copy. Nothing was "
        "written");
  CHECK(Refused(To("lun 2", Lun("iqn.x:db/2", {"10.0.0.5"})), {job}).empty());
}

TEST_CASE(
    "write guard: the source of a complete snapshot is refused, unless a restore overwrites it "
    "on purpose, and one running now always",
    "[guard]") {
  Protected done = Of(Rule::kSnapshotSource, File(5), "the source of snapshot 1");
  done.overridable = true;
  const Protected running =
      Of(Rule::kSnapshotSource, File(6), "the source of snapshot 2, running now");
  CHECK(Refused(To("/d", File(5)), {done}) ==
        "/d is the source of snapshot 1. Nothing was written");
  CHECK(Refused(Overwriting("/d", File(5)), {done}).empty());
  CHECK(!Refused(Overwriting("/e", File(6)), {running}).empty());
}

TEST_CASE("write guard: a recorded replica is refused unless replicate writes its own series",
          "[guard]") {
  Protected replica = Of(Rule::kReplica, File(7), "replica 1 of repository /x");
  replica.series = File(5);
  const Identity at = File(7);
  CHECK(Refused(To("/r", at), {replica}) ==
        "/r is replica 1 of repository /x. Nothing was written");  // restore, copy
  CHECK(Refused(Replicating("/r", at, File(5)), {replica}).empty());
  CHECK(!Refused(Replicating("/r", at, File(8)), {replica}).empty());
  replica.series.reset();  // the snapshot it holds was forgotten: its series is not known
  CHECK(Refused(Replicating("/r", at, File(8)), {replica}).empty());
}

TEST_CASE("write guard: a LUN is the same by IQN, LUN and host address, not by spelling",
          "[guard]") {
  CHECK(HostAddresses("localhost") == std::vector<std::string>{"loopback"});
  CHECK(HostAddresses("127.0.0.1") == std::vector<std::string>{"loopback"});
  CHECK(HostAddresses("::1") == std::vector<std::string>{"loopback"});
  CHECK(HostAddresses("::ffff:10.0.0.5") == std::vector<std::string>{"10.0.0.5"});
  Destination to = To("iscsi://localhost/iqn.x:db/1", Identify("iscsi://localhost/iqn.x:db/1"));
  std::vector<Protected> protect = {
      Of(Rule::kJobSource, Identify("iscsi://127.0.0.1:3261/iqn.x:db/1"), "the source of job db")};
  ResolveHosts(&to, &protect);
  CHECK(!Refused(to, protect).empty());
  // A DR SAN that reuses production's IQN at another address is another LUN.
  Destination dr = To("iscsi://10.0.0.6/iqn.x:db/1", Identify("iscsi://10.0.0.6/iqn.x:db/1"));
  std::vector<Protected> production = {
      Of(Rule::kJobSource, Identify("iscsi://10.0.0.5/iqn.x:db/1"), "the source of job db")};
  ResolveHosts(&dr, &production);
  CHECK(Refused(dr, production).empty());
  // A host name that does not resolve could be any host: refused, as the same IQN and LUN.
  Destination unknown = To("iscsi://no-such-host.invalid/iqn.x:db/1",
                           Identify("iscsi://no-such-host.invalid/iqn.x:db/1"));
  ResolveHosts(&unknown, &production);
  CHECK(!Refused(unknown, production).empty());
}

TEST_CASE("write guard: symlinks, hard links, ./ and .. name the same file", "[guard]") {
  testing::TempDir dir("write-guard");
  const std::string file = dir / "disk.img";
  std::ofstream(file) << "data";
  REQUIRE(::mkdir((dir / "sub").c_str(), 0700) == 0);
  REQUIRE(::symlink(file.c_str(), (dir / "symlink").c_str()) == 0);
  REQUIRE(::link(file.c_str(), (dir / "hardlink").c_str()) == 0);
  const Identity original = Identify(file);
  CHECK(original.exists);
  for (const std::string& alias :
       {dir / "symlink", dir / "hardlink", dir / "./disk.img", dir / "sub/../disk.img"}) {
    INFO(alias);
    CHECK(Same(Identify(alias), original));
  }
  CHECK(!Same(Identify(dir / "sub"), original));
  // A file not there yet is known by the directories that would hold it.
  const Identity fresh = Identify(dir / "sub/../new.img");
  CHECK(!fresh.exists);
  CHECK(fresh.spelling == dir / "new.img");
  CHECK(fresh.directories.front() == Identify(dir.path()).file);
}

TEST_CASE(
    "write guard: a repository's files are known by inode past a directory that cannot be read",
    "[guard]") {
  if (!testing::CanSwitchUser()) WB_SKIP("needs root to act as another user");
  testing::TempDir dir("write-guard");
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string repo = dir / "repo";
  for (const std::string& d : {repo, repo + "/packs", repo + "/packs/zz"}) {
    REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    REQUIRE(::chown(d.c_str(), testing::kOtherUid, testing::kOtherGid) == 0);
  }
  for (int i = 0; i < 16; ++i) {  // whatever order the directory lists them in
    const std::string locked = repo + "/packs/a" + std::to_string(i);
    REQUIRE(::mkdir(locked.c_str(), 0) == 0);
    REQUIRE(::chmod(locked.c_str(), 0) == 0);
  }
  std::ofstream(repo + "/config.json") << "{}";
  const std::string pack = repo + "/packs/zz/x.pack";
  std::ofstream(pack) << "pack";
  REQUIRE(::link(pack.c_str(), (dir / "innocent.img").c_str()) == 0);
  const std::string dest = dir / "innocent.img";
  CHECK(testing::AsOtherUser([&repo, &dest] {
    const Identity to = Identify(dest);
    std::vector<Protected> protect;
    AddRepository(repo, to, &protect);
    const Status s = CheckWriteTarget(To(dest, to), protect);
    return !s.ok() && s.message().find("is a file of repository " + repo) != std::string::npos;
  }));
}

Identity Block(uint64_t rdev, uint64_t whole_disk = 0) {
  Identity id;
  id.kind = Identity::Kind::kBlock;
  id.exists = true;
  id.rdev = rdev;
  id.whole_disk = whole_disk;
  return id;
}

TEST_CASE("write guard: a partition and its disk share data, two partitions of one disk do not",
          "[guard]") {
  const Identity disk = Block(0x800), part1 = Block(0x801, 0x800), part2 = Block(0x802, 0x800);
  const std::vector<Protected> source = {Of(Rule::kJobSource, part1, "the source of job db")};
  CHECK(CheckWriteTarget(To("/dev/sda", disk), source).message() ==
        "/dev/sda is the source of job db. Nothing was written");
  CHECK(CheckWriteTarget(To("/dev/sda2", part2), source).ok());
  const std::vector<Protected> whole = {Of(Rule::kJobSource, disk, "the source of job all")};
  CHECK(!CheckWriteTarget(To("/dev/sda1", part1), whole).ok());
  // The device that holds a protected file, or its partition's disk.
  Identity file = File(7);
  file.file.dev = 0x801;
  file.whole_disk = 0x800;
  const std::vector<Protected> on_fs = {
      Of(Rule::kSnapshotSource, file, "the source of snapshot 3")};
  CHECK(CheckWriteTarget(To("/dev/sda", disk), on_fs).message() ==
        "/dev/sda is the device that holds the source of snapshot 3. Nothing was written");
  CHECK(!CheckWriteTarget(To("/dev/sda1", part1), on_fs).ok());
  CHECK(CheckWriteTarget(To("/dev/sda2", part2), on_fs).ok());
}

TEST_CASE("write guard: a protected loop device protects its backing file", "[guard]") {
  Identity loop = Block(0x700);
  loop.spelling = "/dev/loop0";
  loop.backing.push_back(File(9));
  const std::vector<Protected> source = {Of(Rule::kJobSource, loop, "the source of job vm")};
  CHECK(CheckWriteTarget(To("/vm.img", File(9)), source).message() ==
        "/vm.img is the source of job vm (/dev/loop0, a loop device on it). Nothing was written");
  CHECK(CheckWriteTarget(To("/other.img", File(10)), source).ok());
}

TEST_CASE("write guard: a device path that does not exist is a mistyped name, /dev/shm is not",
          "[guard]") {
  auto missing = [](const std::string& path) {
    Identity id;
    id.kind = Identity::Kind::kPath;
    id.spelling = path;
    return To(path, id);
  };
  CHECK(!CheckDeviceName(missing("/dev/sdz")).ok());
  CHECK(!CheckDeviceName(missing("/dev/disk/by-id/wwn-0x5000")).ok());
  CHECK(!CheckDeviceName(missing("/dev/mapper/vg-lv")).ok());
  CHECK(CheckDeviceName(missing("/dev/shm/new.img")).ok());
  CHECK(CheckDeviceName(missing("/dev/stdout")).ok());
  CHECK(CheckDeviceName(missing("/srv/new.img")).ok());
}

}  // namespace
}  // namespace wanbackup::guard
