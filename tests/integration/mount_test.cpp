// `wanbackup mount` through the real kernel: FUSE, loop devices, ext4. Root; local
// repositories (no WAN). Each test unmounts what it mounted and detaches its loop devices.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/other_user.h"
#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

namespace fs = std::filesystem;

// Why this machine cannot run a FUSE test, or "" when it can.
std::string FuseMissing() {
  if (::geteuid() != 0) return "needs root (loop devices, mount)";
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse";
  if (Run({"sh", "-c", "command -v fusermount3"}).exit_code != 0) return "no fusermount3 (fuse3)";
  return "";
}

// A `wanbackup mount` running in the foreground in the background of the test; unmounted (by
// fusermount3 -u, as a user would) and reaped when it goes.
class FuseMount {
 public:
  FuseMount(const RepoCli& repo, const std::string& mountpoint,
            const std::vector<std::string>& extra = {})
      : mountpoint_(mountpoint) {
    fs::create_directories(mountpoint);
    std::vector<std::string> argv = {WB_WANBACKUP_BIN, "mount", mountpoint};
    argv.insert(argv.end(), extra.begin(), extra.end());
    RunOptions o;
    o.env["WANBACKUP_REPO"] = repo.path();
    o.env["WANBACKUP_KEY_FILE"] = repo.key();
    log_ = mountpoint + ".log";
    argv.insert(argv.begin(), {"sh", "-c", "exec \"$0\" \"$@\" 2>>" + log_});
    process_ = std::make_unique<Background>(argv, o);
    for (int i = 0; i < 600 && !fs::exists(mountpoint + "/latest"); ++i) {
      if (process_->Wait(std::chrono::milliseconds(50)) != -1) break;  // it ended: failed
    }
    ready_ = fs::exists(mountpoint + "/latest");
  }
  ~FuseMount() { Unmount(); }
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  bool ready() const { return ready_; }
  // Unmounts; the exit code of the mount process (0: a clean end).
  int Unmount() {
    if (!process_) return exit_code_;
    if (Run({"fusermount3", "-u", mountpoint_}).exit_code != 0) {
      // Busy (a failed check left a loop device on a file in it): detached lazily, so that no
      // mount outlives the test whatever it found.
      Run({"fusermount3", "-uz", mountpoint_});
    }
    exit_code_ = process_->Wait(std::chrono::seconds(60));
    process_.reset();
    return exit_code_;
  }
  // Ends the mount with `signo` (as Ctrl-C or systemd would); the exit code.
  int Signal(int signo) {
    if (!process_) return exit_code_;
    process_->Kill(signo);
    exit_code_ = process_->Wait(std::chrono::seconds(60));
    process_.reset();
    return exit_code_;
  }
  std::string log() const { return FileContents(log_); }

 private:
  std::string mountpoint_, log_;
  std::unique_ptr<Background> process_;
  bool ready_ = false;
  int exit_code_ = -1;
};

// A file system image attached read-only to a loop device and mounted read-only at `dir`;
// unmounted and detached when it goes.
class LoopMount {
 public:
  LoopMount(const std::string& image, const std::string& dir) : dir_(dir) {
    fs::create_directories(dir);
    RunResult r = Run({"losetup", "--find", "--show", "--read-only", image});
    if (r.exit_code != 0) return;
    device_ = r.out.substr(0, r.out.find('\n'));
    mounted_ = Run({"mount", "-o", "ro,noload", device_, dir}).exit_code == 0;
  }
  ~LoopMount() {
    if (mounted_) Run({"umount", dir_});
    if (!device_.empty()) Run({"losetup", "-d", device_});
  }
  LoopMount(const LoopMount&) = delete;
  LoopMount& operator=(const LoopMount&) = delete;
  bool ok() const { return mounted_; }

 private:
  std::string dir_, device_;
  bool mounted_ = false;
};

std::string FsImageScript() {
  return std::string(WB_SOURCE_DIR) + "/scripts/fs-image";
}

