// A repository on S3 under kills (issue 42's acceptance): wanbackup SIGKILLed during snapshot
// and during prune, at the failpoints on their way (common/failpoint.h) and at random moments,
// and the s3lab's radosgw killed and started again under a running snapshot. After each trial
// every committed snapshot restores bit-exact; after a last prune the bucket holds nothing that
// no snapshot needs. A committed snapshot on S3 is one whose pack, with the head that lists it,
// is uploaded (docs/format.md, "A repository on S3"): a run killed after that upload and before
// its local catalog commit has committed, and every host must find the snapshot.
// The images are 3 MiB in 256 KiB chunks, so that a run writes a dozen records: CI's time is
// short, and the failpoints after the n-th record have places to be.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "repository/record.h"
#include "store/pack.h"
#include "store/s3_host.h"
#include "store/s3_url.h"
#include "support/repo_cli.h"

using namespace wanbackup;
using wanbackup::testing::Background;
using wanbackup::testing::NewS3RepoUrl;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::S3Host;
using wanbackup::testing::S3ObjectsAt;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::WaitStopped;

namespace {

constexpr size_t kCrashChunk = 256 << 10;
constexpr int kCrashChunks = 12;

// Version `v` of the one source these tests back up: chunk i holds noise that changes at the
// versions u with u = i (mod 3), so each version shares two thirds of its chunks with the one
// before and a snapshot stores four new chunks; chunk 5 is zeros.
void WriteCrashVersion(const std::string& path, int v) {
  std::string bytes(kCrashChunk * kCrashChunks, '\0');
  for (int i = 0; i < kCrashChunks; ++i) {
    if (i == 5) continue;
    const int born = v - ((v - i) % 3 + 3) % 3;
    std::mt19937_64 rng(static_cast<uint64_t>(i) * 1'000'003 + static_cast<uint64_t>(born + 10));
    for (size_t at = 0; at < kCrashChunk; at += 8) {
      const uint64_t word = rng();
      std::memcpy(&bytes[static_cast<size_t>(i) * kCrashChunk + at], &word, 8);
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// The ids of the complete snapshots the host lists.
std::set<int64_t> CrashSnapshotIds(const S3Host& host) {
  return host.SnapshotIds();
}

std::set<int64_t> IdsOf(const std::map<int64_t, int>& kept) {
  std::set<int64_t> ids;
  for (const auto& [id, version] : kept)
    ids.insert(id);
  return ids;
}

// Every kept snapshot (id -> version) restores bit-exact, and verify finds nothing wrong.
void CheckKeptRestore(const S3Host& host, const TempDir& dir, const std::map<int64_t, int>& kept) {
  host.Ok({"verify"});
  const std::string want = dir / "want.img", got = dir / "got.img";
  for (const auto& [id, version] : kept) {
    WriteCrashVersion(want, version);
    std::filesystem::remove(got);
    host.Ok({"restore", std::to_string(id), "--to", got});
    INFO("snapshot " << id << " (version " << version << ")");
    CHECK(SameFile(want, got));
  }
}

// pack name -> the bytes the catalog accounts for in it: the pack header and every record it
// indexes there, each with its record header.
std::map<std::string, uint64_t> CatalogPackBytes(const std::string& catalog_path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(catalog_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT p.name, " + std::to_string(pipeline::kPackHeaderSize) +
                          " + COALESCE(SUM(" + std::to_string(pipeline::kRecordHeaderSize) +
                          " + c.stored_size), 0) FROM packs p LEFT JOIN chunks c ON c.pack_id = "
                          "p.id GROUP BY p.id";
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::map<std::string, uint64_t> out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] =
        static_cast<uint64_t>(sqlite3_column_int64(st, 1));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// After a prune that tolerates nothing unused: prune finds nothing more to free, and the bucket
// holds config.json and exactly the packs the host's catalog names, each of them nothing but its
// header and the records the catalog indexes (no copy of a record, no torn tail), and no lock.
void CheckNothingUnreferenced(const S3Host& host) {
  const nlohmann::json again =
      nlohmann::json::parse(host.Ok({"prune", "--dry-run", "--max-unused", "0", "--json"}).out);
  INFO(again.dump());
  CHECK(again["orphan_packs"] == 0);
  CHECK(again["unused_bytes"] == 0);
  CHECK(again["packs_removed"] == 0);
  CHECK(again["packs_rewritten"] == 0);
  const std::map<std::string, uint64_t> indexed = CatalogPackBytes(host.cache + "/catalog.db");
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(host.url);
  REQUIRE(loc.ok());
  const std::string prefix = loc->Key("");
  std::set<std::string> seen;
  for (const auto& [key, size] : S3ObjectsAt(host.url)) {
    INFO(key << ", " << size << " bytes");
    REQUIRE(key.starts_with(prefix));
    const std::string rest = key.substr(prefix.size());
    if (rest == "config.json") continue;
    REQUIRE(rest.starts_with("packs/"));
    REQUIRE(rest.ends_with(".pack"));
    const std::string name = rest.substr(rest.rfind('/') + 1, 32);
    const auto named = indexed.find(name);
    REQUIRE(named != indexed.end());  // an object no catalog entry names
    CHECK(named->second == size);     // bytes in it that no record the catalog indexes holds
    seen.insert(name);
  }
  CHECK(seen.size() == indexed.size());  // a pack the catalog names is missing
}

}  // namespace

TEST_CASE(
    "s3 repository: SIGKILL during snapshot, at its failpoints and at random moments, keeps "
    "every committed snapshot, and prune then leaves nothing unreferenced",
    "[s3lab]") {
  TempDir dir("s3kill-snap");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  const std::string disk = dir / "disk.img";
  std::map<int64_t, int> kept;  // snapshot id -> the version it holds
  WriteCrashVersion(disk, 0);
  // Packs closed at 256 KiB, a record each: a run fills a dozen, uploaded in the background
  // (at most eight at once, so the run also waits for the oldest) while the next ones fill,
  // and the kills land among those uploads too.
  RunOptions small_packs = a.Options();
  small_packs.env["WANBACKUP_TEST_PACK_SIZE"] = "256K";
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(testing::Local({"snapshot", disk}, small_packs).exit_code == 0);
  const auto whole_run =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  kept[1] = 0;

  // A failpoint (with whether the run has committed when it is reached: its pack and head
  // uploaded), or "" for a kill at a random moment of a run.
  struct Trial {
    std::string failpoint;
    bool committed;
  };
  const std::vector<Trial> trials = {{"snapshot.after-pack-write:1", false}, {"", false},
                                     {"snapshot.after-pack-write:6", false}, {"", false},
                                     {"snapshot.before-pack-sync", false},   {"", false},
                                     {"snapshot.after-pack-sync", true},     {"", false},
                                     {"snapshot.before-finish", false},      {"", false},
                                     {"snapshot.after-finish", true},        {"", false}};
  std::mt19937 rng(42);
  int killed_before = 0, killed_after = 0, completed = 0;
  for (size_t t = 0; t < trials.size(); ++t) {
    const int version = static_cast<int>(t) + 1;
    WriteCrashVersion(disk, version);
    RunOptions o = small_packs;
    if (trials[t].failpoint.empty()) {
      o.timeout = std::chrono::milliseconds(rng() % (whole_run.count() + 1));
    } else {
      o.env["WANBACKUP_FAILPOINT"] = trials[t].failpoint;
    }
    INFO("trial " << t << ": "
                  << (trials[t].failpoint.empty()
                          ? "killed after " + std::to_string(o.timeout.count()) + " ms"
                          : trials[t].failpoint));
    const RunResult run = testing::Local({"snapshot", disk}, o);
    INFO("exit " << run.exit_code << ", stderr: " << run.err);
    REQUIRE((run.exit_code == -1 || run.exit_code == 0));
    if (!trials[t].failpoint.empty()) CHECK(run.exit_code == -1);  // the point was reached

    const std::set<int64_t> before = IdsOf(kept);
    const std::set<int64_t> now = CrashSnapshotIds(a);
    std::set<int64_t> added;
    for (int64_t id : now) {
      if (before.count(id) == 0) added.insert(id);
    }
    for (int64_t id : before) {
      INFO("snapshot " << id << " was committed before this trial");
      CHECK(now.count(id) == 1);
    }
    CHECK(added.size() <= 1);
    if (run.exit_code == 0 || trials[t].committed) CHECK(added.size() == 1);
    if (!trials[t].failpoint.empty() && !trials[t].committed) CHECK(added.empty());
    for (int64_t id : added)
      kept[id] = version;
    if (run.exit_code == 0) {
      ++completed;
    } else {
      ++(added.empty() ? killed_before : killed_after);
    }
    CheckKeptRestore(a, dir, kept);
  }
  std::printf(
      "s3 snapshot kills: %zu trials, %d killed before their commit, %d after it, %d ran to "
      "the end\n",
      trials.size(), killed_before, killed_after, completed);

  // A snapshot after all that, then the last prune: what the killed runs left is collected.
  WriteCrashVersion(disk, 100);
  a.Ok({"snapshot", disk});
  kept[*CrashSnapshotIds(a).rbegin()] = 100;
  a.Ok({"prune", "--max-unused", "0"});
  CHECK(CrashSnapshotIds(a) == IdsOf(kept));
  CheckNothingUnreferenced(a);
  CheckKeptRestore(a, dir, kept);
  // Another host, with an empty cache, finds the same.
  const S3Host b(dir, "b", a.url);
  CHECK(CrashSnapshotIds(b) == IdsOf(kept));
}

TEST_CASE(
    "s3 repository: a snapshot that fails at its last commit removes every pack it uploaded, "
    "those that went up in the background too",
    "[s3lab]") {
  TempDir dir("s3fail-commit");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  const std::string disk = dir / "disk.img";
  WriteCrashVersion(disk, 0);
  a.Ok({"snapshot", disk});
  // A record a pack: a dozen packs, more than the eight that go up at once, so the run waits
  // for the oldest uploads and no longer holds them when its final commit (the second of the
  // run: the first begins its row) fails.
  WriteCrashVersion(disk, 1);
  RunOptions o = a.Options();
  o.env["WANBACKUP_TEST_PACK_SIZE"] = "256K";
  o.env["WANBACKUP_FAIL"] = "catalog.commit:2";
  const RunResult run = testing::Local({"snapshot", disk}, o);
  INFO("exit " << run.exit_code << ", stderr: " << run.err);
  CHECK(run.exit_code == 1);
  CHECK(CrashSnapshotIds(a) == std::set<int64_t>{1});
  CheckNothingUnreferenced(a);
  CheckKeptRestore(a, dir, {{1, 0}});
}

TEST_CASE(
    "s3 repository: SIGKILL during prune, at its failpoints and at random moments, keeps "
    "every kept snapshot, and the next prune leaves nothing unreferenced",
    "[s3lab]") {
  TempDir dir("s3kill-prune");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  const std::string disk = dir / "disk.img";
  std::map<int64_t, int> kept;
  int version = 0;
  // Takes the next version, then forgets all but the newest three: each prune has packs to
  // remove (old heads, forgotten chunks) and packs to rewrite (chunks a kept snapshot shares).
  const auto next = [&] {
    WriteCrashVersion(disk, version);
    a.Ok({"snapshot", disk});
    kept[*CrashSnapshotIds(a).rbegin()] = version++;
    a.Ok({"forget", "--keep-last", "3"});
    while (kept.size() > 3)
      kept.erase(kept.begin());
  };
  for (int i = 0; i < 4; ++i)
    next();
  const auto t0 = std::chrono::steady_clock::now();
  a.Ok({"prune", "--max-unused", "0"});
  const auto whole_run =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);

  const std::vector<std::string> points = {
      "prune.after-pack-write:1", "", "prune.after-pack-write:3", "",
      "prune.before-commit",      "", "prune.after-commit",       "",
      "prune.after-pack-remove",  "", "prune.after-pack-write:2", ""};
  std::mt19937 rng(7);
  int killed = 0, completed = 0;
  for (size_t t = 0; t < points.size(); ++t) {
    next();
    RunOptions o = a.Options();
    if (points[t].empty()) {
      o.timeout = std::chrono::milliseconds(rng() % (whole_run.count() + 1));
    } else {
      o.env["WANBACKUP_FAILPOINT"] = points[t];
    }
    INFO("trial " << t << ": "
                  << (points[t].empty()
                          ? "killed after " + std::to_string(o.timeout.count()) + " ms"
                          : points[t]));
    const RunResult run = testing::Local({"prune", "--max-unused", "0"}, o);
    INFO("exit " << run.exit_code << ", stderr: " << run.err);
    REQUIRE((run.exit_code == -1 || run.exit_code == 0));
    if (!points[t].empty()) CHECK(run.exit_code == -1);  // the point was reached
    ++(run.exit_code == 0 ? completed : killed);
    CHECK(CrashSnapshotIds(a) == IdsOf(kept));
    CheckKeptRestore(a, dir, kept);
  }
  std::printf("s3 prune kills: %zu trials, %d killed, %d ran to the end\n", points.size(), killed,
              completed);

  a.Ok({"prune", "--max-unused", "0"});
  CHECK(CrashSnapshotIds(a) == IdsOf(kept));
  CheckNothingUnreferenced(a);
  CheckKeptRestore(a, dir, kept);
  const S3Host b(dir, "b", a.url);
  CHECK(CrashSnapshotIds(b) == IdsOf(kept));
}

namespace {

// Runs `scripts/s3lab COMMAND --dir` on the fixture's lab (rgw-stop, rgw-start).
void S3LabGateway(const std::string& command) {
  RunOptions o;
  o.timeout = std::chrono::seconds(120);
  const RunResult r = testing::Run(
      {std::string(WB_SOURCE_DIR) + "/scripts/s3lab", command, "--dir", WB_S3LAB_DIR}, o);
  INFO("s3lab " << command << ": exit " << r.exit_code << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
}

// Kills the lab's radosgw at once (SIGKILL; `s3lab rgw-stop` does the same, a shell's start
// later): by the PID the lab recorded, and only while that PID runs radosgw. Waits until it
// is gone.
void KillLabGateway() {
  std::ifstream env(std::string(WB_S3LAB_DIR) + "/s3lab.env");
  pid_t pid = 0;
  for (std::string line; std::getline(env, line);) {
    if (line.starts_with("RGW_PID=")) pid = static_cast<pid_t>(std::stol(line.substr(8)));
  }
  REQUIRE(pid > 0);
  const auto runs_radosgw = [pid] {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    return name == "radosgw";
  };
  REQUIRE(runs_radosgw());
  REQUIRE(::kill(pid, SIGKILL) == 0);
  for (int i = 0; i < 500 && runs_radosgw(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE_FALSE(runs_radosgw());
}

// A snapshot under a gateway restart either completed (one new snapshot, of `version`) or
// failed with one line and a non-zero exit, having committed nothing; what was committed
// before is all still listed.
void CheckGatewayOutcome(const S3Host& host, int exit_code, const std::string& err, int version,
                         std::map<int64_t, int>* kept) {
  INFO("exit " << exit_code << ", stderr: " << err);
  std::printf("s3 gateway restart under a snapshot: exit %d, %s", exit_code, err.c_str());
  REQUIRE(exit_code >= 0);  // exited, neither killed nor still running
  const std::set<int64_t> before = IdsOf(*kept);
  const std::set<int64_t> now = CrashSnapshotIds(host);
  for (int64_t id : before)
    CHECK(now.count(id) == 1);
  if (exit_code == 0) {
    REQUIRE(now.size() == before.size() + 1);
    (*kept)[*now.rbegin()] = version;
  } else {
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.size() > 1);
    CHECK(now == before);
  }
}

}  // namespace

TEST_CASE(
    "s3 repository: radosgw killed and started again under a running snapshot: it completes "
    "or fails with one line, nothing committed is lost, and the next snapshot works",
    "[s3lab]") {
  TempDir dir("s3kill-rgw");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  const std::string disk = dir / "disk.img", err_file = dir / "snapshot.err";
  std::map<int64_t, int> kept;
  WriteCrashVersion(disk, 0);
  const auto t0 = std::chrono::steady_clock::now();
  a.Ok({"snapshot", disk});
  const auto whole_run =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  kept[1] = 0;

  // Stopped right before its upload, the gateway killed, let go while the gateway is down (its
  // connections are dead, new ones refused), the gateway started again.
  WriteCrashVersion(disk, 1);
  RunOptions paused = a.Options({{"WANBACKUP_PAUSE", "snapshot.before-pack-sync"}});
  paused.err_file = err_file;
  int exit_code = -1;
  {
    Background run({WB_WANBACKUP_BIN, "snapshot", disk}, paused);
    REQUIRE(WaitStopped(run.pid()));
    S3LabGateway("rgw-stop");
    run.Kill(SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    S3LabGateway("rgw-start");
    exit_code = run.Wait(std::chrono::seconds(120));
  }
  CheckGatewayOutcome(a, exit_code, testing::FileContents(err_file), 1, &kept);
  CheckKeptRestore(a, dir, kept);

  // The same, but the gateway stays down until the run has given up: it fails with one line,
  // having committed nothing, and leaves what the next runs must cope with (its pack's header,
  // its lock).
  WriteCrashVersion(disk, 2);
  {
    Background run({WB_WANBACKUP_BIN, "snapshot", disk}, paused);
    REQUIRE(WaitStopped(run.pid()));
    KillLabGateway();
    run.Kill(SIGCONT);
    exit_code = run.Wait(std::chrono::seconds(120));
    S3LabGateway("rgw-start");
  }
  const std::string gave_up = testing::FileContents(err_file);
  CHECK(exit_code == 4);
  CHECK_THAT(gave_up, Catch::Contains("cannot connect"));
  CheckGatewayOutcome(a, exit_code, gave_up, 2, &kept);

  // The gateway killed at moments spread over a run (a quarter, half, three quarters of the
  // first run's time), and started again at once.
  for (int version = 3; version < 6; ++version) {
    WriteCrashVersion(disk, version);
    RunOptions o = a.Options();
    o.err_file = err_file;
    const auto delay = whole_run * (version - 2) / 4;
    INFO("gateway killed " << delay.count() << " ms into the run");
    {
      Background run({WB_WANBACKUP_BIN, "snapshot", disk}, o);
      std::this_thread::sleep_for(delay);
      KillLabGateway();
      S3LabGateway("rgw-start");
      exit_code = run.Wait(std::chrono::seconds(120));
    }
    CheckGatewayOutcome(a, exit_code, testing::FileContents(err_file), version, &kept);
  }

  // The next snapshot works, everything restores, and prune collects what failed runs left.
  WriteCrashVersion(disk, 6);
  a.Ok({"snapshot", disk});
  kept[*CrashSnapshotIds(a).rbegin()] = 6;
  a.Ok({"prune", "--max-unused", "0"});
  CHECK(CrashSnapshotIds(a) == IdsOf(kept));
  CheckKeptRestore(a, dir, kept);
  CheckNothingUnreferenced(a);
}

TEST_CASE(
    "s3 repository: a host that rebuilt its cache while another host's snapshot ran sees "
    "that snapshot once it is committed, and its prune keeps it",
    "[s3lab]") {
  TempDir dir("s3kill-race");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  const std::string disk = dir / "disk.img";
  std::map<int64_t, int> kept;
  WriteCrashVersion(disk, 0);
  a.Ok({"snapshot", disk});
  kept[1] = 0;

  // a's next snapshot stopped before its upload: its pack is not in the bucket yet. b (a
  // reader, which a writer does not keep out) rebuilds its cache then.
  WriteCrashVersion(disk, 1);
  RunOptions paused = a.Options({{"WANBACKUP_PAUSE", "snapshot.before-pack-sync"}});
  paused.err_file = dir / "snapshot.err";
  int exit_code = -1;
  {
    Background run({WB_WANBACKUP_BIN, "snapshot", disk}, paused);
    REQUIRE(WaitStopped(run.pid()));
    CHECK(CrashSnapshotIds(b) == IdsOf(kept));
    run.Kill(SIGCONT);
    exit_code = run.Wait(std::chrono::seconds(120));
  }
  INFO(testing::FileContents(dir / "snapshot.err"));
  REQUIRE(exit_code == 0);
  kept[2] = 1;
  // Its pack, there now: b's cache did not know it.
  CHECK(CrashSnapshotIds(b) == IdsOf(kept));
  b.Ok({"prune", "--max-unused", "0"});
  CHECK(CrashSnapshotIds(a) == IdsOf(kept));
  CheckKeptRestore(a, dir, kept);
  CheckKeptRestore(b, dir, kept);
  CheckNothingUnreferenced(b);
}
