// The write guard through the real binary (docs/threat-model.md, "Write targets"): every
// command that writes refuses a repository's files, another job's source and a recorded
// replica, by identity (symlinks, hard links, ./ and ..), exit 2, nothing written. The rules
// one by one: unit/write_guard_test.cpp.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

// A repository with one snapshot of dir/disk.img, and the aliases of one of its files.
struct GuardRepo {
  TempDir dir{"write-guard"};
  RepoCli repo{dir};
  std::string image = dir / "disk.img";
  GuardRepo() {
    repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
    WriteNoiseImage(image, 1, 4);
    repo.Ok({"snapshot", image});
  }
  // One pack of the repository.
  std::string Pack() const {
    for (const auto& e : std::filesystem::recursive_directory_iterator(repo.path() + "/packs")) {
      if (e.is_regular_file()) return e.path().string();
    }
    FAIL("no pack in " << repo.path());
    return "";
  }
  // `file` itself, a symlink to it, a hard link to it, and spellings through ./ and ..
  std::vector<std::string> Aliases(const std::string& file, const std::string& label) const {
    const std::string sym = dir / (label + ".symlink"), hard = dir / (label + ".hardlink");
    REQUIRE(::symlink(file.c_str(), sym.c_str()) == 0);
    REQUIRE(::link(file.c_str(), hard.c_str()) == 0);
    const std::filesystem::path p(file);
    return {file, sym, hard, p.parent_path().string() + "/./" + p.filename().string(),
            p.parent_path().string() + "/../" + p.parent_path().filename().string() + "/" +
                p.filename().string()};
  }
  // Every file of the repository and the image, except the lock (it names its last holder).
  std::map<std::string, std::string> State() const {
    std::map<std::string, std::string> all = TreeContents(repo.path());
    all.erase(repo.path() + "/lock");
    all[image] = FileContents(image);
    return all;
  }
};

// Refused as a usage error (exit 2), in one line that says `says`.
void GuardRefused(const RunResult& r, const std::string& says) {
  CheckOneLineError(r, 2, says);
}

TEST_CASE("write guard: replicate to the repository's config.json is refused and it is intact",
          "[guard]") {
  GuardRepo s;
  const auto before = s.State();
  for (const std::string& to : s.Aliases(s.repo.path() + "/config.json", "config")) {
    INFO(to);
    GuardRefused(s.repo.Wb({"replicate", "latest", "--to", to, "--repo", s.repo.path()}),
                 "is a file of repository " + s.repo.path());
  }
  CHECK(s.State() == before);
  s.repo.Ok({"restore", "latest", "--to", s.dir / "back.img"});  // it still opens
  CHECK(SameFile(s.dir / "back.img", s.image));
}

TEST_CASE("write guard: restore --force over the catalog or a pack is refused and both are intact",
          "[guard]") {
  GuardRepo s;
  const auto before = s.State();
  std::vector<std::string> targets = s.Aliases(s.repo.catalog(), "catalog");
  for (const std::string& alias : s.Aliases(s.Pack(), "pack"))
    targets.push_back(alias);
  targets.push_back(s.repo.path() + "/packs/new.img");  // a new file inside it
  for (const std::string& to : targets) {
    INFO(to);
    GuardRefused(s.repo.Wb({"restore", "1", "--to", to, "--force"}),
                 "is a file of repository " + s.repo.path());
  }
  CHECK(s.State() == before);
  CHECK(!std::filesystem::exists(s.repo.path() + "/packs/new.img"));
  s.repo.Ok({"verify"});
}

