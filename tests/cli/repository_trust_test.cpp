// A repository that cannot be edited or lost without notice (docs/threat-model.md): the real
// binary on local images. The catalog is edited with SQL the way an attacker or a failing disk
// would; config.json the same way; catalog.db is deleted, truncated and overwritten.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "catalog/map_codec.h"
#include "support/repo_cli.h"

using wanbackup::testing::RepoCli;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::Scribble;
using wanbackup::testing::Sql;
using wanbackup::testing::SqlInt;
using wanbackup::testing::TempDir;
using wanbackup::testing::TreeContents;
using wanbackup::testing::WriteNoiseImage;

namespace {

// The ids in snapshot `id`'s (single) catalog map segment.
std::vector<int64_t> MapIds(const std::string& db_path, int64_t id) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT count, encoded FROM snapshot_maps WHERE snapshot_id = ?",
                             -1, &st, nullptr) == SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const auto count = static_cast<size_t>(sqlite3_column_int64(st, 0));
  const std::string blob(static_cast<const char*>(sqlite3_column_blob(st, 1)),
                         static_cast<size_t>(sqlite3_column_bytes(st, 1)));
  sqlite3_finalize(st);
  sqlite3_close(db);
  auto ids = wanbackup::catalog::DecodeChunkMap(blob, count);
  REQUIRE(ids.ok());
  return *ids;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Cuts each pack after its last chunk record: the sealed records a snapshot appends go, as in
// a repository made before format 2.
void TruncateToChunks(const RepoCli& repo) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(repo.catalog().c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT p.name, coalesce(max(c.offset + 64 + c.stored_size), 32) "
                             "FROM packs p LEFT JOIN chunks c ON c.pack_id = p.id AND c.kind = 0 "
                             "GROUP BY p.id",
                             -1, &st, nullptr) == SQLITE_OK);
  std::vector<std::pair<std::string, int64_t>> ends;
  while (sqlite3_step(st) == SQLITE_ROW) {
    ends.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                      sqlite3_column_int64(st, 1));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  REQUIRE_FALSE(ends.empty());
  for (const auto& [name, end] : ends) {
    std::filesystem::resize_file(repo.path() + "/packs/" + name.substr(0, 2) + "/" + name + ".pack",
                                 static_cast<uintmax_t>(end));
    Sql(repo.catalog(),
        "UPDATE packs SET size = " + std::to_string(end) + " WHERE name = '" + name + "'");
  }
}

// Three snapshots: 1 and 3 of image a (3 differs in one chunk), 2 of image b.
void ThreeSnapshots(const RepoCli& repo) {
  const TempDir& dir = repo.dir();
  WriteNoiseImage(dir / "a.img", 1, 4);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img", "--tag", "first"});
  repo.Ok({"snapshot", dir / "b.img"});
  WriteNoiseImage(dir / "a3.img", 1, 4);
  Scribble(dir / "a3.img", 3 * wanbackup::testing::kTestChunk, "changed");
  repo.Ok({"snapshot", dir / "a3.img", "--tag", "third"});
}

}  // namespace

