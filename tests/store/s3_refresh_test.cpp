// An S3 repository's catalog cache refreshed from what other hosts wrote (issue 42, point 4;
// repository/cache_refresh.h): incrementally when the bucket only gained packs or packs grew,
// whole when packs were removed. Through the real binary in site A against the s3lab fixture's
// radosgw in site B; each host is a cache directory of its own. The refresh says on stderr what
// it read, which is what these tests count.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>

#include <chrono>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/unique_fd.h"
#include "store/s3_host.h"
#include "support/repo_cli.h"

using namespace wanbackup;
using wanbackup::UniqueFd;
using wanbackup::testing::Background;
using wanbackup::testing::CheckOneLineError;
using wanbackup::testing::NewS3RepoUrl;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::S3Host;
using wanbackup::testing::S3PacksAt;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::WaitStopped;
using wanbackup::testing::WriteNoiseImage;

namespace {

// What a command's refresh of its cache said it did (nullopt: it did not refresh).
struct Refresh {
  bool incremental = false;
  uint64_t new_packs = 0;  // incremental: packs the cache did not name
  uint64_t grown = 0;      // incremental: packs that grew
  uint64_t packs = 0;      // every pack indexed
  uint64_t reads = 0;
  std::string line;
};

std::optional<Refresh> RefreshOf(const RunResult& r) {
  static const std::regex incremental(
      R"(refreshed the catalog cache incrementally: (\d+) new packs? and (\d+) grown indexed, )"
      R"((\d+) reads)");
  static const std::regex full(R"(rebuilt the catalog cache.*: (\d+) packs? indexed, (\d+) reads)");
  std::smatch m;
  Refresh out;
  if (std::regex_search(r.err, m, incremental)) {
    out.incremental = true;
    out.new_packs = std::stoull(m[1]);
    out.grown = std::stoull(m[2]);
    out.packs = out.new_packs + out.grown;
    out.reads = std::stoull(m[3]);
  } else if (std::regex_search(r.err, m, full)) {
    out.packs = std::stoull(m[1]);
    out.reads = std::stoull(m[2]);
  } else {
    return std::nullopt;
  }
  out.line = m[0];
  return out;
}

// Runs `snapshots` on `host` and returns what its refresh said (REQUIREs exit 0 and a refresh).
Refresh RefreshAt(const S3Host& host) {
  const RunResult r = host.Ok({"snapshots"});
  INFO("stderr: " << r.err);
  const std::optional<Refresh> refresh = RefreshOf(r);
  REQUIRE(refresh);
  return *refresh;
}

// A number the host's cache catalog holds (SELECT of one integer).
int64_t CacheCount(const S3Host& host, const std::string& sql) {
  return testing::SqlInt(host.cache + "/catalog.db", sql);
}

}  // namespace