TEST_CASE(
    "write guard: a job that replicates to another job's source, in another repository, is "
    "refused by run and by run --dry-run",
    "[guard]") {
  GuardRepo s;
  const std::string other_repo = s.dir / "other-repo", other_key = s.dir / "other.key";
  s.repo.Ok({"init", other_repo, "--key-file", other_key, "--chunk-size", "64K"});
  const std::string production = s.dir / "production.img";
  WriteNoiseImage(production, 2, 4);
  const std::string kept = FileContents(production);
  const std::string config = s.dir / "wanbackup.toml";
  for (const std::string& to : s.Aliases(production, "production")) {
    INFO(to);
    std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path()
                          << "\"\nkey_file = \"" << s.repo.key() << "\"\n"
                          << "[repositories.other]\npath = \"" << other_repo << "\"\nkey_file = \""
                          << other_key << "\"\n\n"
                          << "[jobs.disk]\nrepository = \"main\"\nsource = \"" << s.image
                          << "\"\nreplicate_to = [\"" << to << "\"]\n\n"
                          << "[jobs.production]\nrepository = \"other\"\nsource = \"" << production
                          << "\"\n";
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
    GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}),
                 "is the source of job production");
    GuardRefused(s.repo.Wb({"run", "disk", "--config", config}), "is the source of job production");
  }
  CHECK(FileContents(production) == kept);
}

TEST_CASE("write guard: a job that replicates into a repository of its config is refused",
          "[guard]") {
  GuardRepo s;
  const std::string config = s.dir / "wanbackup.toml";
  std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path() << "\"\nkey_file = \""
                        << s.repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << s.image << "\"\nreplicate_to = [\"" << s.repo.path()
                        << "/./catalog.db\"]\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  const auto before = s.State();
  GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}),
               "is a file of repository " + s.repo.path());
  GuardRefused(s.repo.Wb({"run", "disk", "--config", config}),
               "is a file of repository " + s.repo.path());
  CHECK(s.State() == before);
  // A ./ alias of the job's own source: the dry run refuses what the run refuses.
  std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path() << "\"\nkey_file = \""
                        << s.repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << s.image << "\"\nreplicate_to = [\"" << s.dir.path()
                        << "/./disk.img\"]\n";
  GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}),
               "is the source of job disk");
  CHECK(s.State() == before);
}

TEST_CASE(
    "write guard: a metrics textfile over a repository's file, a source, the config, a key file "
    "or a replica is refused by run and run --dry-run",
    "[guard]") {
  GuardRepo s;
  const std::string other_repo = s.dir / "other-repo", other_key = s.dir / "other.key";
  s.repo.Ok({"init", other_repo, "--key-file", other_key, "--chunk-size", "64K"});
  const std::string production = s.dir / "production.img", standby = s.dir / "standby.img";
  WriteNoiseImage(production, 2, 4);
  const std::string config = s.dir / "wanbackup.toml";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {s.repo.path() + "/config.json", "is a file of repository " + s.repo.path()},
      {other_repo + "/catalog.db", "is a file of repository " + other_repo},
      {s.dir / "./production.img", "is the source of job production"},
      {config, "is this config file"},
      {other_key, "is the key_file of repository other"},
      {standby, "is a replica of job disk (replicate_to)"},
      {std::string(std::getenv("WANBACKUP_SECURITY_DIR")) + "/wanbackup.prom",
       "is a file of the trust anchor directory"},
  };
  auto state = [&] {
    std::map<std::string, std::string> all = TreeContents(s.repo.path());
    all.erase(s.repo.path() + "/lock");
    for (const auto& [file, data] : TreeContents(other_repo))
      all[file] = data;
    for (const std::string& file : {s.image, production, other_key})
      all[file] = FileContents(file);
    return all;
  };
  const auto before = state();
  for (const auto& [textfile, says] : cases) {
    INFO(textfile);
    std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path()
                          << "\"\nkey_file = \"" << s.repo.key() << "\"\n"
                          << "[repositories.other]\npath = \"" << other_repo << "\"\nkey_file = \""
                          << other_key << "\"\n\n"
                          << "[jobs.disk]\nrepository = \"main\"\nsource = \"" << s.image
                          << "\"\nreplicate_to = [\"" << standby << "\"]\n\n"
                          << "[jobs.production]\nrepository = \"other\"\nsource = \"" << production
                          << "\"\n\n[metrics]\ntextfile = \"" << textfile << "\"\n";
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
    const std::string kept = FileContents(config);
    std::string expected = "metrics.textfile: '";
    expected += textfile;
    expected += "' ";
    expected += says;
    GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}), expected);
    if (textfile == cases[0].first) {  // the run loads the file as the dry run does
      GuardRefused(s.repo.Wb({"run", "disk", "--config", config}), says);
    }
    CHECK(FileContents(config) == kept);
  }
  CHECK(state() == before);
  CHECK(!std::filesystem::exists(standby));
}

