// Retention and prune on real repositories (docs/operations.md, "Retention and prune"): the real
// binary on small local images with 64 KiB chunks and faked snapshot times
// ($WANBACKUP_TEST_SNAPSHOT_TIME). Also the repository locks every command takes.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"

using wanbackup::testing::Background;
using wanbackup::testing::Json;
using wanbackup::testing::RepoCli;
using wanbackup::testing::Run;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::TreeContents;

namespace {

constexpr uint64_t kChunk = 64 << 10;
constexpr size_t kChunks = 32;                 // 2 MiB images
constexpr int64_t kStart = 1699920000 + 3600;  // 2023-11-14 01:00 UTC
constexpr int64_t kStep = 8 * 3600;            // three snapshots a day

void Noise(std::string* data, size_t offset, size_t size, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < size; i += sizeof x) {  // a word at a time: the tests build at -O0
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&(*data)[offset + i], &x, std::min(sizeof x, size - i));
  }
}

// Version `v` of a changing disk: noise, then for each earlier version two chunks rewritten.
void WriteVersion(const std::string& path, int v) {
  std::string data(kChunks * kChunk, '\0');
  Noise(&data, 0, data.size(), 7);
  for (int j = 1; j <= v; ++j) {
    Noise(&data, (static_cast<size_t>(j) * 5 % kChunks) * kChunk, kChunk, 1000 + j);
    Noise(&data, (static_cast<size_t>(j) * 11 % kChunks) * kChunk, kChunk / 2, 2000 + j);
  }
  std::ofstream(path, std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::map<std::string, std::string> Env(int64_t time = 0) {
  std::map<std::string, std::string> env = {{"TZ", "UTC"}};
  if (time != 0) env["WANBACKUP_TEST_SNAPSHOT_TIME"] = std::to_string(time);
  return env;
}

// Snapshots v = 1..count of the changing disk, one per kStep; all of the same source.
void TakeVersions(const RepoCli& repo, int count) {
  for (int v = 1; v <= count; ++v) {
    WriteVersion(repo.dir() / "disk.img", v);
    repo.Ok({"snapshot", repo.dir() / "disk.img", "--json"}, "", Env(kStart + (v - 1) * kStep));
  }
}

void Init(const RepoCli& repo) {
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
}

std::set<int64_t> SnapshotIds(const RepoCli& repo) {
  std::set<int64_t> ids;
  for (const auto& s : nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out))
    ids.insert(s["id"].get<int64_t>());
  return ids;
}

uint64_t PackBytes(const std::string& repo) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo + "/packs")) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

// Snapshot id v was version v (ids are given in order from 1): each restores bit-exact.
void CheckRestores(const RepoCli& repo, const std::set<int64_t>& ids) {
  for (int64_t id : ids) {
    const std::string want = repo.dir() / "want.img", got = repo.dir() / "got.img";
    WriteVersion(want, static_cast<int>(id));
    std::filesystem::remove(got);
    repo.Ok({"restore", std::to_string(id), "--to", got});
    INFO("snapshot " << id);
    CHECK(SameFile(want, got));
  }
}

// The repository's files, but for the lock file (it names its last holder).
std::map<std::string, std::string> Files(const RepoCli& repo) {
  auto files = TreeContents(repo.path());
  files.erase(repo.path() + "/lock");
  return files;
}

RunOptions RepoEnv(const RepoCli& repo) {
  RunOptions o;
  o.env = {{"WANBACKUP_REPO", repo.path()}, {"WANBACKUP_KEY_FILE", repo.key()}};
  return o;
}

const std::set<int64_t> kKeptOf30 = {12, 15, 18, 21, 24, 27, 28, 29, 30};

}  // namespace

TEST_CASE(
    "forget: a test snapshot time in the future is refused, so no snapshot outlives retention",
    "[cli]") {
  TempDir dir("future-time");
  RepoCli repo(dir);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  WriteVersion(dir / "disk.img", 1);
  const int64_t decades = static_cast<int64_t>(std::time(nullptr)) + 20LL * 365 * 86400;
  CheckOneLineError(repo.Wb({"snapshot", dir / "disk.img"}, "", Env(decades)), 2,
                    "$WANBACKUP_TEST_SNAPSHOT_TIME is in the future");
  CHECK(repo.Ok({"snapshots", "--json"}).out.find("\"id\"") == std::string::npos);
}

