// replicate and replicas on local files (docs/operations.md, "Standby copies: replicate"): the
// real binary, a repository with 64 KiB chunks, and replicas that are plain files. The same
// rules against a real LUN through the WAN: tests/integration/write_test.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "support/repo_cli.h"
#include "support/skip.h"

using wanbackup::testing::Json;
using wanbackup::testing::RepoCli;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::TreeContents;

namespace {

constexpr uint64_t kReplicaChunk = 64 << 10;
constexpr size_t kReplicaChunks = 200;  // 12.5 MiB images

// Noise, with chunks 10..19 all zeros; `changed` chunks from chunk 40 on get other noise, from
// `seed`. Each chunk's noise depends only on its index (and seed), so the rest stays the same.
void WriteImage(const std::string& path, size_t changed = 0, uint64_t seed = 0) {
  std::string data(kReplicaChunks * kReplicaChunk, '\0');
  for (size_t c = 0; c < kReplicaChunks; ++c) {
    if (c >= 10 && c < 20) continue;
    uint64_t x = (c + 1) * 0x9e3779b97f4a7c15ull + (c >= 40 && c < 40 + changed ? seed : 0);
    // A 64-bit word at a time: the tests build at -O0 (byte by byte took seconds under ASan).
    for (size_t i = c * kReplicaChunk; i < (c + 1) * kReplicaChunk; i += sizeof x) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(&data[i], &x, sizeof x);
    }
  }
  std::ofstream(path, std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Overwrites `chunks` whole chunks from `first` with 0x5a bytes: a change behind wanbackup's back.
void Tamper(const std::string& path, size_t first, size_t chunks) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(first * kReplicaChunk));
  const std::string bytes(chunks * kReplicaChunk, '\x5a');
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadAll(const std::string& path) {
  return wanbackup::testing::FileContents(path);
}

struct Setup {
  TempDir dir{"replicate"};
  RepoCli repo{dir};
  std::string image = dir / "disk.img", replica = dir / "standby.img";
  Setup() {
    repo.Ok({"init", "--chunk-size", "64K", "--key-file", repo.key(), "--json"});
    WriteImage(image);
    repo.Ok({"snapshot", image, "--json"});
  }
  nlohmann::json Replicate(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"replicate", "latest", "--to", replica, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Json(repo.Wb(args));
  }
};

}  // namespace

TEST_CASE("replicate: a new file is written whole, then only the chunks that changed",
          "[replicate]") {
  Setup s;
  auto first = s.Replicate();
  CHECK(first["mode"] == "full");
  CHECK(first["chunks_written"] == kReplicaChunks - 10);  // the zero chunks stay holes
  CHECK(SameFile(s.replica, s.image));

  WriteImage(s.image, 2, 99);  // 2 of 200 chunks: 1 %
  s.repo.Ok({"snapshot", s.image, "--json"});
  auto second = s.Replicate();
  CHECK(second["mode"] == "diff");
  CHECK(second["base_snapshot"] == 1);
  CHECK(second["chunks_written"] == 2);
  CHECK(second["bytes_written"] == 2 * kReplicaChunk);
  CHECK(second["bytes_read"] == 0);  // nothing read from the replica
  CHECK(SameFile(s.replica, s.image));

  auto again = s.Replicate();  // already there
  CHECK(again["chunks_written"] == 0);
}

TEST_CASE("replicate: --check reads the replica and repairs what changed behind its back",
          "[replicate]") {
  Setup s;
  s.Replicate();
  // Changed so that nothing shows from outside (the modification time put back), as a write to
  // a block device would be: only reading it can tell.
  struct stat before {};
  REQUIRE(::stat(s.replica.c_str(), &before) == 0);
  Tamper(s.replica, 50, 3);
  Tamper(s.replica, 12, 1);  // a zero chunk made non-zero
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, s.replica.c_str(), times, 0) == 0);
  auto trusted = s.Replicate();
  CHECK(trusted["chunks_written"] == 0);  // the record says it is there
  CHECK_FALSE(SameFile(s.replica, s.image));
  auto checked = s.Replicate({"--check"});
  CHECK(checked["mode"] == "check");
  CHECK(checked["chunks_written"] == 4);
  CHECK(checked["bytes_read"] == kReplicaChunks * kReplicaChunk);
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE("replicate: an existing file with no record needs --force, and is compared, not trusted",
          "[replicate]") {
  Setup s;
  WriteImage(s.replica, 5, 3);  // a stale copy made some other way
  const std::string stale = ReadAll(s.replica);
  const RunResult refused = s.repo.Wb({"replicate", "latest", "--to", s.replica});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err,
             Catch::Contains(s.replica +
                             " exists and is no replica this repository "
                             "records; 'wanbackup replicate SNAPSHOT --repo " +
                             s.repo.path() + " --to " + s.replica + " --force' makes it one"));
  CHECK(ReadAll(s.replica) == stale);
  auto r = s.Replicate({"--force"});
  CHECK(r["mode"] == "check");
  CHECK(r["chunks_written"] == 5);
  CHECK(SameFile(s.replica, s.image));
  auto list = Json(s.repo.Wb({"replicas", "--json"}));
  REQUIRE(list.size() == 1);
  CHECK(list[0]["state"] == "consistent");
  CHECK(list[0]["snapshot"] == 1);
  CHECK(list[0]["target"] == s.replica);
}