TEST_CASE("trust: each SQL edit of the catalog is reported as tampering naming its snapshot",
          "[trust]") {
  struct Edit {
    const char* what;
    int64_t tampered;
    std::vector<int64_t> untouched;
  };
  const Edit edit =
      GENERATE(Edit{"swap map segments", 1, {2}}, Edit{"change a map entry", 2, {1, 3}},
               Edit{"change a size", 2, {1, 3}}, Edit{"delete a chunk row", 2, {1, 3}},
               Edit{"point a chunk row elsewhere", 2, {1, 3}});
  INFO(edit.what);
  TempDir dir("trust");
  RepoCli repo(dir);
  ThreeSnapshots(repo);
  const std::string db = repo.catalog();
  const std::vector<int64_t> ids = MapIds(db, 2);
  const std::string what = edit.what;
  if (what == "swap map segments") {
    Sql(db,
        "CREATE TEMP TABLE m AS SELECT * FROM snapshot_maps WHERE snapshot_id IN (1, 3);"
        "UPDATE snapshot_maps SET encoded = (SELECT encoded FROM m WHERE snapshot_id = 3) "
        "WHERE snapshot_id = 1;"
        "UPDATE snapshot_maps SET encoded = (SELECT encoded FROM m WHERE snapshot_id = 1) "
        "WHERE snapshot_id = 3;");
  } else if (what == "change a map entry") {
    std::vector<int64_t> changed = ids;
    changed[0] = ids[2];
    Sql(db, "UPDATE snapshot_maps SET encoded = x'" +
                Hex(wanbackup::catalog::EncodeChunkMap(changed)) + "' WHERE snapshot_id = 2");
  } else if (what == "change a size") {
    Sql(db, "UPDATE snapshots SET size_bytes = size_bytes - 512 WHERE id = 2");
  } else if (what == "delete a chunk row") {
    Sql(db, "DELETE FROM chunks WHERE id = " + std::to_string(ids[0]));
  } else {
    const int64_t other =
        SqlInt(db, "SELECT offset FROM chunks WHERE id = " + std::to_string(ids[2]));
    Sql(db, "UPDATE chunks SET offset = " + std::to_string(other) +
                " WHERE id = " + std::to_string(ids[0]));
  }

  RunResult verify = repo.Wb({"verify"});
  INFO("verify: " << verify.out << verify.err);
  CHECK(verify.exit_code == 3);
  CHECK(verify.out.find("DAMAGED snapshot " + std::to_string(edit.tampered)) != std::string::npos);
  // The summary counts the damaged snapshots beside the damaged chunks (an edit of a map or a
  // size damages no chunk in the packs).
  const size_t damaged = edit.untouched.size() == 1 ? 2 : 1;
  CHECK(verify.out.find(std::to_string(damaged) + (damaged == 1 ? " snapshot" : " snapshots") +
                        " damaged (") != std::string::npos);
  if (what != "point a chunk row elsewhere") {
    CHECK(verify.out.find("; 0 chunks damaged, ") != std::string::npos);
  }
  for (int64_t id : edit.untouched) {
    CHECK(verify.out.find("DAMAGED snapshot " + std::to_string(id)) == std::string::npos);
    RunResult clean = repo.Wb({"verify", "--snapshot", std::to_string(id)});
    INFO("verify --snapshot " << id << ": " << clean.out << clean.err);
    CHECK(clean.exit_code == 0);
  }
  RunResult restore = repo.Wb({"restore", std::to_string(edit.tampered), "--to", dir / "out.img"});
  INFO("restore: " << restore.err);
  CHECK(restore.exit_code == 3);
  CHECK(restore.err.find("snapshot " + std::to_string(edit.tampered)) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "out.img"));
}

TEST_CASE("trust: a deleted, truncated or overwritten catalog is rebuilt from the packs",
          "[trust]") {
  TempDir dir("rebuild");
  RepoCli repo(dir);
  ThreeSnapshots(repo);
  WriteNoiseImage(dir / "b5.img", 5, 3);
  repo.Ok({"snapshot", dir / "b.img", "--tag", "again"});  // the same data as snapshot 2
  repo.Ok({"snapshot", dir / "b5.img", "--tag", "fifth"});
  const std::string before = repo.Ok({"snapshots", "--json"}).out;
  const std::string db = repo.catalog();

  const std::string damage = GENERATE("delete", "truncate", "overwrite");
  INFO(damage);
  if (damage == "delete") {
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(db + suffix);
  } else if (damage == "truncate") {
    std::filesystem::resize_file(db, 4096);
  } else {
    std::ofstream(db, std::ios::binary | std::ios::trunc) << "not a database at all";
  }
  RunResult refused = repo.Wb({"snapshots"});
  CHECK(refused.exit_code == 3);
  CHECK(refused.err.find("wanbackup repair catalog") != std::string::npos);

  repo.Ok({"repair", "catalog"});
  CHECK(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out) ==
        nlohmann::json::parse(before));
  repo.Ok({"verify"});
  const std::map<std::string, std::string> images = {
      {"1", "a.img"}, {"2", "b.img"}, {"3", "a3.img"}, {"4", "b.img"}, {"5", "b5.img"}};
  for (const auto& [id, image] : images) {
    repo.Ok({"restore", id, "--to", dir / ("r" + id + ".img")});
    CHECK(SameFile(dir / ("r" + id + ".img"), dir / image));
  }
  // The repository goes on: a new snapshot after the rebuild gets the next id.
  repo.Ok({"snapshot", dir / "a.img"});
  CHECK(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out).size() == 6);
}

TEST_CASE("trust: a config.json turned unencrypted or weakened is refused and nothing written",
          "[trust]") {
  TempDir dir("config");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  repo.Ok({"init"}, "a passphrase");
  repo.Ok({"snapshot", dir / "a.img"}, "a passphrase");
  const std::string config = repo.path() + "/config.json";
  auto json = nlohmann::json::parse(std::ifstream(config));

  const std::string change = GENERATE("mode none", "half the KDF memory", "compression level");
  INFO(change);
  if (change == "mode none") {
    json["encryption"] = {{"mode", "none"}};
  } else if (change == "half the KDF memory") {
    json["encryption"]["kdf"]["memlimit"] =
        json["encryption"]["kdf"]["memlimit"].get<uint64_t>() / 2;
  } else {
    json["compression"]["level"] = 19;
  }
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  const auto files = TreeContents(repo.path());
  RunResult snap = repo.Wb({"snapshot", dir / "a.img"}, "a passphrase");
  INFO(snap.err);
  CHECK(snap.exit_code == 3);
  CHECK(snap.err.find("config.json") != std::string::npos);
  CHECK(repo.Wb({"verify"}, "a passphrase").exit_code == 3);
  CHECK(TreeContents(repo.path()) == files);
}