TEST_CASE(
    "prune: after forget of 30 snapshots the repository is near a fresh one holding the "
    "kept snapshots, and they restore bit-exact",
    "[prune]") {
  TempDir dir("prune");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 30);
  const uint64_t before = PackBytes(repo.path());

  const auto decided =
      Json(repo.Wb({"forget", "--keep-last", "3", "--keep-daily", "7", "--json"}, "", Env()));
  std::set<int64_t> forgotten;
  for (const auto& id : decided["forgotten"])
    forgotten.insert(id.get<int64_t>());
  CHECK(forgotten.size() == 21);
  CHECK(SnapshotIds(repo) == kKeptOf30);
  CHECK(PackBytes(repo.path()) >= before);  // forget frees nothing by itself

  const auto pruned = Json(repo.Wb({"prune", "--json"}));
  CHECK(pruned["bytes_freed"].get<uint64_t>() > 0);
  const uint64_t after = PackBytes(repo.path());

  // The same snapshots, taken into a fresh repository.
  TempDir fresh_dir("prune-fresh");
  RepoCli fresh(fresh_dir);
  Init(fresh);
  for (int64_t v : kKeptOf30) {
    WriteVersion(fresh_dir / "disk.img", static_cast<int>(v));
    fresh.Ok({"snapshot", fresh_dir / "disk.img"}, "", Env(kStart + (v - 1) * kStep));
  }
  const uint64_t reference = PackBytes(fresh.path());
  const double ratio = static_cast<double>(after) / static_cast<double>(reference);
  std::printf(
      "prune: 30 snapshots %llu bytes of packs; after forget+prune %llu; a fresh "
      "repository with the 9 kept %llu (ratio %.3f)\n",
      static_cast<unsigned long long>(before), static_cast<unsigned long long>(after),
      static_cast<unsigned long long>(reference), ratio);
  CHECK(ratio <= 1.10);

  repo.Ok({"verify"});
  CheckRestores(repo, kKeptOf30);

  // A second prune has nothing left to do.
  const auto again = Json(repo.Wb({"prune", "--json"}));
  CHECK(again["packs_rewritten"] == 0);
  CHECK(again["packs_removed"] == 0);
  CHECK(again["orphan_packs"] == 0);

  // Rebuilding the catalog from the packs does not bring forgotten snapshots back.
  repo.Ok({"repair", "catalog"});
  CHECK(SnapshotIds(repo) == kKeptOf30);
  repo.Ok({"verify"});
}

TEST_CASE(
    "prune: a catalog rebuilt between forget and prune leaves the forgotten snapshots out, "
    "and new snapshots never reuse their ids",
    "[prune]") {
  TempDir dir("forget-repair");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 4);
  repo.Ok({"forget", "2", "4"});
  CHECK(SnapshotIds(repo) == std::set<int64_t>{1, 3});
  const auto rebuilt = Json(repo.Wb({"repair", "catalog", "--json"}));
  CHECK(rebuilt["snapshots"] == nlohmann::json::array({1, 3}));
  CHECK(SnapshotIds(repo) == std::set<int64_t>{1, 3});
  WriteVersion(dir / "disk.img", 5);
  CHECK(Json(repo.Wb({"snapshot", dir / "disk.img", "--json"}))["snapshot"] == 5);
  repo.Ok({"prune"});
  repo.Ok({"verify"});
  CheckRestores(repo, {1, 3, 5});
}