TEST_CASE(
    "write guard: restore --overwrite-source rolls back only the restored snapshot's own source, "
    "never another series' source",
    "[guard]") {
  GuardRepo s;
  const std::string other = s.dir / "other.img";
  WriteNoiseImage(other, 5, 4);
  s.repo.Ok({"snapshot", other});  // snapshot 2, another series
  const auto before = s.State();
  const std::string kept = FileContents(other);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", other, "--force", "--overwrite-source"}),
               "is the source of snapshot 2; --overwrite-source rolls back only the restored "
               "snapshot's own source");
  CHECK(FileContents(other) == kept);
  CHECK(s.State() == before);
  WriteNoiseImage(s.image, 6, 4);  // snapshot 1's own disk, changed since: rolled back
  s.repo.Ok({"restore", "1", "--to", s.image, "--force", "--overwrite-source"});
  WriteNoiseImage(s.dir / "original.img", 1, 4);
  CHECK(SameFile(s.image, s.dir / "original.img"));
}

// wanbackup `args`, its standard output opened read-write on `file` without truncating it
// (`1<>file`), as a shell user would.
RunResult WithStdoutOn(const RepoCli& repo, const std::string& file,
                       std::vector<std::string> args) {
  std::vector<std::string> argv = {"sh", "-c", "exec \"$@\" 1<>\"$WB_STDOUT\"", "sh",
                                   WB_WANBACKUP_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.env = {
      {"WANBACKUP_REPO", repo.path()}, {"WANBACKUP_KEY_FILE", repo.key()}, {"WB_STDOUT", file}};
  return Run(argv, o);
}

TEST_CASE(
    "write guard: --to - and copy to - refuse a standard output opened on a source or a "
    "repository file",
    "[guard]") {
  GuardRepo s;
  const auto before = s.State();
  GuardRefused(WithStdoutOn(s.repo, s.image, {"restore", "1", "--to", "-"}),
               "standard output is the source of snapshot 1");
  GuardRefused(WithStdoutOn(s.repo, s.repo.catalog(), {"restore", "1", "--to", "-"}),
               "standard output is a file of repository " + s.repo.path());
  GuardRefused(WithStdoutOn(s.repo, s.image, {"copy", s.image, "-"}),
               "standard output is the source of this copy");
  CHECK(s.State() == before);
  // A file that is none of those is written.
  const std::string out = s.dir / "out.img";
  std::ofstream(out).put('x');
  const RunResult r = WithStdoutOn(s.repo, out, {"restore", "1", "--to", "-"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(SameFile(out, s.image));
}

TEST_CASE(
    "write guard: a repository no command names is known by its files: restore, replicate and "
    "copy refuse it",
    "[guard]") {
  GuardRepo s;
  const std::string other = s.dir / "other-repo";
  s.repo.Ok({"init", other, "--key-file", s.dir / "other.key", "--chunk-size", "64K"});
  const std::map<std::string, std::string> kept = TreeContents(other);
  const std::vector<std::vector<std::string>> commands = {
      {"restore", "1", "--to", other + "/config.json", "--force"},
      {"replicate", "latest", "--to", other + "/catalog.db"},
      {"copy", s.image, other + "/config.json", "--force"},
      {"copy", s.image, other + "/packs/new.img"},
  };
  for (const std::vector<std::string>& args : commands) {
    INFO(args[0] << " " << args[args[0] == "copy" ? 2 : 3]);
    GuardRefused(s.repo.Wb(args), "is a file of repository " + other);
  }
  GuardRefused(WithStdoutOn(s.repo, other + "/config.json", {"copy", s.image, "-"}),
               "standard output is a file of repository " + other);
  CHECK(TreeContents(other) == kept);
  CHECK(!std::filesystem::exists(other + "/packs/new.img"));
}

// A loop device on a file for the length of a test; empty path() when none can be attached.
struct Loop {
  std::string device;
  explicit Loop(const std::string& file) {
    const RunResult r = Run({"losetup", "--find", "--show", file});
    if (r.exit_code == 0) device = r.out.substr(0, r.out.find('\n'));
  }
  ~Loop() {
    if (!device.empty()) Run({"losetup", "-d", device});
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
};

TEST_CASE(
    "write guard: a loop device on a snapshot's source, a job's source or a repository file is "
    "refused as that file",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  GuardRepo s;
  const Loop on_source(s.image), on_catalog(s.repo.catalog());
  if (on_source.device.empty() || on_catalog.device.empty()) WB_SKIP("no loop device here");
  const auto before = s.State();
  GuardRefused(
      s.repo.Wb({"restore", "1", "--to", on_source.device, "--force"}),
      on_source.device + " (a loop device on " + s.image + ") is the source of snapshot 1");
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", on_source.device}),
               "(a loop device on " + s.image + ") is the source of snapshot 1");
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", on_catalog.device}),
               "is a file of repository " + s.repo.path());
  const std::string config = s.dir / "wanbackup.toml";
  const std::string production = s.dir / "production.img";
  WriteNoiseImage(production, 2, 4);
  const Loop on_production(production);
  REQUIRE(!on_production.device.empty());
  std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path() << "\"\nkey_file = \""
                        << s.repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                        << s.image << "\"\nreplicate_to = [\"" << on_production.device
                        << "\"]\n\n[jobs.production]\nrepository = \"main\"\nsource = \""
                        << production << "\"\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}),
               "(a loop device on " + production + ") is the source of job production");
  CHECK(s.State() == before);
}

TEST_CASE(
    "write guard: a loop device that another loop device is stacked on is refused, as that "
    "device's backing file is",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  GuardRepo s;
  const std::string image = s.dir / "fs.img";
  WriteNoiseImage(image, 5, 4);
  const Loop lower(image);
  if (lower.device.empty()) WB_SKIP("no loop device here");
  const Loop upper(lower.device);  // what a filesystem would be mounted from
  REQUIRE(!upper.device.empty());
  const std::string before = FileContents(image);
  const std::string says = lower.device + " is the device under " + upper.device;
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", lower.device, "--force"}), says);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", lower.device, "--force"}), says);
  GuardRefused(s.repo.Wb({"copy", s.image, lower.device, "--force"}), says);
  CHECK(FileContents(image) == before);
}