TEST_CASE(
    "s3 cache refresh: a host that sees a new snapshot of another indexes only the new packs, "
    "and lists and restores every snapshot bit-exact",
    "[s3lab]") {
  TempDir dir("s3refresh1");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  for (int i = 1; i <= 3; ++i)
    WriteNoiseImage(dir / ("v" + std::to_string(i) + ".img"), 60 + static_cast<uint64_t>(i), 3);
  a.Ok({"snapshot", dir / "v1.img"});
  a.Ok({"snapshot", dir / "v2.img"});

  const Refresh first = RefreshAt(b);  // no cache yet: rebuilt whole
  INFO(first.line);
  CHECK_FALSE(first.incremental);
  CHECK(first.packs == S3PacksAt(a.url).size());
  CHECK_FALSE(RefreshOf(b.Ok({"snapshots"})).has_value());  // fresh: nothing read again

  const size_t packs_before = S3PacksAt(a.url).size();
  a.Ok({"snapshot", dir / "v3.img"});
  const size_t new_packs = S3PacksAt(a.url).size() - packs_before;
  REQUIRE(new_packs >= 1);
  const Refresh next = RefreshAt(b);
  INFO(next.line);
  CHECK(next.incremental);
  CHECK(next.new_packs == new_packs);
  CHECK(next.grown == 0);
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2, 3});
  // A third host rebuilds whole at the same state, reading more than b did.
  const S3Host c(dir, "c", a.url);
  const Refresh whole = RefreshAt(c);
  INFO(whole.line);
  CHECK_FALSE(whole.incremental);
  CHECK(whole.reads > next.reads);
  std::printf("s3 cache refresh after one new snapshot: %s; a new host: %s\n", next.line.c_str(),
              whole.line.c_str());
  for (int i = 1; i <= 3; ++i) {
    const std::string back = dir / ("b" + std::to_string(i) + ".img");
    b.Ok({"restore", std::to_string(i), "--to", back});
    CHECK(SameFile(dir / ("v" + std::to_string(i) + ".img"), back));
  }
  b.Ok({"verify"});
  // b's own snapshot goes on from the numbers it learnt, and a sees it. Of a source seen
  // before, it seals no new map segment: a's refresh finds snapshot 1's in its catalog.
  b.Ok({"snapshot", dir / "v1.img"});
  const Refresh a_sees = RefreshAt(a);
  INFO(a_sees.line);
  CHECK(a_sees.incremental);
  CHECK(a.SnapshotIds() == std::set<int64_t>{1, 2, 3, 4});
  a.Ok({"restore", "4", "--to", dir / "a4.img"});
  CHECK(SameFile(dir / "v1.img", dir / "a4.img"));
}

TEST_CASE(
    "s3 cache refresh: a snapshot another host forgets goes from the cache incrementally, "
    "and after its prune the cache is rebuilt whole",
    "[s3lab]") {
  TempDir dir("s3refresh2");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 71, 2);
  WriteNoiseImage(dir / "two.img", 72, 2);
  WriteNoiseImage(dir / "three.img", 73, 2);
  a.Ok({"snapshot", dir / "one.img"});
  a.Ok({"snapshot", dir / "two.img"});
  a.Ok({"snapshot", dir / "three.img"});
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2, 3});

  // A forget adds a pack (its forget record and the new head): b follows that head.
  a.Ok({"forget", "1", "--allow-empty-source"});
  const Refresh forgot = RefreshAt(b);
  INFO(forgot.line);
  CHECK(forgot.incremental);
  CHECK(b.SnapshotIds() == std::set<int64_t>{2, 3});

  // A prune removes packs b's cache names: rebuilt whole.
  a.Ok({"forget", "2", "--allow-empty-source"});
  a.Ok({"prune"});
  const Refresh pruned = RefreshAt(b);
  INFO(pruned.line);
  CHECK_FALSE(pruned.incremental);
  CHECK_THAT(pruned.line, Catch::Contains("gone"));
  CHECK(b.SnapshotIds() == std::set<int64_t>{3});
  b.Ok({"restore", "3", "--to", dir / "three-b.img"});
  CHECK(SameFile(dir / "three.img", dir / "three-b.img"));
}