TEST_CASE(
    "prune: SIGKILL at random moments of prune leaves every kept snapshot restorable, and "
    "the next prune finishes the job",
    "[prune][crash]") {
  TempDir dir("prune-kill");
  RepoCli pristine(dir);
  Init(pristine);
  TakeVersions(pristine, 8);
  pristine.Ok({"forget", "--keep-last", "3"});
  const std::set<int64_t> kept = {6, 7, 8};
  // Points in the order prune passes them, each with how often it can be passed at most.
  const std::vector<std::pair<std::string, int>> points = {{"prune.after-pack-write", 40},
                                                           {"prune.before-commit", 1},
                                                           {"prune.after-commit", 1},
                                                           {"prune.after-pack-remove", 8},
                                                           {"prune.after-orphan-remove", 3}};
  std::mt19937 rng(20);
  int kills = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto& [point, most] = points[rng() % points.size()];
    const std::string spec = point + ":" + std::to_string(1 + static_cast<int>(rng() % most));
    INFO("trial " << trial << ": " << spec);
    TempDir copy_dir("prune-kill-trial");
    REQUIRE(Run({"cp", "-a", pristine.path(), copy_dir / "repo"}).exit_code == 0);
    REQUIRE(Run({"cp", "-a", pristine.key(), copy_dir / "repo.key"}).exit_code == 0);
    RepoCli repo(copy_dir);
    if (point == "prune.after-orphan-remove") {
      // Orphans to remove first: a prune killed after its new packs were written.
      const RunResult killed = repo.Wb({"prune", "--max-unused", "0"}, "",
                                       {{"WANBACKUP_FAILPOINT", "prune.before-commit"}});
      REQUIRE(killed.exit_code == -1);
    }
    const RunResult killed =
        repo.Wb({"prune", "--max-unused", "0"}, "", {{"WANBACKUP_FAILPOINT", spec}});
    INFO(killed.err);
    CHECK((killed.exit_code == -1 || killed.exit_code == 0));
    kills += killed.exit_code == -1 ? 1 : 0;
    CHECK(SnapshotIds(repo) == kept);
    repo.Ok({"verify"});
    CheckRestores(repo, kept);
    // The next prune finishes: afterwards nothing is left to remove or rewrite.
    repo.Ok({"prune", "--max-unused", "0"});
    const auto done = Json(repo.Wb({"prune", "--max-unused", "0", "--json"}));
    CHECK(done["orphan_packs"] == 0);
    CHECK(done["packs_rewritten"] == 0);
    CHECK(done["packs_removed"] == 0);
    CHECK(done["unused_bytes"] == 0);
    repo.Ok({"verify"});
  }
  std::printf("prune: %d of 20 prunes were killed (the rest passed the point fewer times)\n",
              kills);
  CHECK(kills >= 12);
}

TEST_CASE("forget: killed before or after its commit, forget happened entirely or not at all",
          "[prune][crash]") {
  for (const char* point : {"forget.before-commit", "forget.after-commit"}) {
    INFO(point);
    TempDir dir("forget-kill");
    RepoCli repo(dir);
    Init(repo);
    TakeVersions(repo, 3);
    const RunResult killed =
        repo.Wb({"forget", "--keep-last", "1"}, "", {{"WANBACKUP_FAILPOINT", point}});
    CHECK(killed.exit_code == -1);
    const std::set<int64_t> expected = std::string(point) == "forget.before-commit"
                                           ? std::set<int64_t>{1, 2, 3}
                                           : std::set<int64_t>{3};
    CHECK(SnapshotIds(repo) == expected);
    repo.Ok({"prune"});
    repo.Ok({"verify"});
    CheckRestores(repo, expected);
  }
}

TEST_CASE("forget: bad input is one line, a non-zero exit, and changes nothing", "[prune]") {
  TempDir dir("forget-bad");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 2);
  const auto files = Files(repo);
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"forget"}, 2, "no snapshot and no --keep-* rule"},
      {{"forget", "99"}, 6, "no snapshot 99"},
      {{"forget", "1", "--keep-last", "1"}, 2, "not both"},
      {{"forget", "x1"}, 2, "not a snapshot number"},
      {{"forget", "1", "2"}, 2, "--allow-empty-source"},
      {{"forget", "--keep-tag", "none"}, 2, "every snapshot of"},
      {{"forget", "--keep-last", "0"}, 2, "keep-last"},
      {{"forget", "--keep-within", "7x"}, 2, "retention duration"},
      {{"forget", "--keep-tag", ""}, 2, "an empty tag to keep"},
      {{"forget", "--keep-tag", " a"}, 2, "has white space at an end"},  // round 11, AB4
      {{"forget", " 1"}, 2, "not a snapshot number"},
      {{"forget", "18446744073709551619"}, 2, "not a snapshot number"},
      {{"forget", "--lost-packs", "1"}, 2, "--lost-packs gives up the packs"},
      {{"forget", "--keep-last", "1", "--source", "nothing"}, 6, "no snapshots of source"},
      {{"prune", "--max-unused", "150%"}, 2, "--max-unused"},
      {{"prune", "--lock-wait", "soon"}, 2, "--lock-wait"},
  };
  for (const Case& c : cases) {
    const RunResult r = repo.Wb(c.args);
    INFO(c.args.front() << " " << (c.args.size() > 1 ? c.args[1] : "") << ": " << r.err);
    CHECK(r.exit_code == c.exit_code);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(Files(repo) == files);
  }
  CHECK(SnapshotIds(repo) == std::set<int64_t>{1, 2});
  // With the flag, the last snapshot may go.
  repo.Ok({"forget", "1", "2", "--allow-empty-source"});
  CHECK(SnapshotIds(repo).empty());
}