RunOptions LongRun() {
  RunOptions o;
  o.timeout = std::chrono::seconds(300);
  return o;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// Every pack file of the repository, by path.
std::vector<std::string> PackFiles(const std::string& repo) {
  std::vector<std::string> packs;
  for (const auto& e : fs::recursive_directory_iterator(repo + "/packs"))
    if (e.is_regular_file()) packs.push_back(e.path().string());
  std::sort(packs.begin(), packs.end());
  return packs;
}

// Partition `number` of a disk image as (offset, size) in bytes, from parted's table; {0, 0}
// when it has none. (This VM's loop driver shows no partitions for --partscan and it has no
// udev, so the tests attach each partition by offset, as --partscan would.)
std::pair<uint64_t, uint64_t> PartitionOf(const std::string& disk, int number) {
  const RunResult r = Run({"parted", "-m", "-s", disk, "unit", "B", "print"});
  for (const std::string& line : Lines(r.out)) {
    // "1:1048576B:101711871B:100663296B:ext4:one:;"
    std::vector<std::string> f;
    std::istringstream in(line);
    for (std::string field; std::getline(in, field, ':');)
      f.push_back(field);
    if (f.size() >= 4 && f[0] == std::to_string(number)) {
      return {std::stoull(f[1]), std::stoull(f[3])};
    }
  }
  return {0, 0};
}

// Attaches partition `number` of `disk` to a loop device (read-only unless `writable`), as the
// partition table of `table` places it (parted opens what it reads for writing: not disk.img);
// "" when it cannot.
std::string AttachPartition(const std::string& disk, const std::string& table, int number,
                            bool writable) {
  const auto [offset, size] = PartitionOf(table, number);
  if (size == 0) return "";
  std::vector<std::string> argv = {
      "losetup",           "--find", "--show", "--offset", std::to_string(offset), "--sizelimit",
      std::to_string(size)};
  if (!writable) argv.emplace_back("--read-only");
  argv.push_back(disk);
  const RunResult r = Run(argv);
  return r.exit_code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
}

// A partitioned disk image: GPT, partition 1 ext4 (an fs-image of 96 MiB written into it),
// partition 2 XFS (made and filled through a loop device) holding a copy of `xfs_from`.
bool MakePartitionedDisk(const std::string& disk, const std::string& ext4_image,
                         const std::string& xfs_from, const std::string& work) {
  if (Run({"truncate", "-s", "480M", disk}).exit_code != 0) return false;
  if (Run({"parted", "-s", disk, "mklabel", "gpt", "mkpart", "one", "ext4", "1MiB", "97MiB",
           "mkpart", "two", "xfs", "97MiB", "479MiB"})
          .exit_code != 0) {
    return false;
  }
  if (Run({"dd", "if=" + ext4_image, "of=" + disk, "bs=1M", "seek=1", "conv=notrunc,fsync"})
          .exit_code != 0) {
    return false;
  }
  const std::string dev = AttachPartition(disk, disk, 2, true);
  if (dev.empty()) return false;
  fs::create_directories(work);
  bool ok = Run({"mkfs.xfs", "-q", "-f", dev}, LongRun()).exit_code == 0 &&
            Run({"mount", dev, work}).exit_code == 0;
  if (ok) {
    ok = Run({"cp", "-a", xfs_from, work + "/"}, LongRun()).exit_code == 0;
    Run({"umount", work});
  }
  Run({"losetup", "-d", dev});
  return ok;
}

// The partitions of a disk image (placed by the table of `table`) attached read-only and
// mounted read-only: 1 (ext4, noload) at DIR/one, 2 (XFS, norecovery) at DIR/two.
class PartitionMounts {
 public:
  PartitionMounts(const std::string& disk, const std::string& table, const std::string& dir)
      : dir_(dir) {
    one_dev_ = AttachPartition(disk, table, 1, false);
    two_dev_ = AttachPartition(disk, table, 2, false);
    if (one_dev_.empty() || two_dev_.empty()) return;
    fs::create_directories(dir + "/one");
    fs::create_directories(dir + "/two");
    one_ = Run({"mount", "-o", "ro,noload", one_dev_, dir + "/one"}).exit_code == 0;
    // nouuid: the same XFS may be mounted already (the original, or the other copy).
    two_ = Run({"mount", "-o", "ro,norecovery,nouuid", two_dev_, dir + "/two"}).exit_code == 0;
  }
  ~PartitionMounts() {
    if (one_) Run({"umount", dir_ + "/one"});
    if (two_) Run({"umount", dir_ + "/two"});
    for (const std::string& dev : {one_dev_, two_dev_})
      if (!dev.empty()) Run({"losetup", "-d", dev});
  }
  PartitionMounts(const PartitionMounts&) = delete;
  PartitionMounts& operator=(const PartitionMounts&) = delete;
  bool ok() const { return one_ && two_; }

 private:
  std::string dir_, one_dev_, two_dev_;
  bool one_ = false, two_ = false;
};

// Whether something is mounted on the directory `dir` (a canonical path), by
// /proc/self/mountinfo.
bool MountedOn(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devs, root, point;
    if (fields >> id >> parent >> devs >> root >> point && point == dir) return true;
  }
  return false;
}