TEST_CASE(
    "replicate: a run killed mid-write is recorded inconsistent, and the next run compares the "
    "file (its modification time changed) and finishes it",
    "[replicate]") {
  for (const char* point :
       {"replicate.after-write:3", "replicate.before-finish", "replicate.after-finish"}) {
    INFO("killed at " << point);
    Setup s;
    s.Replicate();
    WriteImage(s.image, 30, 5);
    s.repo.Ok({"snapshot", s.image, "--json"});
    const RunResult killed =
        s.repo.Wb({"replicate", "latest", "--to", s.replica}, "", {{"WANBACKUP_FAILPOINT", point}});
    CHECK(killed.exit_code == -1);  // died by the signal
    auto list = Json(s.repo.Wb({"replicas", "--json"}));
    REQUIRE(list.size() == 1);
    CHECK(list[0]["state"] == "inconsistent");
    CHECK(list[0]["writing_snapshot"] == 2);
    auto next = s.Replicate();
    CHECK(next["mode"] == "check");
    CHECK(next["chunks_written"] <= 30);
    CHECK(SameFile(s.replica, s.image));
    CHECK(Json(s.repo.Wb({"replicas", "--json"}))[0]["state"] == "consistent");
  }
}

TEST_CASE("replicate: a file changed behind its back is compared even without --check",
          "[replicate]") {
  Setup s;
  s.Replicate();
  WriteImage(s.replica, 5, 3);  // rewritten whole, as cp would: a new modification time
  auto r = s.Replicate();
  CHECK(r["mode"] == "check");
  CHECK_THAT(r["reason"].get<std::string>(), Catch::Contains("changed since the last run"));
  CHECK(r["chunks_written"] == 5);
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE("replicate: a text file is not made a replica without --force", "[replicate]") {
  Setup s;
  const std::string notes = s.dir / "notes.txt";
  std::ofstream(notes) << "text\n";
  const RunResult r = s.repo.Wb({"replicate", "1", "--to", notes});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(ReadAll(notes) == "text\n");
  CHECK(Json(s.repo.Wb({"replicas", "--json"})).empty());
}

TEST_CASE("replicate: a block device that holds data is not written without --force",
          "[replicate]") {
  if (::geteuid() != 0) WB_SKIP("needs root for a loop device");
  Setup s;
  const std::string backing = s.dir / "device.img";
  WriteImage(backing, 5, 3);  // data in its first MiB: a disk that holds something
  const RunResult attach = wanbackup::testing::Run({"losetup", "--find", "--show", backing});
  if (attach.exit_code != 0) WB_SKIP("no loop device could be attached here");
  std::string loop = attach.out;
  while (!loop.empty() && loop.back() == '\n')
    loop.pop_back();
  const std::string held = ReadAll(backing);
  const RunResult r = s.repo.Wb({"replicate", "1", "--to", loop});
  wanbackup::testing::Run({"losetup", "-d", loop});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(loop + " holds data (its first or last MiB is not zeros) and "
                                           "is no replica this repository records"));
  CHECK(ReadAll(backing) == held);
}