TEST_CASE("locks: a second writer is refused with exit 7 naming the holder, or waits for it",
          "[prune][lock]") {
  TempDir dir("lock");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 2);
  // Another process's writer lock, as a snapshot holds it.
  const int fd = ::open((repo.path() + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const std::string holder =
      "wanbackup pid 4242 on otherhost running 'snapshot' since 2026-01-01T00:00:00Z\n";
  REQUIRE(::ftruncate(fd, 0) == 0);
  REQUIRE(::pwrite(fd, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size()));
  for (const char* verb : {"prune", "forget", "snapshot"}) {
    std::vector<std::string> args = {verb};
    if (std::string(verb) == "forget") args = {"forget", "1"};
    if (std::string(verb) == "snapshot") args = {"snapshot", dir / "disk.img"};
    const RunResult r = repo.Wb(args);
    INFO(verb << ": " << r.err);
    CHECK(r.exit_code == 7);
    CHECK(r.err.find("pid 4242 on otherhost running 'snapshot' since 2026-01-01") !=
          std::string::npos);
  }
  // Readers are not kept out by an appending writer.
  repo.Ok({"snapshots"});
  repo.Ok({"verify"});
  // Released while the second one waits: it goes ahead.
  Background waiting({WB_WANBACKUP_BIN, "forget", "1", "--lock-wait", "30s"}, RepoEnv(repo));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::close(fd);
  CHECK(waiting.Wait(std::chrono::seconds(60)) == 0);
  CHECK(SnapshotIds(repo) == std::set<int64_t>{2});
}

TEST_CASE("repair: the old catalog is kept beside earlier kept ones, never over them",
          "[prune][repair]") {
  TempDir dir("repair-keep");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 1);
  // Catalogs kept by repairs in this second and the next few (two repairs in one second).
  std::vector<std::string> earlier;
  const std::time_t now = std::time(nullptr);
  for (int i = 0; i < 5; ++i) {
    const std::time_t t = now + i;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H-%M-%SZ", &tm);
    earlier.push_back(repo.catalog() + ".damaged-" + stamp);
    std::ofstream(earlier.back()) << "kept by an earlier repair " << i;
  }
  repo.Ok({"repair", "catalog"});
  for (size_t i = 0; i < earlier.size(); ++i)
    CHECK(wanbackup::testing::FileContents(earlier[i]) ==
          "kept by an earlier repair " + std::to_string(i));
  size_t kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(repo.path())) {
    if (e.path().filename().string().starts_with("catalog.db.damaged-")) ++kept;
  }
  CHECK(kept == earlier.size() + 1);
  CHECK(SnapshotIds(repo) == std::set<int64_t>{1});
}

