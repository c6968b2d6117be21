// A repository nobody can write (a read-only bind mount, write-protected media, a directory
// without write permission) can be listed, verified and restored from; a command that must
// write says so in one line (issue 39). Root only: it mounts, and acts as another user.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "support/other_user.h"
#include "support/repo_cli.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

// `source` seen read-only at `at` (a bind mount, remounted ro), unmounted at the end.
class ReadOnlyView {
 public:
  ReadOnlyView(const std::string& source, const std::string& at) : at_(at) {
    REQUIRE(::mkdir(at.c_str(), 0755) == 0);
    REQUIRE(Run({"mount", "--bind", source, at}).exit_code == 0);
    mounted_ = true;
    REQUIRE(Run({"mount", "-o", "remount,ro,bind", at}).exit_code == 0);
  }
  ~ReadOnlyView() {
    if (mounted_) Run({"umount", at_});
  }
  ReadOnlyView(const ReadOnlyView&) = delete;
  ReadOnlyView& operator=(const ReadOnlyView&) = delete;

 private:
  std::string at_;
  bool mounted_ = false;
};

// A key-file repository with two snapshots of a small image.
struct TwoSnapshots {
  TempDir dir{"rorepo"};
  RepoCli repo{dir};
  std::string image = dir / "disk.img";

  TwoSnapshots() {
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      WriteNoiseImage(image, seed, 2);
      repo.Ok({"snapshot", image});
    }
  }
  // wanbackup on the repository at `path` (the view), unlocked with the key file.
  RunResult At(const std::string& path, std::vector<std::string> args) const {
    RunOptions o;
    o.env["WANBACKUP_REPO"] = path;
    o.env["WANBACKUP_KEY_FILE"] = repo.key();
    o.timeout = std::chrono::seconds(120);
    return Local(std::move(args), o);
  }
};

// Reads, verifies and restores from the read-only repository at `path`; prune is refused in one
// line. `as` runs the binary (as root, or as the other user).
void ReadsWork(const TwoSnapshots& s, const std::string& path,
               const std::function<RunResult(std::vector<std::string>)>& as,
               const std::string& out_dir) {
  const RunResult list = as({"snapshots", "--repo", path, "--json"});
  INFO(list.err);
  REQUIRE(list.exit_code == 0);
  CHECK(nlohmann::json::parse(list.out).size() == 2);
  const RunResult verify = as({"verify", "--repo", path});
  INFO(verify.err);
  CHECK(verify.exit_code == 0);
  const std::string out = out_dir + "/back.img";
  const RunResult restore = as({"restore", "latest", "--repo", path, "--to", out});
  INFO(restore.err);
  CHECK(restore.exit_code == 0);
  CHECK(SameFile(out, s.image));
  CHECK(as({"replicas", "--repo", path}).exit_code == 0);
  const RunResult prune = as({"prune", "--repo", path});
  CHECK(prune.exit_code == 5);
  CHECK(prune.err ==
        "wanbackup: error: repository " + path + " is read-only; prune needs to write to it\n");
}

}  // namespace

TEST_CASE("read-only repository: a read-only bind mount is listed, verified and restored from",
          "[readonly]") {
  if (::geteuid() != 0) WB_SKIP("needs root to mount");
  TwoSnapshots s;
  const std::string view = s.dir / "ro";
  ReadOnlyView ro(s.repo.path(), view);
  const auto before = TreeContents(s.repo.path());
  ReadsWork(
      s, view, [&](std::vector<std::string> args) { return s.At(view, std::move(args)); },
      s.dir.path());
  CHECK(TreeContents(s.repo.path()) == before);
}

TEST_CASE("read-only repository: a catalog with a leftover -wal is read with what the -wal holds",
          "[readonly]") {
  if (::geteuid() != 0) WB_SKIP("needs root to mount");
  TempDir dir{"rorepo"};
  RepoCli repo{dir};
  const std::string image = dir / "disk.img";
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  WriteNoiseImage(image, 1, 2);
  repo.Ok({"snapshot", image});
  // A reader that keeps the catalog open while the second snapshot commits, then dies: the
  // last connection to close is gone, so the -wal (holding snapshot 2) and -shm stay.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    sqlite3* db = nullptr;
    const bool ok =
        sqlite3_open_v2(repo.catalog().c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
        sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) ==
            SQLITE_OK;
    (void)!::write(ready[1], ok ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  char answer = 0;
  REQUIRE(::read(ready[0], &answer, 1) == 1);
  REQUIRE(answer == 'y');
  WriteNoiseImage(image, 2, 2);
  repo.Ok({"snapshot", image});
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  struct stat st {};
  REQUIRE(::stat((repo.catalog() + "-wal").c_str(), &st) == 0);
  REQUIRE(st.st_size > 0);

  const std::string view = dir / "ro";
  ReadOnlyView ro(repo.path(), view);
  RunOptions o;
  o.env["WANBACKUP_KEY_FILE"] = repo.key();
  const RunResult list = Local({"snapshots", "--repo", view, "--json"}, o);
  INFO(list.err);
  REQUIRE(list.exit_code == 0);
  CHECK(nlohmann::json::parse(list.out).size() == 2);
  const RunResult restore = Local({"restore", "2", "--repo", view, "--to", dir / "back.img"}, o);
  INFO(restore.err);
  CHECK(restore.exit_code == 0);
  CHECK(SameFile(dir / "back.img", image));
}

TEST_CASE("read-only repository: a directory its reader may not write is read all the same",
          "[readonly]") {
  if (!CanSwitchUser()) WB_SKIP("needs root to act as another user");
  TwoSnapshots s;
  // The other user owns the repository and its key, and may write none of it.
  REQUIRE(Run({"chown", "-R", std::to_string(kOtherUid) + ":" + std::to_string(kOtherGid),
               s.repo.path(), s.repo.key()})
              .exit_code == 0);
  REQUIRE(Run({"chmod", "-R", "a-w", s.repo.path()}).exit_code == 0);
  const std::string out_dir = s.dir / "out";
  REQUIRE(::mkdir(out_dir.c_str(), 0755) == 0);
  REQUIRE(::chown(out_dir.c_str(), kOtherUid, kOtherGid) == 0);
  // The other user's own trust anchors (each user keeps theirs): this process's are root's.
  const std::string anchors = s.dir / "their-anchors";
  REQUIRE(::mkdir(anchors.c_str(), 0700) == 0);
  REQUIRE(::chown(anchors.c_str(), kOtherUid, kOtherGid) == 0);
  // The binary as the other user can reach it: a copy when the build tree is private to root.
  std::string binary = WB_WANBACKUP_BIN;
  if (!OtherUserCanSearch(binary)) {
    binary = s.dir / "wanbackup";
    REQUIRE(std::filesystem::copy_file(WB_WANBACKUP_BIN, binary));
  }
  const auto before = TreeContents(s.repo.path());
  ReadsWork(
      s, s.repo.path(),
      [&](std::vector<std::string> args) {
        args.insert(args.begin(), binary);
        RunOptions o;
        o.env["WANBACKUP_KEY_FILE"] = s.repo.key();
        o.env["WANBACKUP_SECURITY_DIR"] = anchors;
        o.timeout = std::chrono::seconds(120);
        return Run(AsOtherUserArgv(std::move(args)), o);
      },
      out_dir);
  CHECK(TreeContents(s.repo.path()) == before);
  Run({"chmod", "-R", "u+w", s.repo.path()});  // so that TempDir can remove it
}

}  // namespace wanbackup::testing