// For a mount that is meant to be refused: whatever got mounted on one of `dirs` anyway (a
// failing test) is detached when this goes (lazily: a mount over its own repository would wait
// on itself), and its --background daemon then ends as its /dev/fuse closes.
class NoMountLeft {
 public:
  explicit NoMountLeft(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}
  ~NoMountLeft() {
    for (const std::string& dir : dirs_)
      for (int i = 0; i < 3 && MountedOn(dir); ++i)
        Run({"umount", "-l", dir});
  }
  NoMountLeft(const NoMountLeft&) = delete;
  NoMountLeft& operator=(const NoMountLeft&) = delete;

 private:
  std::vector<std::string> dirs_;
};

// A symlink `link` -> `target` as another user (uid 65534) would have made it.
void PlantLink(const std::string& target, const std::string& link) {
  fs::create_directory_symlink(target, link);
  REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
}

}  // namespace

TEST_CASE("mount: a snapshot's disk.img loop-mounts to the same tree as the image itself",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mount");
  RepoCli repo(tmp);
  const std::string image = tmp / "fs.img";
  const RunResult built = Run({FsImageScript(), "build", image, "--size", "192M"}, LongRun());
  REQUIRE(built.exit_code == 0);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", image, "--tag", "nightly"});

  FuseMount mounted(repo, tmp / "mnt");
  INFO(mounted.log());
  REQUIRE(mounted.ready());
  CHECK(fs::read_symlink(tmp / "mnt/latest") == "1");
  CHECK(fs::read_symlink(tmp / "mnt/nightly") == "1");
  CHECK(fs::file_size(tmp / "mnt/1/disk.img") == fs::file_size(image));
  const auto info = nlohmann::json::parse(FileContents(tmp / "mnt/1/info.json"));
  CHECK(info["source"] == image);
  CHECK(info["size_bytes"] == fs::file_size(image));
  CHECK(info["tag"] == "nightly");
  // Nothing can be written.
  CHECK(::open((tmp / "mnt/1/disk.img").c_str(), O_WRONLY) == -1);

  LoopMount direct(image, tmp / "direct");
  LoopMount through(tmp / "mnt/latest/disk.img", tmp / "through");
  REQUIRE(direct.ok());
  REQUIRE(through.ok());
  const RunResult diff =
      Run({"diff", "-r", "--no-dereference", tmp / "direct", tmp / "through"}, LongRun());
  INFO(diff.out << diff.err);
  CHECK(diff.exit_code == 0);
  // And a dozen files, byte for byte, named by the image's own list.
  const RunResult listed = Run({FsImageScript(), "files", image, "--count", "12"});
  REQUIRE(listed.exit_code == 0);
  const std::vector<std::string> files = Lines(listed.out);
  CHECK(files.size() == 12);
  for (const std::string& f : files) {
    INFO(f);
    const std::string a = FileContents(tmp / "direct" + f), b = FileContents(tmp / "through" + f);
    CHECK(!a.empty());
    CHECK(a == b);
  }
}