TEST_CASE("locks: a holder line with control characters is quoted escaped, on one line",
          "[prune][lock]") {
  TempDir dir("lock-escape");
  RepoCli repo(dir);
  Init(repo);
  // Whoever can write the repository writes the holder line: terminal escapes and a second line.
  const int fd = ::open((repo.path() + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const std::string holder = "wanbackup pid 1 on \x1b[31mEVIL\x1b[0m\nforged second line\n";
  REQUIRE(::ftruncate(fd, 0) == 0);
  REQUIRE(::pwrite(fd, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size()));
  const RunResult r = repo.Wb({"prune"});
  ::close(fd);
  INFO(r.err);
  CHECK(r.exit_code == 7);
  CHECK(r.err.find("wanbackup pid 1 on \\x1b[31mEVIL\\x1b[0m") != std::string::npos);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find("forged second line") == std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE(
    "locks: a reader keeps prune and forget out and is named, and a killed holder blocks "
    "nobody",
    "[prune][lock]") {
  TempDir dir("lock-reader");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 2);
  // A reader, as restore holds it: the shared lock and its line in readers/.
  const int shared = ::open((repo.path() + "/lock.shared").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(::flock(shared, LOCK_SH) == 0);
  const std::string line =
      "wanbackup pid 777 on readerhost running 'restore' since 2026-01-01T00:00:00Z\n";
  const int mine =
      ::open((repo.path() + "/readers/777-1.reader").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(::flock(mine, LOCK_EX) == 0);
  REQUIRE(::pwrite(mine, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()));
  // A stale line of a reader that died.
  std::ofstream(repo.path() + "/readers/1-1.reader") << "wanbackup pid 1 on gone\n";
  const RunResult prune = repo.Wb({"prune"});
  INFO(prune.err);
  CHECK(prune.exit_code == 7);
  CHECK(prune.err.find("pid 777 on readerhost running 'restore'") != std::string::npos);
  CHECK(prune.err.find("pid 1 on gone") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(repo.path() + "/readers/1-1.reader"));
  CHECK(repo.Wb({"forget", "1"}).exit_code == 7);
  repo.Ok({"snapshot", dir / "disk.img"});  // appending alongside readers is fine
  ::close(mine);
  ::close(shared);

  // A prune killed while it holds both locks: the next command does not wait for it.
  repo.Ok({"forget", "1"});
  CHECK(repo.Wb({"prune"}, "", {{"WANBACKUP_FAILPOINT", "prune.before-commit"}}).exit_code == -1);
  repo.Ok({"prune"});
  repo.Ok({"verify"});
}

TEST_CASE(
    "locks: a prune that a reader keeps waiting lets snapshots through meanwhile, then goes "
    "ahead",
    "[prune][lock]") {
  TempDir dir("lock-reader-wait");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 2);
  repo.Ok({"forget", "1"});
  // A reader, as a mount holds it for days.
  const int shared = ::open((repo.path() + "/lock.shared").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(::flock(shared, LOCK_SH) == 0);
  Background prune({WB_WANBACKUP_BIN, "prune", "--max-unused", "0", "--lock-wait", "120s"},
                   RepoEnv(repo));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Before: the waiting prune held the writer lock all along, and this gave up after 30 s.
  WriteVersion(dir / "disk.img", 3);
  const RunResult snapshot = repo.Wb({"snapshot", dir / "disk.img", "--lock-wait", "30s"});
  INFO(snapshot.err);
  CHECK(snapshot.exit_code == 0);
  ::close(shared);
  CHECK(prune.Wait(std::chrono::seconds(150)) == 0);
  CHECK(SnapshotIds(repo) == std::set<int64_t>{2, 3});
  repo.Ok({"verify"});
}

TEST_CASE(
    "locks: snapshot and prune started together: one waits or is refused with 7, and "
    "nothing is damaged",
    "[prune][lock]") {
  TempDir dir("lock-race");
  RepoCli repo(dir);
  Init(repo);
  TakeVersions(repo, 4);
  repo.Ok({"forget", "--keep-last", "2"});
  WriteVersion(dir / "disk.img", 5);
  for (const char* wait : {"0", "60s"}) {
    const RunOptions o = RepoEnv(repo);
    Background snapshot({WB_WANBACKUP_BIN, "snapshot", dir / "disk.img", "--lock-wait", wait}, o);
    Background prune({WB_WANBACKUP_BIN, "prune", "--max-unused", "0", "--lock-wait", wait}, o);
    const int s = snapshot.Wait(std::chrono::seconds(120));
    const int p = prune.Wait(std::chrono::seconds(120));
    INFO("--lock-wait " << wait << ": snapshot " << s << ", prune " << p);
    CHECK((s == 0 || s == 7));
    CHECK((p == 0 || p == 7));
    if (std::string(wait) != "0") CHECK((s == 0 && p == 0));
    repo.Ok({"verify"});
  }
  const std::set<int64_t> ids = SnapshotIds(repo);
  CHECK(ids.count(3) == 1);
  CHECK(ids.count(4) == 1);
  CheckRestores(repo, {3, 4});
}
