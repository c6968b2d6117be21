// A second host's catalog cache rebuilt whole from an S3 repository of many packs (issue 42):
// the packs' record headers are read many packs at once (repository/internal/header_prefetch.h),
// and the catalog must be the sequential walk's, row for row. WANBACKUP_TEST_PACK_READERS=0 makes
// a host walk the packs one read at a time, as before; each test compares two hosts that rebuild
// the same bucket, one each way.
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "store/s3_host.h"
#include "support/repo_cli.h"

using namespace wanbackup;
using wanbackup::testing::RunResult;
using wanbackup::testing::S3Host;
using wanbackup::testing::TempDir;

namespace {

const std::map<std::string, std::string> kSequential = {{"WANBACKUP_TEST_PACK_READERS", "0"}};

// Every row of the cache's catalog that a rebuild makes (a pack's creation time aside), in id
// order, as one text per table.
std::map<std::string, std::string> CatalogRows(const S3Host& host) {
  std::map<std::string, std::string> rows;
  for (const auto& [table, query] : std::map<std::string, std::string>{
           {"packs", "id||' '||name||' '||size AS r FROM packs ORDER BY id"},
           {"chunks",
            "id||' '||hex(digest)||' '||pack_id||' '||offset||' '||stored_size||' '||raw_size "
            "AS r FROM chunks ORDER BY id"},
           {"snapshots",
            "id||' '||source||' '||size_bytes||' '||status||' '||chunks_total AS r FROM "
            "snapshots ORDER BY id"},
           {"snapshot_maps",
            "snapshot_id||' '||first_index||' '||count||' '||hex(encoded) AS r FROM "
            "snapshot_maps ORDER BY snapshot_id, first_index"}}) {
    std::string sql = "SELECT group_concat(r, ';') FROM (SELECT ";
    sql += query;
    sql += ")";
    rows[table] = testing::SqlText(host.cache + "/catalog.db", sql);
  }
  return rows;
}

// The reads the cache's rebuild said it made (REQUIREs the line).
uint64_t RebuildReads(const RunResult& r) {
  static const std::regex full(R"(rebuilt the catalog cache.*: \d+ packs? indexed, (\d+) reads)");
  std::smatch m;
  INFO("stderr: " << r.err);
  REQUIRE(std::regex_search(r.err, m, full));
  return std::stoull(m[1]);
}

// A repository of three snapshots in packs of one chunk each: some thirty packs, more than the
// rebuild reads at once.
void ManyPacks(const TempDir& dir, const S3Host& a) {
  a.Ok({"init", "--key-file", a.key});
  testing::RunOptions small_packs = a.Options();
  small_packs.env["WANBACKUP_TEST_PACK_SIZE"] = "256K";
  for (int i = 1; i <= 3; ++i) {
    const std::string image = dir / ("v" + std::to_string(i) + ".img");
    testing::WriteNoiseImage(image, 300 + static_cast<uint64_t>(i), 10);
    REQUIRE(testing::Local({"snapshot", image}, small_packs).exit_code == 0);
  }
  REQUIRE(testing::S3PacksAt(a.url).size() > 24);
}

}  // namespace

TEST_CASE(
    "s3 cache rebuild: headers read many packs at once give the sequential walk's catalog, row "
    "for row, with as many reads, and every snapshot restores bit-exact",
    "[s3lab]") {
  TempDir dir("s3rebuild1");
  const S3Host a(dir, "a", testing::NewS3RepoUrl());
  ManyPacks(dir, a);
  const S3Host one(dir, "one", a.url);
  const S3Host many(dir, "many", a.url);

  const RunResult sequential = one.Wb({"snapshots", "--json"}, kSequential);
  const RunResult parallel = many.Wb({"snapshots", "--json"});
  REQUIRE(sequential.exit_code == 0);
  REQUIRE(parallel.exit_code == 0);
  CHECK(parallel.out == sequential.out);
  // Nothing damaged: the reads ahead are the very reads the walk makes, none more.
  CHECK(RebuildReads(parallel) == RebuildReads(sequential));
  const std::map<std::string, std::string> want = CatalogRows(one);
  const std::map<std::string, std::string> got = CatalogRows(many);
  CHECK(std::count(want.at("chunks").begin(), want.at("chunks").end(), ';') >= 27);
  for (const auto& [table, rows] : want) {
    INFO(table);
    CHECK(got.at(table) == rows);
  }
  CHECK(many.SnapshotIds() == std::set<int64_t>{1, 2, 3});
  for (int i = 1; i <= 3; ++i) {
    const std::string back = dir / ("back" + std::to_string(i) + ".img");
    many.Ok({"restore", std::to_string(i), "--to", back});
    CHECK(testing::SameFile(dir / ("v" + std::to_string(i) + ".img"), back));
  }
}

TEST_CASE(
    "s3 cache rebuild: a record header damaged in one pack among many gives the sequential "
    "walk's outcome, and a pack removed among many too",
    "[s3lab]") {
  TempDir dir("s3rebuild2");
  const S3Host a(dir, "a", testing::NewS3RepoUrl());
  ManyPacks(dir, a);
  // The record header of a pack of one chunk in the middle of the listing scribbled over (its
  // CRC fails), then another such pack removed: each time the two hosts must end alike, exit
  // code, stderr and output.
  std::vector<std::pair<std::string, uint64_t>> chunk_packs;
  for (const auto& [key, size] : testing::S3PacksAt(a.url)) {
    if (size > (4u << 20)) chunk_packs.emplace_back(key, size);
  }
  REQUIRE(chunk_packs.size() > 20);
  int round = 0;
  for (const bool remove : {false, true}) {
    const auto& [key, size] = chunk_packs[chunk_packs.size() / 2 + (remove ? 3 : 0)];
    if (remove) {
      testing::RemoveS3Object(a.url, key);
    } else {
      testing::ScribbleS3Object(a.url, key, size, 32 + 20, "damaged!");
    }
    ++round;
    const S3Host one(dir, "one" + std::to_string(round), a.url);
    const S3Host many(dir, "many" + std::to_string(round), a.url);
    const RunResult sequential = one.Wb({"snapshots", "--json"}, kSequential);
    const RunResult parallel = many.Wb({"snapshots", "--json"});
    INFO("sequential: " << sequential.exit_code << " " << sequential.err);
    INFO("parallel: " << parallel.exit_code << " " << parallel.err);
    CHECK(sequential.exit_code != 0);  // the newest head lists a snapshot that lost a chunk
    CHECK(parallel.exit_code == sequential.exit_code);
    CHECK(parallel.err == sequential.err);
    CHECK(parallel.out == sequential.out);
  }
}
