// A repository another user owns (a storage admin, a shared backup volume), used by root
// (docs/threat-model.md, "A repository another user can change"): that user can plant links and
// FIFOs in it. Commands that write refuse it; commands that read use it without following what
// was planted and without hanging. On the real binary; ownership is given with lchown, so the
// tests need root.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "support/other_user.h"
#include "support/repo_cli.h"
#include "support/skip.h"

namespace wanbackup::testing {
namespace {

// Gives everything under `path` (and `path`) to the other user, links themselves included.
void GiveToOtherUser(const std::string& path) {
  REQUIRE(::lchown(path.c_str(), kOtherUid, kOtherGid) == 0);
  for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
    REQUIRE(::lchown(e.path().c_str(), kOtherUid, kOtherGid) == 0);
  }
}

// A repository with one snapshot of dir/disk.img, then owned by the other user.
void OwnedRepository(const RepoCli& repo) {
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  WriteNoiseImage(repo.dir() / "disk.img", 3, 2);
  repo.Ok({"snapshot", repo.dir() / "disk.img"});
  GiveToOtherUser(repo.path());
}

// Replaces the file `path` with what `make` creates there, owned by the other user.
void Plant(const std::string& path, const std::function<bool(const char*)>& make) {
  std::filesystem::rename(path, path + ".kept");
  REQUIRE(make(path.c_str()));
  REQUIRE(::lchown(path.c_str(), kOtherUid, kOtherGid) == 0);
}

void Unplant(const std::string& path) {
  std::filesystem::remove(path);
  std::filesystem::rename(path + ".kept", path);
}

TEST_CASE(
    "storage owner: commands that write refuse a repository another user owns, reading it still "
    "works",
    "[cli]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to give files to another user");
  TempDir dir{"owned-repo"};
  RepoCli repo{dir};
  OwnedRepository(repo);
  const auto before = TreeContents(repo.path());
  const std::string owner = "owned by uid " + std::to_string(kOtherUid) + ", not root or you";
  CheckOneLineError(repo.Wb({"snapshot", dir / "disk.img"}), 5, repo.path() + ": " + owner);
  CheckOneLineError(repo.Wb({"prune"}), 5, owner);
  CheckOneLineError(repo.Wb({"repair", "catalog"}), 5, "refuses one another user can change");
  CheckOneLineError(repo.Wb({"forget", "1", "--allow-empty-source"}), 5, owner);
  CHECK(TreeContents(repo.path()) == before);
  // Reading: listed, verified and restored as it was.
  repo.Ok({"snapshots"});
  repo.Ok({"verify"});
  repo.Ok({"restore", "1", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "disk.img"));
  CHECK(TreeContents(repo.path()) == before);
  // Back to root, but packs/ writable by its group: still refused, and it says what to do.
  REQUIRE(::system(("chown -R 0:0 " + repo.path()).c_str()) == 0);
  REQUIRE(::chmod((repo.path() + "/packs").c_str(), 0770) == 0);
  CheckOneLineError(repo.Wb({"snapshot", dir / "disk.img"}), 5,
                    repo.path() + "/packs is writable by group or others (mode 0770; chmod go-w");
  REQUIRE(::chmod((repo.path() + "/packs").c_str(), 0700) == 0);
  // The same for a pack directory in it (packs/ab), writable by all or another user's.
  std::string prefix;
  for (const auto& e : std::filesystem::directory_iterator(repo.path() + "/packs")) {
    if (e.is_directory()) prefix = e.path().string();
  }
  REQUIRE(!prefix.empty());
  REQUIRE(::chmod(prefix.c_str(), 0777) == 0);
  CheckOneLineError(repo.Wb({"snapshot", dir / "disk.img"}), 5,
                    prefix + " is writable by group or others (mode 0777");
  CheckOneLineError(repo.Wb({"prune"}), 5, prefix + " is writable by group or others");
  REQUIRE(::chmod(prefix.c_str(), 0700) == 0);
  REQUIRE(::lchown(prefix.c_str(), kOtherUid, kOtherGid) == 0);
  CheckOneLineError(repo.Wb({"snapshot", dir / "disk.img"}), 5, prefix + " is " + owner);
  REQUIRE(::lchown(prefix.c_str(), 0, 0) == 0);
  repo.Ok({"snapshot", dir / "disk.img"});
}

TEST_CASE(
    "storage owner: a catalog link, a config.json FIFO, lock FIFOs and a readers link they plant "
    "are not followed, and nothing hangs",
    "[cli]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to give files to another user");
  TempDir dir{"owned-plants"};
  RepoCli repo{dir};
  OwnedRepository(repo);
  // Root's own SQLite database elsewhere, in rollback-journal mode.
  const std::string victim_db = dir / "victim.db";
  Sql(victim_db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  const std::string victim_bytes = FileContents(victim_db);
  const std::string catalog = repo.catalog();
  Plant(catalog, [&](const char* at) { return ::symlink(victim_db.c_str(), at) == 0; });
  CheckOneLineError(repo.Wb({"snapshots"}), 5, catalog + " is a symbolic link");
  CheckOneLineError(repo.Wb({"restore", "1", "--to", dir / "no.img"}), 5, "is a symbolic link");
  CHECK(FileContents(victim_db) == victim_bytes);  // not switched to WAL, not written
  CHECK(!std::filesystem::exists(dir / "no.img"));
  Unplant(catalog);

  // A FIFO as config.json or as a lock file: refused at once (a hang would time out, exit -1).
  const std::string config = repo.path() + "/config.json";
  Plant(config, [](const char* at) { return ::mkfifo(at, 0600) == 0; });
  CheckOneLineError(repo.Wb({"snapshots"}), 2, config + " is a FIFO, where a regular file belongs");
  Unplant(config);
  const std::string shared_lock = repo.path() + "/lock.shared";
  Plant(shared_lock, [](const char* at) { return ::mkfifo(at, 0600) == 0; });
  const RunResult fifo_lock = repo.Wb({"snapshots"});
  CHECK(!fifo_lock.timed_out);
  CHECK(fifo_lock.exit_code != 0);
  Unplant(shared_lock);

  // readers/ as a link to root's directory: no reader line is made there while restore runs.
  const std::string victim_dir = dir / "victim-dir";
  REQUIRE(::mkdir(victim_dir.c_str(), 0700) == 0);
  const std::string readers = repo.path() + "/readers";
  std::filesystem::remove_all(readers);
  REQUIRE(::symlink(victim_dir.c_str(), readers.c_str()) == 0);
  REQUIRE(::lchown(readers.c_str(), kOtherUid, kOtherGid) == 0);
  RunOptions o;
  o.env = {{"WANBACKUP_REPO", repo.path()},
           {"WANBACKUP_KEY_FILE", repo.key()},
           {"WANBACKUP_PAUSE", "restore.after-check"}};
  Background run({WB_WANBACKUP_BIN, "restore", "1", "--to", dir / "back.img"}, o);
  bool stopped = false;
  for (int i = 0; i < 3000 && !stopped; ++i) {
    std::ifstream stat("/proc/" + std::to_string(run.pid()) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    stopped = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T';
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(stopped);
  CHECK(std::filesystem::is_empty(victim_dir));
  run.Kill(SIGCONT);
  CHECK(run.Wait(std::chrono::seconds(120)) == 0);
  CHECK(SameFile(dir / "back.img", dir / "disk.img"));
  CHECK(std::filesystem::is_empty(victim_dir));
}

}  // namespace
}  // namespace wanbackup::testing