TEST_CASE("write guard: a disk with a loop device stacked on one of its partitions is refused",
          "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  if (Run({"sh", "-c", "command -v parted"}).exit_code != 0) WB_SKIP("no parted");
  GuardRepo s;
  const std::string image = s.dir / "partitioned.img";
  WriteNoiseImage(image, 6, 64);  // 4 MiB
  REQUIRE(Run({"parted", "-s", image, "mklabel", "msdos", "mkpart", "primary", "1MiB", "3MiB"})
              .exit_code == 0);
  // The disk with its partitions (devtmpfs makes /dev/loopNp1), and a loop device on p1.
  const RunResult attached = Run({"losetup", "--find", "--show", "--partscan", image});
  if (attached.exit_code != 0) WB_SKIP("no loop device here");
  struct Detach {
    std::string device;
    ~Detach() { Run({"losetup", "-d", device}); }
  } disk{attached.out.substr(0, attached.out.find('\n'))};
  // The partition's node: /dev/loopNp1 where devtmpfs made one, else made here from sysfs (no
  // udev on the test machines).
  const std::string name = disk.device.substr(disk.device.rfind('/') + 1);
  const std::string sys = "/sys/block/" + name + "/" + name + "p1/dev";
  if (!std::filesystem::exists(sys)) Run({"partx", "-a", disk.device});
  unsigned major_number = 0, minor_number = 0;
  std::string partition = disk.device + "p1";
  if (!std::filesystem::exists(partition)) {
    if (std::sscanf(FileContents(sys).c_str(), "%u:%u", &major_number, &minor_number) != 2) {
      WB_SKIP("no partition of " + disk.device + " in sysfs");
    }
    partition = s.dir / "p1";
    REQUIRE(::mknod(partition.c_str(), S_IFBLK | 0600, ::makedev(major_number, minor_number)) == 0);
  }
  const Loop upper(partition);
  REQUIRE(!upper.device.empty());
  const std::string before = FileContents(image);
  const std::string says = disk.device + " is the device under " + upper.device;
  GuardRefused(s.repo.Wb({"copy", s.image, disk.device, "--force"}), says);
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", disk.device, "--force"}), says);
  CHECK(FileContents(image) == before);
}