TEST_CASE("replicate: a short file (a killed first run) is extended and compared", "[replicate]") {
  Setup s;
  const RunResult killed = s.repo.Wb({"replicate", "latest", "--to", s.replica}, "",
                                     {{"WANBACKUP_FAILPOINT", "replicate.after-write:50"}});
  CHECK(killed.exit_code == -1);
  auto r = s.Replicate();
  CHECK(r["mode"] == "check");
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE("replicate: a missing device is refused, never created as a file in /dev",
          "[replicate]") {
  Setup s;
  const RunResult r = s.repo.Wb({"replicate", "1", "--to", "/dev/wanbackup-no-such-device"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("does not exist, and a new file among the devices is no disk"));
  CHECK(::access("/dev/wanbackup-no-such-device", F_OK) != 0);
}

TEST_CASE("replicate: a new file on a filesystem mounted under /dev (/dev/shm) is created",
          "[replicate]") {
  struct stat dev {};
  struct stat shm_fs {};
  if (::stat("/dev", &dev) != 0 || ::stat("/dev/shm", &shm_fs) != 0 ||
      dev.st_dev == shm_fs.st_dev) {
    WB_SKIP("no filesystem of its own mounted on /dev/shm here");
  }
  Setup s;
  TempDir shm{"replicate-shm", "/dev/shm"};
  const std::string replica = shm / "standby.img";
  s.repo.Ok({"replicate", "1", "--to", replica, "--json"});
  CHECK(SameFile(replica, s.image));
}

TEST_CASE("replicate, snapshot: a relative path is recorded as the absolute one it names",
          "[replicate]") {
  Setup s;
  // The same disk named from its directory: one source (one series for --keep-*), not two.
  REQUIRE(s.repo.WbIn(s.dir.path(), {"snapshot", "disk.img", "--json"}).exit_code == 0);
  const nlohmann::json snaps = Json(s.repo.Ok({"snapshots", "--json"}));
  REQUIRE(snaps.size() == 2);
  for (const auto& snap : snaps)
    CHECK(snap["source"] == s.image);
  REQUIRE(s.repo.WbIn(s.dir.path(), {"replicate", "latest", "--to", "standby.img"}).exit_code == 0);
  const nlohmann::json replicas = Json(s.repo.Ok({"replicas", "--json"}));
  REQUIRE(replicas.size() == 1);
  CHECK(replicas[0]["target"] == s.replica);
}

TEST_CASE("replicate: bad targets are refused in one line and nothing is written", "[replicate]") {
  Setup s;
  const auto before = TreeContents(s.dir.path());
  const RunResult source = s.repo.Wb({"replicate", "1", "--to", s.image});
  CHECK(source.exit_code == 2);
  CHECK_THAT(source.err, Catch::Contains("is the source of snapshot 1"));
  const RunResult dir = s.repo.Wb({"replicate", "1", "--to", s.dir.path()});
  CHECK(dir.exit_code == 2);
  const RunResult missing = s.repo.Wb({"replicate", "9", "--to", s.replica});
  CHECK(missing.exit_code != 0);
  const RunResult forget = s.repo.Wb({"replicas", "--forget", "4"});
  CHECK(forget.exit_code != 0);
  CHECK_THAT(forget.err, Catch::Contains("no replica 4"));
  for (const RunResult* r : {&source, &dir, &missing, &forget}) {
    INFO(r->err);
    CHECK(std::count(r->err.begin(), r->err.end(), '\n') == 1);
  }
  const auto after = TreeContents(s.dir.path());
  for (const auto& [name, bytes] : after) {
    INFO(name);
    if (name == s.repo.path() + "/lock") continue;  // names the last holder (repo_lock.h)
    CHECK((before.count(name) == 1 && before.at(name) == bytes));
  }
  CHECK(after.size() == before.size());
}

TEST_CASE(
    "replicate: a disk that is the source of any snapshot in the repository is refused, not only "
    "the snapshot's own",
    "[replicate]") {
  Setup s;
  const std::string other = s.dir / "other.img";
  WriteImage(other, 30, 7);
  s.repo.Ok({"snapshot", other});  // snapshot 2, of another disk
  const std::string kept = ReadAll(other);
  const RunResult r = s.repo.Wb({"replicate", "1", "--to", other});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(other + " is the source of snapshot 2"));
  CHECK_THAT(r.err, Catch::Contains("Nothing was written"));
  CHECK(ReadAll(other) == kept);

  // A snapshot of a disk that never finished (killed: its row stays "running", then "failed")
  // does not bar the disk: forget cannot drop such a row.
  const std::string spare = s.dir / "spare.img";
  WriteImage(spare, 30, 8);
  const RunResult killed =
      s.repo.Wb({"snapshot", spare}, "", {{"WANBACKUP_FAILPOINT", "snapshot.before-finish"}});
  CHECK(killed.exit_code == -1);                                            // died by the signal
  Json(s.repo.Wb({"replicate", "1", "--to", spare, "--json", "--force"}));  // no replica yet
  CHECK(SameFile(spare, s.image));
  s.repo.Ok({"snapshot", other});  // closes the killed run's row as failed
  WriteImage(spare, 30, 8);
  CHECK(s.repo.Wb({"replicate", "1", "--to", spare, "--check"}).exit_code == 0);
  CHECK(SameFile(spare, s.image));
}

TEST_CASE("restore: over a recorded replica it is refused, naming replicate and replicas --forget",
          "[replicate]") {
  Setup s;
  s.Replicate();
  WriteImage(s.image, 30, 9);
  s.repo.Ok({"snapshot", s.image});  // snapshot 2
  const std::string held = ReadAll(s.replica);
  const RunResult r = s.repo.Wb({"restore", "2", "--to", s.replica, "--force"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("is replica 1 of repository " + s.repo.path()));
  CHECK_THAT(r.err, Catch::Contains("wanbackup replicate SNAPSHOT --to " + s.replica));
  CHECK_THAT(r.err, Catch::Contains("wanbackup replicas --forget 1"));
  CHECK(ReadAll(s.replica) == held);
  auto list = Json(s.repo.Wb({"replicas", "--json"}));
  REQUIRE(list.size() == 1);
  CHECK(list[0]["snapshot"] == 1);
  // Once the record is dropped, the restore goes ahead.
  s.repo.Ok({"replicas", "--forget", "1"});
  s.repo.Ok({"restore", "2", "--to", s.replica, "--force"});
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE(
    "replicate: a replica record a storage writer changed is not trusted: the replica is read "
    "to compare and ends exact",
    "[replicate]") {
  Setup s;
  s.Replicate();  // holds 1
  WriteImage(s.image, 2, 99);
  s.repo.Ok({"snapshot", s.image, "--json"});  // 2
  // No key needed to edit the table: before, the next replicate of 2 "was at snapshot 2: wrote
  // 0 chunks" and the replica stayed at 1, recorded consistent (round 10, AA2).
  wanbackup::testing::Sql(s.repo.catalog(), "UPDATE replicas SET snapshot_id = 2");
  const nlohmann::json listed = Json(s.repo.Wb({"replicas", "--json"}));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["state"] == "unknown");
  const RunResult r = s.repo.Wb({"replicate", "latest", "--to", s.replica, "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("its record is not sealed by this repository's key") != std::string::npos);
  CHECK(nlohmann::json::parse(r.out)["mode"] == "check");
  CHECK(SameFile(s.replica, s.image));
  // The record the run wrote is sealed again: the next run diffs.
  CHECK(Json(s.repo.Wb({"replicas", "--json"}))[0]["state"] == "consistent");
  WriteImage(s.image, 3, 7);
  s.repo.Ok({"snapshot", s.image, "--json"});
  CHECK(s.Replicate()["mode"] == "diff");
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE(
    "replicate: a replica record names its snapshot by its sealed record, so a number given out "
    "again is compared, not trusted",
    "[replicate]") {
  Setup s;
  WriteImage(s.image, 2, 99);
  s.repo.Ok({"snapshot", s.image, "--json"});  // 2
  s.Replicate();                               // holds 2
  s.repo.Ok({"forget", "2"});
  // Whoever can write the storage lowers the floor; a client with no anchor then numbers the
  // next snapshot 2 again (Y3). Before, the replica's record of "2" was taken for this one:
  // "is at snapshot 2: wrote 0 chunks", and it still held the old data (round 11, AB3).
  wanbackup::testing::Sql(s.repo.catalog(),
                          "UPDATE settings SET value = '1' WHERE key = 'snapshot_id_floor'");
  const std::map<std::string, std::string> fresh = {
      {"WANBACKUP_SECURITY_DIR", s.dir / "other-client"}};
  WriteImage(s.image, 3, 7);
  REQUIRE(s.repo.Wb({"snapshot", s.image, "--json"}, "", fresh).exit_code == 0);
  REQUIRE(Json(s.repo.Wb({"snapshots", "--json"}, "", fresh)).back()["id"] == 2);
  const RunResult r = s.repo.Wb({"replicate", "latest", "--to", s.replica, "--json"}, "", fresh);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out)["mode"] == "check");
  CHECK(SameFile(s.replica, s.image));
}

TEST_CASE(
    "replicas --forget: says what the next replicate does with the file, and an empty id is an "
    "error",
    "[replicate]") {
  Setup s;
  s.Replicate();
  const RunResult empty = s.repo.Wb({"replicas", "--forget", ""});
  CHECK(empty.exit_code == 2);  // before: listed the replicas and exited 0
  CHECK_THAT(empty.err, Catch::Contains("'' is not a replica number"));
  CHECK(s.repo.Wb({"replicas", "--forget", " 1"}).exit_code == 2);  // as "1 " is (round 11)
  // Before: "a replicate to it reads it to compare", and the next one was refused (round 9, Z3).
  const RunResult forgot = s.repo.Wb({"replicas", "--forget", "1"});
  REQUIRE(forgot.exit_code == 0);
  CHECK_THAT(forgot.err, Catch::Contains("forgot replica 1 (" + s.replica + ")"));
  CHECK_THAT(forgot.err, Catch::Contains("'wanbackup replicate SNAPSHOT --repo " + s.repo.path() +
                                         " --to " + s.replica + " --force' makes it one again"));
  const std::string held = ReadAll(s.replica);
  const RunResult refused = s.repo.Wb({"replicate", "latest", "--to", s.replica});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--to " + s.replica + " --force' makes it one"));
  CHECK(ReadAll(s.replica) == held);
  const auto r = s.Replicate({"--force"});
  CHECK(r["mode"] == "check");
  CHECK(Json(s.repo.Ok({"replicas", "--json"})).size() == 1);
}

TEST_CASE("forget: forgetting the snapshot a replica holds is warned of, dry run or not",
          "[replicate]") {
  Setup s;
  s.Replicate();
  WriteImage(s.image, 30, 9);
  s.repo.Ok({"snapshot", s.image});
  const RunResult dry = s.repo.Ok({"forget", "--keep-last", "1", "--dry-run"});
  CHECK_THAT(dry.err, Catch::Contains("replica 1 (" + s.replica +
                                      ") holds snapshot 1, which would be forgotten: its next "
                                      "replicate reads it whole"));
  const RunResult real = s.repo.Ok({"forget", "--keep-last", "1"});
  CHECK_THAT(real.err, Catch::Contains("holds snapshot 1, which is forgotten"));
  CHECK(s.Replicate()["mode"] == "check");  // as the warning said
  const RunResult quiet = s.repo.Ok({"forget", "--keep-last", "1", "--dry-run"});
  CHECK_THAT(quiet.err, !Catch::Contains("replica 1"));  // it holds the kept snapshot now
}

TEST_CASE("replicas: --forget drops the record, and the next replicate compares", "[replicate]") {
  Setup s;
  s.Replicate();
  s.repo.Ok({"replicas", "--forget", "1"});
  CHECK(Json(s.repo.Wb({"replicas", "--json"})).empty());
  CHECK(s.repo.Wb({"replicate", "latest", "--to", s.replica}).exit_code == 2);  // no record now
  auto r = s.Replicate({"--force"});
  CHECK(r["mode"] == "check");
  CHECK(r["chunks_written"] == 0);
}

namespace {

int64_t RunningSnapshots(const std::string& catalog) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(catalog.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM snapshots WHERE status = 'running'", -1, &st,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

}  // namespace

TEST_CASE(
    "restore: the source of a snapshot running now is refused, and once that run was killed, it is "
    "not",
    "[replicate]") {
  Setup s;
  wanbackup::testing::RunOptions o;
  o.env = {{"WANBACKUP_REPO", s.repo.path()}, {"WANBACKUP_KEY_FILE", s.repo.key()}};
  wanbackup::testing::Background snap({WB_WANBACKUP_BIN, "snapshot", s.image, "--limit-rate", "1M"},
                                      o);  // about 12 s
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running = RunningSnapshots(s.repo.catalog()) > 0;
  }
  REQUIRE(running);
  // --overwrite-source: snapshot 1's source may be rolled back, but not while it is read.
  const RunResult refused =
      s.repo.Wb({"restore", "1", "--to", s.image, "--force", "--overwrite-source"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("is the source of snapshot 2, running now"));
  auto second = [&s] { return Json(s.repo.Ok({"snapshots", "--all", "--json"})).at(1); };
  CHECK(second()["status"] == "running");
  CHECK(second()["seconds"].is_null());  // not finished: no duration, no rate
  CHECK(second()["bytes_per_second"].is_null());
  CHECK(second()["finished_unix_ms"].is_null());
  snap.Kill(SIGKILL);
  snap.Wait(std::chrono::seconds(10));
  CHECK(RunningSnapshots(s.repo.catalog()) == 1);  // the killed run's row stays behind
  CHECK(second()["status"] == "interrupted");      // but no writer holds the lock: not running
  CHECK(second()["seconds"].is_null());
  CHECK_THAT(s.repo.Wb({"restore", "1", "--to", s.image, "--force"}).err,
             Catch::Contains("is the source of snapshot 1"));
  s.repo.Ok({"restore", "1", "--to", s.image, "--force", "--overwrite-source"});
}