TEST_CASE("mount: a damaged chunk fails only the reads that touch it, with EIO",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountbad");
  RepoCli repo(tmp);
  const std::string image = tmp / "noise.img";
  WriteNoiseImage(image, 43, 4);  // chunk 1 all zeros
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", image});
  const std::vector<std::string> packs = PackFiles(repo.path());
  REQUIRE(packs.size() == 1);
  // A byte in the middle of the pack's first record (noise does not compress: a 4 MiB record).
  Scribble(packs[0], 1u << 20, "X");

  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  const std::string original = FileContents(image);
  const int fd = ::open((tmp / "mnt/1/disk.img").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  int failed = 0;
  for (uint64_t chunk = 0; chunk < 4; ++chunk) {
    std::string got(kTestChunk, '\0');
    const ssize_t n = ::pread(fd, got.data(), got.size(), static_cast<off_t>(chunk * kTestChunk));
    if (n < 0) {
      CHECK(errno == EIO);
      CHECK(chunk != 1);  // the zero chunk is never fetched
      ++failed;
      continue;
    }
    INFO("chunk " << chunk);
    CHECK(n == static_cast<ssize_t>(kTestChunk));
    CHECK(got == original.substr(chunk * kTestChunk, kTestChunk));  // never wrong bytes
  }
  ::close(fd);
  CHECK(failed == 1);
  CHECK(mounted.Unmount() == 0);
  const std::string log = mounted.log();
  INFO(log);
  CHECK(log.find("cannot be read") != std::string::npos);
  CHECK(log.find("(LBA ") != std::string::npos);
}

TEST_CASE("mount: prune waits for a mount, and no pack under it disappears",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountprune");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 1, 3);
  WriteNoiseImage(tmp / "b.img", 2, 3);
  repo.Ok({"snapshot", tmp / "a.img"});
  repo.Ok({"snapshot", tmp / "b.img"});
  repo.Ok({"forget", "1",
           "--allow-empty-source"});  // snapshot 1's chunks are now garbage prune would remove
  const std::vector<std::string> before = PackFiles(repo.path());

  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  const RunResult refused = repo.Wb({"prune"});
  CHECK(refused.exit_code == 7);
  CHECK(refused.err.find("mount " + tmp / "mnt") != std::string::npos);  // names the mount
  CHECK(PackFiles(repo.path()) == before);

  // One that waits for the lock goes on once the mount ends, not before.
  RunOptions o;
  o.env["WANBACKUP_REPO"] = repo.path();
  o.env["WANBACKUP_KEY_FILE"] = repo.key();
  Background waiting({WB_WANBACKUP_BIN, "prune", "--lock-wait", "120s"}, o);
  CHECK(waiting.Wait(std::chrono::seconds(2)) == -1);  // still waiting
  CHECK(PackFiles(repo.path()) == before);
  CHECK(SameBytes(tmp / "mnt/2/disk.img", tmp / "b.img", 3 * kTestChunk));
  CHECK(mounted.Unmount() == 0);
  CHECK(waiting.Wait(std::chrono::seconds(120)) == 0);
  CHECK(PackFiles(repo.path()) != before);  // it did remove something, after the mount
  repo.Ok({"restore", "2", "--to", tmp / "b.out"});
  CHECK(SameFile(tmp / "b.out", tmp / "b.img"));
}

TEST_CASE("mount: refuses a missing or busy mountpoint with one clear line",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountbusy");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 3, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  const RunResult missing = repo.Wb({"mount", tmp / "nowhere"});
  CHECK(missing.exit_code == 6);
  CHECK(missing.err.find("does not exist") != std::string::npos);
  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  const RunResult busy = repo.Wb({"mount", tmp / "mnt"});
  CHECK(busy.exit_code == 7);
  CHECK(busy.err.find("busy") != std::string::npos);
  CHECK(mounted.Signal(SIGTERM) == 0);  // a clean end: unmounted
  CHECK_FALSE(fs::exists(tmp / "mnt/latest"));
}

TEST_CASE("mount: --background returns once mounted, and fusermount3 -u ends it",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountbg");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 4, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  fs::create_directories(tmp / "mnt");
  const RunResult started = repo.Ok({"mount", tmp / "mnt", "--background"});
  CHECK(started.err.find("in the background") != std::string::npos);
  CHECK(SameFile(tmp / "mnt/1/disk.img", tmp / "a.img"));
  CHECK(Run({"fusermount3", "-u", tmp / "mnt"}).exit_code == 0);
  CHECK_FALSE(fs::exists(tmp / "mnt/latest"));
}

TEST_CASE("mount: a snapshot served as a read-only LUN by tgt copies back bit-exact",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  if (Run({"sh", "-c", "command -v tgtd"}).exit_code != 0) WB_SKIP("no tgtd (tgt)");
  TempDir tmp("mountlun");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 5, 3);
  repo.Ok({"snapshot", tmp / "a.img"});
  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  // Instant access: the reference target with the mounted disk.img as its backing store.
  const std::string iqn = "iqn.2026-11.org.wanbackup:instant";
  const std::string portal = "127.0.0.1:3299";
  const std::string reftarget = std::string(WB_SOURCE_DIR) + "/scripts/reftarget";
  const RunResult started =
      Run({reftarget, "start", "--dir", tmp / "target", "--portal", portal, "--iqn", iqn,
           "--backing", tmp / "mnt/latest/disk.img", "--readonly"},
          LongRun());
  INFO(started.out << started.err);
  REQUIRE(started.exit_code == 0);
  const RunResult copied =
      Local({"copy", "iscsi://" + portal + "/" + iqn + "/1", tmp / "copy.img"}, LongRun());
  Run({reftarget, "stop", "--dir", tmp / "target"}, LongRun());
  INFO(copied.out << copied.err);
  CHECK(copied.exit_code == 0);
  CHECK(SameFile(tmp / "copy.img", tmp / "a.img"));
  CHECK(mounted.Unmount() == 0);
}