TEST_CASE(
    "write guard: a loop device on a file of a repository no command names is refused as that "
    "file",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  GuardRepo s;
  const std::string other = s.dir / "other-repo";
  s.repo.Ok({"init", other, "--key-file", s.dir / "other.key", "--chunk-size", "64K"});
  const Loop on_other(other + "/catalog.db");
  if (on_other.device.empty()) WB_SKIP("no loop device here");
  const std::map<std::string, std::string> kept = TreeContents(other);
  const std::string says =
      "(a loop device on " + other + "/catalog.db) is a file of repository " + other;
  GuardRefused(s.repo.Wb({"copy", s.image, on_other.device}), says);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", on_other.device, "--force"}), says);
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", on_other.device, "--force"}), says);
  CHECK(TreeContents(other) == kept);
}

TEST_CASE(
    "write guard: a file bind-mounted over another path is known as the repository file it is",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root to bind-mount");
  GuardRepo s;
  const std::string over = s.dir / "innocent.img";
  std::ofstream(over).put('x');
  const std::string config_json = s.repo.path() + "/config.json";
  if (Run({"mount", "--bind", config_json, over}).exit_code != 0) WB_SKIP("cannot bind-mount here");
  const auto before = s.State();
  const RunResult replicate = s.repo.Wb({"replicate", "1", "--to", over});
  const RunResult restore = s.repo.Wb({"restore", "1", "--to", over, "--force"});
  Run({"umount", over});
  GuardRefused(replicate, over + " is a file of repository " + s.repo.path());
  GuardRefused(restore, over + " is a file of repository " + s.repo.path());
  CHECK(s.State() == before);
}

// Records a replica at `url` in the catalog, as a replicate to that LUN would have.
void RecordLunReplica(const std::string& catalog, const std::string& url) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(catalog.c_str(), &db) == SQLITE_OK);
  const std::string sql =
      "INSERT INTO replicas (identity, target, snapshot_id, updated) VALUES "
      "('iscsi:iqn.2001-05.com.example:standby/1:naa.600', '" +
      url + "', 1, 0)";
  CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

TEST_CASE(
    "write guard: restore onto a recorded LUN replica is refused before any login, however the "
    "host is spelled",
    "[guard]") {
  GuardRepo s;
  // Nothing listens on port 1: a command that tried to log in would fail unreachable (exit 4).
  RecordLunReplica(s.repo.catalog(), "iscsi://127.0.0.1:1/iqn.2001-05.com.example:standby/1");
  GuardRefused(
      s.repo.Wb({"restore", "1", "--to", "iscsi://localhost:1/iqn.2001-05.com.example:standby/1"}),
      "is replica 1 of repository " + s.repo.path());
  // copy has no repository, but the same guard: a LUN never is its own source.
  GuardRefused(s.repo.Wb({"copy", "iscsi://localhost:1/iqn.2001-05.com.example:standby/1",
                          "iscsi://127.0.0.1:1/iqn.2001-05.com.example:standby/1"}),
               "is the source of this copy");
}

TEST_CASE("write guard: replicate onto a replica of another source's snapshots is refused",
          "[guard]") {
  GuardRepo s;
  const std::string standby = s.dir / "standby.img";
  s.repo.Ok({"replicate", "1", "--to", standby});
  const std::string other = s.dir / "other.img";
  WriteNoiseImage(other, 3, 4);
  s.repo.Ok({"snapshot", other});  // snapshot 2, another series
  const std::string held = FileContents(standby);
  GuardRefused(s.repo.Wb({"replicate", "2", "--to", standby}), "is replica 1 of repository");
  CHECK(FileContents(standby) == held);
  WriteNoiseImage(s.image, 4, 4);
  s.repo.Ok({"snapshot", s.image});  // snapshot 3, the replica's own series
  s.repo.Ok({"replicate", "3", "--to", standby});
  CHECK(SameFile(standby, s.image));
}