TEST_CASE(
    "s3 cache refresh: a snapshot stopped before its upload has put no pack in the bucket, and "
    "once committed its pack is indexed as a new one and its snapshot restores",
    "[s3lab]") {
  TempDir dir("s3refresh3");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 81, 2);
  WriteNoiseImage(dir / "two.img", 82, 2);
  a.Ok({"snapshot", dir / "one.img"});
  CHECK(b.SnapshotIds() == std::set<int64_t>{1});
  const std::map<std::string, uint64_t> before = S3PacksAt(a.url);

  // a's next snapshot stopped before its upload: a pack appears in the bucket whole, at its
  // first upload, so there is nothing of it yet, and b (a reader, which a writer does not keep
  // out) has nothing to refresh.
  RunOptions paused = a.Options({{"WANBACKUP_PAUSE", "snapshot.before-pack-sync"}});
  paused.err_file = dir / "snapshot.err";
  int exit_code = -1;
  {
    Background run({WB_WANBACKUP_BIN, "snapshot", dir / "two.img"}, paused);
    REQUIRE(WaitStopped(run.pid()));
    CHECK(S3PacksAt(a.url) == before);
    const RunResult listed = b.Ok({"snapshots"});
    INFO("stderr: " << listed.err);
    CHECK_FALSE(RefreshOf(listed).has_value());
    CHECK(b.SnapshotIds() == std::set<int64_t>{1});
    run.Kill(SIGCONT);
    exit_code = run.Wait(std::chrono::seconds(120));
  }
  INFO(testing::FileContents(dir / "snapshot.err"));
  REQUIRE(exit_code == 0);
  const Refresh whole = RefreshAt(b);
  INFO(whole.line);
  CHECK(whole.incremental);
  CHECK(whole.new_packs == 1);
  CHECK(whole.grown == 0);
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2});
  b.Ok({"restore", "2", "--to", dir / "two-b.img"});
  CHECK(SameFile(dir / "two.img", dir / "two-b.img"));
  // b's prune keeps it.
  b.Ok({"prune", "--max-unused", "0"});
  CHECK(a.SnapshotIds() == std::set<int64_t>{1, 2});
  a.Ok({"restore", "2", "--to", dir / "two-a.img"});
  CHECK(SameFile(dir / "two.img", dir / "two-a.img"));
}

TEST_CASE(
    "s3 cache refresh: a new head that lists a snapshot whose chunk is gone is Corruption "
    "naming repair catalog, and the cache keeps what it listed",
    "[s3lab]") {
  TempDir dir("s3refresh4");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 91, 2);
  WriteNoiseImage(dir / "two.img", 92, 2);
  a.Ok({"snapshot", dir / "one.img"});
  CHECK(b.SnapshotIds() == std::set<int64_t>{1});

  // Packs closed after each record: the new chunk has a pack of its own, which goes.
  const std::map<std::string, uint64_t> before = S3PacksAt(a.url);
  RunOptions small_packs = a.Options();
  small_packs.env["WANBACKUP_TEST_PACK_SIZE"] = "256K";
  REQUIRE(testing::Local({"snapshot", dir / "two.img"}, small_packs).exit_code == 0);
  std::string largest;
  uint64_t largest_size = 0;
  for (const auto& [key, size] : S3PacksAt(a.url)) {
    if (before.count(key) == 0 && size > largest_size) {
      largest = key;
      largest_size = size;
    }
  }
  REQUIRE(largest_size > (4u << 20));  // the 4 MiB chunk of noise
  testing::RemoveS3Object(a.url, largest);

  const int64_t packs_known = CacheCount(b, "SELECT COUNT(*) FROM packs");
  for (int i = 0; i < 2; ++i) {  // and again: nothing was left half done
    const RunResult r = b.Wb({"snapshots"});
    CheckOneLineError(r, 3, "repair catalog");
    CHECK_THAT(r.err, Catch::Contains("snapshot 2"));
  }
  CHECK(CacheCount(b, "SELECT COUNT(*) FROM packs") == packs_known);
  CHECK(CacheCount(b, "SELECT COUNT(*) FROM snapshots") == 1);
}

TEST_CASE(
    "s3 cache refresh: a refresh killed before its commit leaves the old cache, and the next "
    "command refreshes it",
    "[s3lab]") {
  TempDir dir("s3refresh5");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 101, 2);
  WriteNoiseImage(dir / "two.img", 102, 2);
  a.Ok({"snapshot", dir / "one.img"});
  CHECK(b.SnapshotIds() == std::set<int64_t>{1});
  a.Ok({"snapshot", dir / "two.img"});

  const int64_t packs_known = CacheCount(b, "SELECT COUNT(*) FROM packs");
  for (const char* point : {"cache-refresh.after-pack", "cache-refresh.before-commit"}) {
    INFO(point);
    CHECK(b.Wb({"snapshots"}, {{"WANBACKUP_FAILPOINT", point}}).exit_code == -1);
    CHECK(CacheCount(b, "SELECT COUNT(*) FROM packs") == packs_known);
    CHECK(CacheCount(b, "SELECT COUNT(*) FROM snapshots") == 1);
  }
  const Refresh next = RefreshAt(b);
  INFO(next.line);
  CHECK(next.incremental);
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2});
  b.Ok({"restore", "2", "--to", dir / "two-b.img"});
  CHECK(SameFile(dir / "two.img", dir / "two-b.img"));
}