TEST_CASE("mount: the partitions of a partitioned disk, ext4 and XFS, read the same through it",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountparts");
  RepoCli repo(tmp);
  const std::string ext4 = tmp / "ext4.img", disk = tmp / "disk.img";
  REQUIRE(
      Run({FsImageScript(), "build", ext4, "--size", "96M", "--from", "/usr/share/doc"}, LongRun())
          .exit_code == 0);
  REQUIRE(MakePartitionedDisk(disk, ext4, "/usr/include/linux", tmp / "xfs-work"));
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", disk});

  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  PartitionMounts direct(disk, disk, tmp / "direct");
  PartitionMounts through(tmp / "mnt/latest/disk.img", disk, tmp / "through");
  REQUIRE(direct.ok());
  REQUIRE(through.ok());
  for (const char* part : {"/one", "/two"}) {
    const RunResult diff =
        Run({"diff", "-r", "--no-dereference", tmp / "direct" + part, tmp / "through" + part},
            LongRun());
    INFO(part << ": " << diff.out << diff.err);
    CHECK(diff.exit_code == 0);
  }
  CHECK(fs::exists(tmp / "through/two/linux/fs.h"));
  CHECK(FileContents(tmp / "through/two/linux/fs.h") == FileContents("/usr/include/linux/fs.h"));
}