TEST_CASE(
    "write guard: a disk another repository this client opened backs up is refused by copy, "
    "restore and replicate",
    "[guard]") {
  GuardRepo s;  // its snapshot 1 is of s.image
  const std::string other = s.dir / "other-repo", other_key = s.dir / "other.key";
  s.repo.Ok({"init", other, "--key-file", other_key, "--chunk-size", "64K"});
  const std::string disk = s.dir / "other-disk.img";
  WriteNoiseImage(disk, 7, 4);
  s.repo.Ok({"snapshot", disk, "--repo", other, "--key-file", other_key});
  const auto before = s.State();
  const std::string held = FileContents(disk);
  // copy names no repository, restore and replicate name the first: other's disk is refused.
  const std::string says = " is the source of snapshot 1 of repository " + other;
  GuardRefused(s.repo.Wb({"copy", s.image, disk, "--force"}), disk + says);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", disk, "--force"}), disk + says);
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", disk, "--force"}), disk + says);
  CHECK(FileContents(disk) == held);
  GuardRefused(s.repo.Wb({"copy", disk, s.image, "--force"}),
               s.image + " is the source of snapshot 1 of repository " + s.repo.path());
  CHECK(s.State() == before);
}

TEST_CASE(
    "write guard: the key file in use, the trust anchors and a job's config and credential files "
    "are refused as destinations",
    "[guard]") {
  GuardRepo s;
  const auto before = s.State();
  const std::string key_held = FileContents(s.repo.key());
  GuardRefused(s.repo.Wb({"restore", "1", "--to", s.repo.key(), "--force"}),
               s.repo.key() + " is a credential file this command uses");
  GuardRefused(s.repo.Wb({"replicate", "1", "--to", s.repo.key(), "--force"}),
               "is a credential file this command uses");
  GuardRefused(s.repo.Wb({"copy", s.image, s.repo.key(), "--force"}),
               "is a credential file this command uses");
  const char* anchors = std::getenv("WANBACKUP_SECURITY_DIR");
  REQUIRE(anchors != nullptr);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", std::string(anchors) + "/x.img"}),
               "is a file of the trust anchor directory " + std::string(anchors));
  CHECK(FileContents(s.repo.key()) == key_held);
  const std::string config = s.dir / "wanbackup.toml";
  for (const std::string& to : {s.repo.key(), config}) {
    INFO(to);
    std::ofstream(config) << "[repositories.main]\npath = \"" << s.repo.path()
                          << "\"\nkey_file = \"" << s.repo.key()
                          << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \"" << s.image
                          << "\"\nreplicate_to = [\"" << to << "\"]\n";
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
    GuardRefused(s.repo.Wb({"run", "disk", "--dry-run", "--config", config}),
                 to == config ? "is this config file" : "is the key_file of repository main");
  }
  CHECK(s.State() == before);
}

TEST_CASE(
    "write guard: a hard link elsewhere to a file of a repository nobody names is known by what "
    "it holds",
    "[guard]") {
  GuardRepo s;
  // Made under other trust anchors: this client knows nothing of it.
  const std::string other = s.dir / "unknown-repo", other_key = s.dir / "unknown.key";
  const std::map<std::string, std::string> elsewhere = {
      {"WANBACKUP_SECURITY_DIR", s.dir / "elsewhere"}};
  s.repo.Ok({"init", other, "--key-file", other_key, "--chunk-size", "64K"}, "", elsewhere);
  s.repo.Ok({"snapshot", s.image, "--repo", other, "--key-file", other_key}, "", elsewhere);
  std::string pack;
  for (const auto& e : std::filesystem::recursive_directory_iterator(other + "/packs")) {
    if (e.is_regular_file()) pack = e.path().string();
  }
  REQUIRE(!pack.empty());
  const std::map<std::string, std::string> kept = TreeContents(other);
  const std::vector<std::pair<std::string, std::string>> files = {
      {other + "/config.json", "config.json"},
      {other + "/catalog.db", "catalog.db"},
      {pack, "a pack"}};
  for (const auto& [file, what] : files) {
    const std::string link = s.dir / ("link-" + std::filesystem::path(file).filename().string());
    REQUIRE(::link(file.c_str(), link.c_str()) == 0);
    INFO(link);
    const std::string says = " is a file of a wanbackup repository (by its content: " + what;
    GuardRefused(s.repo.Wb({"replicate", "1", "--to", link, "--force"}), link + says);
    GuardRefused(s.repo.Wb({"restore", "1", "--to", link, "--force"}), "(by its content: " + what);
  }
  CHECK(TreeContents(other) == kept);
}