TEST_CASE(
    "s3 cache refresh: snapshots the cache lost are rebuilt from their sealed records in packs "
    "it indexed before",
    "[s3lab]") {
  TempDir dir("s3refresh6");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 111, 2);
  WriteNoiseImage(dir / "two.img", 112, 2);
  WriteNoiseImage(dir / "three.img", 113, 2);
  a.Ok({"snapshot", dir / "one.img"});
  a.Ok({"snapshot", dir / "two.img"});
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2});
  testing::Sql(b.cache + "/catalog.db", "DELETE FROM snapshot_maps; DELETE FROM snapshots;");

  // The newest head lists all three: two come back from the old packs' records and segments.
  a.Ok({"snapshot", dir / "three.img"});
  const Refresh next = RefreshAt(b);
  INFO(next.line);
  CHECK(next.incremental);
  CHECK(next.new_packs == 1);
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2, 3});
  b.Ok({"restore", "1", "--to", dir / "one-b.img"});
  CHECK(SameFile(dir / "one.img", dir / "one-b.img"));
}

TEST_CASE(
    "s3 cache refresh: a pack that grew only at its end is indexed from where the cache left it, "
    "and one replaced by a larger pack is not: the cache is rebuilt whole",
    "[s3lab]") {
  TempDir dir("s3refresh7");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 121, 2);
  WriteNoiseImage(dir / "two.img", 122, 3);
  // Snapshot 1's pack (its chunks, then its records), and snapshot 2's, larger: the same pack
  // header, as every pack of the repository has.
  const auto snapshot_pack = [&](const std::string& image) {
    const std::map<std::string, uint64_t> before = S3PacksAt(a.url);
    a.Ok({"snapshot", image});
    std::pair<std::string, uint64_t> largest;
    for (const auto& [key, size] : S3PacksAt(a.url)) {
      if (before.count(key) == 0 && size > largest.second) largest = {key, size};
    }
    return largest;
  };
  const auto [one, one_size] = snapshot_pack(dir / "one.img");
  const auto [two, two_size] = snapshot_pack(dir / "two.img");
  CHECK(b.SnapshotIds() == std::set<int64_t>{1, 2});
  REQUIRE(one != two);
  REQUIRE(two_size > one_size);

  // Bytes appended to it, what came before untouched: the tail is read, nothing else.
  std::vector<uint8_t> grown = testing::ReadS3Object(a.url, one, one_size);
  grown.resize(one_size + 100, 0x5a);
  testing::PutS3Object(a.url, one, grown);
  const Refresh tail = RefreshAt(b);
  INFO(tail.line);
  CHECK(tail.incremental);
  CHECK(tail.grown == 1);
  // Those bytes are no record: the cache remembers it read them and does not read them again,
  // so a writer beside another command on this host (which holds the cache's refresh lock
  // shared, as this test does) does not wait for a refresh (exit 7).
  CHECK_FALSE(RefreshOf(b.Ok({"snapshots"})).has_value());
  {
    const UniqueFd held(::open((b.cache + "/refresh.lock").c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(held.valid());
    REQUIRE(::flock(held.get(), LOCK_SH) == 0);
    b.Ok({"snapshot", dir / "one.img"});
  }

  // Replaced by snapshot 2's pack: the rows of snapshot 1's records would name bytes of
  // snapshot 2's chunks. Rebuilt whole, which finds snapshot 1 gone.
  testing::PutS3Object(a.url, one, testing::ReadS3Object(a.url, two, two_size));
  const RunResult swapped = b.Wb({"snapshots"});
  INFO("stderr: " << swapped.err);
  CHECK(swapped.err.find("refreshed the catalog cache incrementally") == std::string::npos);
  CheckOneLineError(swapped, 3, "repair catalog");
  CHECK_THAT(swapped.err, Catch::Contains("snapshot 1"));
}