TEST_CASE("mount: without /dev/fuse, or as a user fuse.conf does not allow, one clear line",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountnofuse");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 6, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  fs::create_directories(tmp / "mnt");
  // A mount namespace whose /dev is an empty tmpfs: no /dev/fuse.
  RunOptions o;
  o.env["WANBACKUP_REPO"] = repo.path();
  o.env["WANBACKUP_KEY_FILE"] = repo.key();
  const RunResult no_fuse =
      Run({"unshare", "-m", "sh", "-c", "mount -t tmpfs none /dev && exec \"$0\" mount \"$1\"",
           WB_WANBACKUP_BIN, tmp / "mnt"},
          o);
  CHECK(no_fuse.exit_code == 6);
  CHECK(no_fuse.err.find("/dev/fuse is absent") != std::string::npos);
  CHECK(Lines(no_fuse.err).size() == 1);
  CHECK_FALSE(fs::exists(tmp / "mnt/latest"));

  // Not root, and /etc/fuse.conf without user_allow_other.
  if (FileContents("/etc/fuse.conf").find("\nuser_allow_other") != std::string::npos) return;
  if (!OtherUserCanSearch(WB_WANBACKUP_BIN)) return;  // the binary is out of its reach
  char open_dir[] = "/tmp/wb-mount-user-XXXXXX";
  REQUIRE(::mkdtemp(open_dir) != nullptr);
  ::chmod(open_dir, 0755);
  const RunResult user = Run(AsOtherUserArgv({WB_WANBACKUP_BIN, "mount", open_dir}), o);
  ::rmdir(open_dir);
  // Refused for /dev/fuse (root's alone on some systems) or for fuse.conf, whichever comes
  // first; either way the line says to mount as root.
  CHECK(user.exit_code == 5);
  CHECK(user.err.find("as root") != std::string::npos);
  CHECK(Lines(user.err).size() == 1);
}

TEST_CASE("mount: one file out of the image fetches only the chunks it and its metadata touch",
          "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountone");
  RepoCli repo(tmp);
  const std::string image = tmp / "fs.img";
  REQUIRE(Run({FsImageScript(), "build", image, "--size", "256M"}, LongRun()).exit_code == 0);
  repo.Ok({"init", "--key-file", repo.key()});
  const auto snap = Json(repo.Ok({"snapshot", image, "--json"}));
  const uint64_t stored_chunks =
      snap["chunks_total"].get<uint64_t>() - snap["chunks_zero"].get<uint64_t>();
  const RunResult listed =
      Run({FsImageScript(), "files", image, "--count", "1", "--min-size", "1048576"});
  const std::vector<std::string> files = Lines(listed.out);
  REQUIRE(files.size() == 1);

  FuseMount mounted(repo, tmp / "mnt");
  REQUIRE(mounted.ready());
  {
    LoopMount through(tmp / "mnt/1/disk.img", tmp / "through");
    REQUIRE(through.ok());
    CHECK(FileContents(tmp / "through" + files[0]).size() >= (1u << 20));
  }
  REQUIRE(mounted.Unmount() == 0);
  // "unmounted MNT: N chunks fetched (...)"
  const std::string log = mounted.log();
  INFO(log);
  const size_t at = log.find(" chunks fetched");
  REQUIRE(at != std::string::npos);
  const size_t start = log.rfind(' ', at - 1) + 1;
  const uint64_t fetched = std::stoull(log.substr(start, at - start));
  // The file's chunk or two, and the superblock, group descriptors, inode tables and
  // directories on the way: a handful, not the image.
  CHECK(fetched >= 1);
  CHECK(fetched <= 12);
  CHECK(fetched * 3 < stored_chunks);
}