TEST_CASE(
    "write guard: a loop device that is a source protects its backing file, and a missing device "
    "name is no new file in /dev",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  GuardRepo s;
  const std::string disk = s.dir / "looped.img";
  WriteNoiseImage(disk, 8, 4);
  const Loop loop(disk);
  if (loop.device.empty()) WB_SKIP("no loop device here");
  s.repo.Ok({"snapshot", loop.device});  // snapshot 2, of the loop device
  const std::string held = FileContents(disk);
  GuardRefused(s.repo.Wb({"restore", "1", "--to", disk, "--force"}),
               disk + " is the source of snapshot 2 (" + loop.device + ", a loop device on it)");
  GuardRefused(s.repo.Wb({"copy", s.image, disk, "--force"}), "a loop device on it");
  CHECK(FileContents(disk) == held);
  const std::string missing = "/dev/wanbackup-test-no-such-disk";
  GuardRefused(s.repo.Wb({"restore", "1", "--to", missing, "--force"}),
               missing + " does not exist, and a new file among the devices is no disk");
  CHECK(!std::filesystem::exists(missing));
}

TEST_CASE(
    "write guard: a loop device's backing file, a loop device stacked on another and a path too "
    "long to examine are refused",
    "[guard]") {
  if (::geteuid() != 0) WB_SKIP("needs root for loop devices");
  GuardRepo s;
  const auto before = s.State();
  // A disk image served by a loop device (mounted, say): written behind its back, never.
  const std::string served = s.dir / "served.img";
  WriteNoiseImage(served, 9, 2);
  const std::string served_bytes = FileContents(served);
  const Loop serving(served);
  if (serving.device.empty()) WB_SKIP("no loop device here");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"replicate", "1", "--to", served, "--force"},
        std::vector<std::string>{"restore", "1", "--to", served, "--force"},
        std::vector<std::string>{"copy", s.image, served, "--force"}}) {
    INFO(args[0]);
    GuardRefused(s.repo.Wb(args), served + " is the backing file of " + serving.device +
                                      ": written behind that device's back");
  }
  CHECK(FileContents(served) == served_bytes);
  // A loop device on a loop device on the repository's pack: refused as the pack.
  const std::string pack = s.Pack();
  const Loop inner(pack);
  REQUIRE(!inner.device.empty());
  const Loop outer(inner.device);
  REQUIRE(!outer.device.empty());
  GuardRefused(
      s.repo.Wb({"restore", "1", "--to", outer.device, "--force"}),
      outer.device + " (a loop device on " + pack + ") is a file of repository " + s.repo.path());
  // A destination longer than a path may be: it cannot be identified, so it is not written.
  std::string padded;
  for (int i = 0; i < 2100; ++i)
    padded += "./";
  GuardRefused(s.repo.Wb({"restore", "1", "--to", padded + s.repo.catalog(), "--force"}),
               "cannot be examined (File name too long)");
  CHECK(s.State() == before);
}