TEST_CASE("trust: an unencrypted repository says so at every write, and at reads", "[trust]") {
  TempDir dir("plain");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  repo.Ok({"init", "--insecure-no-encryption"});
  // No credentials (RepoCli's default key file is refused) and the flag: unencrypted_repo_test.
  const std::map<std::string, std::string> no_key = {{"WANBACKUP_KEY_FILE", ""}};
  RunResult snap = repo.Ok({"snapshot", dir / "a.img", "--insecure-no-encryption"}, "", no_key);
  CHECK(snap.err.find("NOT encrypted") != std::string::npos);
  CHECK(repo.Ok({"snapshots", "--insecure-no-encryption"}, "", no_key).err.find("NOT encrypted") !=
        std::string::npos);
}

TEST_CASE("trust: a format-1 repository is refused naming migrate, and migrate seals it",
          "[trust]") {
  TempDir dir("migrate");
  RepoCli repo(dir);
  ThreeSnapshots(repo);
  // Make it what the previous release wrote: config format 1 without authentication, packs
  // without sealed records (each ends after its last chunk), catalog schema 1 without settings.
  TruncateToChunks(repo);
  const std::string config = repo.path() + "/config.json";
  auto json = nlohmann::json::parse(std::ifstream(config));
  json["format"] = 1;
  json.erase("authentication");
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  Sql(repo.catalog(),
      "PRAGMA foreign_keys = OFF;"
      "DELETE FROM chunks WHERE kind > 0;"
      "ALTER TABLE chunks DROP COLUMN kind;"
      "CREATE TABLE s1 (id INTEGER PRIMARY KEY, source TEXT NOT NULL, tag TEXT NOT NULL DEFAULT "
      "'', hostname TEXT NOT NULL DEFAULT '', size_bytes INTEGER NOT NULL, block_size INTEGER "
      "NOT NULL, chunk_size INTEGER NOT NULL, started INTEGER NOT NULL, finished INTEGER NOT "
      "NULL DEFAULT 0, status TEXT NOT NULL, bytes_read INTEGER NOT NULL DEFAULT 0, bytes_new "
      "INTEGER NOT NULL DEFAULT 0, bytes_stored INTEGER NOT NULL DEFAULT 0, chunks_total "
      "INTEGER NOT NULL DEFAULT 0, chunks_new INTEGER NOT NULL DEFAULT 0, chunks_zero INTEGER "
      "NOT NULL DEFAULT 0);"
      "INSERT INTO s1 SELECT id, source, tag, hostname, size_bytes, block_size, chunk_size, "
      "started, finished, status, bytes_read, bytes_new, bytes_stored, chunks_total, "
      "chunks_new, chunks_zero FROM snapshots;"
      "DROP TABLE snapshots; ALTER TABLE s1 RENAME TO snapshots; DROP TABLE settings;"
      "DROP TABLE job_runs; DROP TABLE replicas; PRAGMA user_version = 1;");
  // As the previous release left it, no client saw a head in it: this client's trust anchor,
  // which did, would refuse it (the downgrade it guards against; head_anchor_test.cpp).
  const std::string id = json["repository_id"];
  std::filesystem::remove_all(std::string(std::getenv("WANBACKUP_SECURITY_DIR")) + "/" + id);

  RunResult refused = repo.Wb({"snapshots"});
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("wanbackup migrate") != std::string::npos);

  RunResult migrated = repo.Ok({"migrate"});
  CHECK(migrated.err.find("sealed 3 snapshot(s)") != std::string::npos);
  CHECK(nlohmann::json::parse(std::ifstream(config))["format"] == 3);
  repo.Ok({"verify"});
  repo.Ok({"restore", "3", "--to", dir / "r3.img"});
  CHECK(SameFile(dir / "r3.img", dir / "a3.img"));
  CHECK(repo.Ok({"migrate"}).err.find("nothing to do") != std::string::npos);
  // Sealed now: an edit is caught like in any format-2 repository.
  Sql(repo.catalog(), "UPDATE snapshots SET tag = 'forged' WHERE id = 1");
  CHECK(repo.Wb({"verify"}).exit_code == 3);
}