TEST_CASE(
    "mount: a mountpoint through another user's planted symlink or directory is refused, "
    "nothing covered",
    "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountlink");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 7, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  // Root's own directories, and where another user may plant names: a sticky 1777 directory
  // (as /tmp) and a directory of that user's.
  for (const char* dir : {"secret", "secret2", "pub", "theirs"})
    fs::create_directory(tmp / dir);
  ::chmod((tmp / "secret").c_str(), 0700);
  std::ofstream(tmp / "secret/important") << "keep me visible\n";
  ::chmod((tmp / "pub").c_str(), 01777);
  REQUIRE(::chown((tmp / "theirs").c_str(), 65534, 65534) == 0);
  PlantLink(tmp / "secret", tmp / "pub/backups");
  PlantLink(tmp / "secret2", tmp / "theirs/lnk");
  fs::create_directory(tmp / "theirs/dir");      // root's name in their directory
  fs::create_directory(tmp / "pub/theirs-mnt");  // their directory in the sticky one
  REQUIRE(::chown((tmp / "pub/theirs-mnt").c_str(), 65534, 65534) == 0);
  NoMountLeft cleanup(
      {tmp / "secret", tmp / "secret2", tmp / "theirs/dir", tmp / "pub/theirs-mnt"});

  const RunResult sticky = repo.Wb({"mount", tmp / "pub/backups", "--background"});
  CheckOneLineError(sticky, 2, "is a symlink owned by uid 65534");
  CHECK(sticky.err.find("Nothing was mounted") != std::string::npos);
  CHECK_FALSE(MountedOn(tmp / "secret"));
  CHECK(fs::exists(tmp / "secret/important"));

  const RunResult owned = repo.Wb({"mount", tmp / "theirs/lnk", "--background"});
  CheckOneLineError(owned, 2, "owned by uid 65534");
  CHECK_FALSE(MountedOn(tmp / "secret2"));
  const RunResult inside = repo.Wb({"mount", tmp / "theirs/dir", "--background"});
  CheckOneLineError(inside, 2, "owned by uid 65534");
  CHECK_FALSE(MountedOn(tmp / "theirs/dir"));
  const RunResult their_dir = repo.Wb({"mount", tmp / "pub/theirs-mnt", "--background"});
  CheckOneLineError(their_dir, 2, "owned by uid 65534");
  CHECK_FALSE(MountedOn(tmp / "pub/theirs-mnt"));

  // Root's own link in root's directory is followed: the mount is on its target.
  fs::create_directory(tmp / "mnt");
  fs::create_directory_symlink(tmp / "mnt", tmp / "mine");
  {
    FuseMount mounted(repo, tmp / "mine/");
    INFO(mounted.log());
    REQUIRE(mounted.ready());
    CHECK(MountedOn(tmp / "mnt"));
    CHECK(SameFile(tmp / "mnt/1/disk.img", tmp / "a.img"));
    CHECK(mounted.Signal(SIGTERM) == 0);  // unmounts the directory it mounted on
  }
  CHECK_FALSE(MountedOn(tmp / "mnt"));
}

TEST_CASE(
    "mount: a mountpoint in or over a repository, the trust anchors or a key's directory "
    "is refused, nothing mounted",
    "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountguard");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 8, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  // Another repository this client knows, and one it does not (copied: no anchor names it).
  fs::create_directory(tmp / "other");
  const std::string other = tmp / "other/repo";
  repo.Ok({"init", other, "--key-file", repo.key()});
  repo.Ok({"snapshots", "--repo", other});
  REQUIRE(Run({"cp", "-a", repo.path(), tmp / "copy"}).exit_code == 0);
  std::string prefix;
  for (const auto& e : fs::directory_iterator(repo.path() + "/packs"))
    if (e.is_directory()) prefix = e.path().string();
  REQUIRE(!prefix.empty());
  fs::create_directory(tmp / "keys");
  fs::copy_file(repo.key(), tmp / "keys/k.key");
  ::chmod((tmp / "keys/k.key").c_str(), 0600);
  const char* anchors = std::getenv("WANBACKUP_SECURITY_DIR");
  REQUIRE(anchors != nullptr);

  const std::vector<std::pair<std::string, std::string>> refused = {
      {repo.path(), "repository"},
      {repo.path() + "/packs", "repository"},
      {prefix, "repository"},
      {repo.path() + "/readers", "repository"},
      {tmp / "copy/packs", "repository"},
      {tmp.path(), "the repository it serves"},
      {tmp / "other", "holds repository "},
      {anchors, "trust anchor directory"},
  };
  std::vector<std::string> dirs = {tmp / "keys"};
  for (const auto& [dir, says] : refused)
    dirs.push_back(fs::canonical(dir).string());
  NoMountLeft cleanup(dirs);
  const auto before = TreeContents(repo.path());
  for (const auto& [dir, says] : refused) {
    INFO(dir);
    const RunResult r = repo.Wb({"mount", dir, "--background"});
    CheckOneLineError(r, 2, says);
    CHECK(r.err.find("Nothing was mounted") != std::string::npos);
    CHECK_FALSE(MountedOn(fs::canonical(dir).string()));
  }
  const RunResult key_dir = repo.Wb({"mount", tmp / "keys", "--background"}, "",
                                    {{"WANBACKUP_KEY_FILE", tmp / "keys/k.key"}});
  CheckOneLineError(key_dir, 2, "credential file");
  CHECK_FALSE(MountedOn(tmp / "keys"));
  // Nothing was left in the repository but its lock's last holder.
  auto after = TreeContents(repo.path());
  after[repo.path() + "/lock"] = before.at(repo.path() + "/lock");
  CHECK(after == before);
  repo.Ok({"snapshots"});
}