TEST_CASE("write guard: /dev/stdout on a deleted file is refused, not made anew", "[guard]") {
  GuardRepo s;
  const std::string out = s.dir / "deleted.img";
  RunOptions o;
  o.env = {
      {"WANBACKUP_REPO", s.repo.path()}, {"WANBACKUP_KEY_FILE", s.repo.key()}, {"WB_OUT", out}};
  const RunResult r = Run({"sh", "-c", "exec 1>\"$WB_OUT\"; rm \"$WB_OUT\"; exec \"$@\"", "sh",
                           WB_WANBACKUP_BIN, "restore", "1", "--to", "/dev/stdout", "--force"},
                          o);
  GuardRefused(r, "is a file that was deleted (" + out + " (deleted))");
  CHECK(!std::filesystem::exists(out + " (deleted)"));
  CHECK(!std::filesystem::exists(out));
}

}  // namespace
TEST_CASE(
    "write guard: restore and copy refuse a character device that is no place for a disk, "
    "and write to /dev/null",
    "[guard]") {
  GuardRepo s;
  // Harmless stand-ins for /dev/mem and a SCSI generic node: /dev/zero's and /dev/full's
  // numbers, under names of our own (a write to either would not be noticed otherwise).
  const std::string zero = s.dir / "myzero", full = s.dir / "myfull";
  REQUIRE(::mknod(zero.c_str(), S_IFCHR | 0600, ::makedev(1, 5)) == 0);
  REQUIRE(::mknod(full.c_str(), S_IFCHR | 0600, ::makedev(1, 7)) == 0);
  const std::string link = s.dir / "zero.link";
  REQUIRE(::symlink(zero.c_str(), link.c_str()) == 0);
  for (const auto& [to, numbers] : std::vector<std::pair<std::string, std::string>>{
           {zero, "(1:5)"}, {full, "(1:7)"}, {link, "(1:5)"}}) {
    INFO(to);
    std::string says = to;
    says += " is a character device " + numbers;
    GuardRefused(s.repo.Wb({"restore", "1", "--to", to, "--force"}), says);
    GuardRefused(s.repo.Wb({"copy", s.image, to, "--force"}), says);
  }
  s.repo.Ok({"restore", "1", "--to", "/dev/null"});
  s.repo.Ok({"copy", s.image, "/dev/null"});
}

TEST_CASE(
    "write guard: a snapshot that only the WAL holds, while a reader keeps the catalog open, "
    "protects its source from copy and from a restore out of another repository",
    "[guard]") {
  GuardRepo s;
  TempDir other_dir{"write-guard-other"};
  RepoCli other(other_dir);
  other.Ok({"init", "--key-file", other.key(), "--chunk-size", "64K"});
  other.Ok({"snapshot", s.image});
  // A reader (a mount, a long restore) in a read transaction: SQLite cannot checkpoint past it.
  sqlite3* reader = nullptr;
  REQUIRE(sqlite3_open_v2(s.repo.catalog().c_str(), &reader, SQLITE_OPEN_READONLY, nullptr) ==
          SQLITE_OK);
  REQUIRE(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM snapshots;", nullptr, nullptr,
                       nullptr) == SQLITE_OK);
  const std::string newer = s.dir / "newer.img";
  WriteNoiseImage(newer, 1, 3);
  s.repo.Ok({"snapshot", newer});  // snapshot 2, in the WAL only
  const std::string before = FileContents(newer);
  GuardRefused(s.repo.Wb({"copy", s.image, newer, "--force"}),
               newer + " is the source of snapshot 2 of repository " + s.repo.path());
  GuardRefused(other.Wb({"restore", "1", "--to", newer, "--force"}),
               newer + " is the source of snapshot 2 of repository " + s.repo.path());
  sqlite3_exec(reader, "COMMIT;", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
  CHECK(FileContents(newer) == before);
}

TEST_CASE(
    "write guard: a trust anchor directory inside a repository is refused before anything is "
    "made there",
    "[guard]") {
  GuardRepo s;
  const std::string inside = s.repo.path() + "/packs/zz";
  const auto before = s.State();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"snapshots"}, {"snapshot", s.image}}) {
    INFO(args[0]);
    const RunResult r = s.repo.Wb(args, "", {{"WANBACKUP_SECURITY_DIR", inside}});
    CheckOneLineError(r, 5,
                      "trust anchor directory " + inside + " lies in repository " + s.repo.path());
  }
  CHECK(!std::filesystem::exists(inside));
  CHECK(s.State() == before);
}

}  // namespace wanbackup::testing