TEST_CASE(
    "mount: a mountpoint over what the job config names (its file, a key, a job's source or "
    "replica directory) is refused, nothing mounted",
    "[mount][integration]") {
  if (const std::string why = FuseMissing(); !why.empty()) WB_SKIP(why);
  TempDir tmp("mountconfig");
  RepoCli repo(tmp);
  repo.Ok({"init", "--key-file", repo.key()});
  WriteNoiseImage(tmp / "a.img", 9, 2);
  repo.Ok({"snapshot", tmp / "a.img"});
  for (const char* dir : {"etc", "vm", "standby", "jobkeys"})
    fs::create_directory(tmp / dir);
  std::ofstream(tmp / "vm/disk.img") << "the job's source";
  fs::copy_file(repo.key(), tmp / "jobkeys/job.key");
  ::chmod((tmp / "jobkeys/job.key").c_str(), 0600);
  const std::string config = tmp / "etc/wanbackup.toml";
  std::ofstream(config) << "[repositories.main]\npath = \"" << repo.path() << "\"\nkey_file = \""
                        << tmp / "jobkeys/job.key"
                        << "\"\n\n[jobs.vm]\nrepository = \"main\"\n"
                        << "source = \"" << tmp / "vm/disk.img"
                        << "\"\nreplicate_to = [\"" << tmp / "standby/replica.img"
                        << "\"]\n";
  ::chmod(config.c_str(), 0600);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {tmp / "etc", "holds the config file " + config},
      {tmp / "vm", "holds the source of job vm"},
      {tmp / "standby", "holds a replica of job vm"},
      {tmp / "jobkeys", "holds the key_file of repository main"},
  };
  std::vector<std::string> dirs;
  for (const auto& [dir, says] : refused)
    dirs.push_back(dir);
  NoMountLeft cleanup(dirs);
  for (const auto& [dir, says] : refused) {
    INFO(dir);
    // Named by --config, or by $WANBACKUP_CONFIG as the timers' runs name it.
    CheckOneLineError(repo.Wb({"mount", dir, "--background", "--config", config}), 2, says);
    CheckOneLineError(repo.Wb({"mount", dir, "--background"}, "", {{"WANBACKUP_CONFIG", config}}),
                      2, says);
    CHECK_FALSE(MountedOn(dir));
  }
  CHECK(FileContents(tmp / "vm/disk.img") == "the job's source");
  // A config named that does not load is an error, not a mount without its checks.
  CheckOneLineError(
      repo.Wb({"mount", tmp / "standby", "--background", "--config", tmp / "etc/missing.toml"}), 6,
      "--config");
  CHECK_FALSE(MountedOn(tmp / "standby"));
}

}  // namespace wanbackup::testing
