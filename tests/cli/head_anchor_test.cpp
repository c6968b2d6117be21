// Storage an attacker can write cannot turn the repository back or swap it (issue 44,
// docs/threat-model.md, "The head and the trust anchor"): the real binary on local images. The
// attacker replaces the repository's files, rolls catalog.db back, or removes the newest pack;
// every command that would otherwise use the older or other snapshot set exits 3. Each test
// runs with the process's own temporary security directory (support/catch_main.cpp); the
// attacker's commands use another one, as they would run on another machine.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "repository/keys.h"
#include "support/repo_cli.h"

using wanbackup::testing::CheckOneLineError;
using wanbackup::testing::RepoCli;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::Sql;
using wanbackup::testing::TempDir;
using wanbackup::testing::WriteNoiseImage;
namespace fs = std::filesystem;

namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string RepositoryId(const std::string& repo) {
  return nlohmann::json::parse(ReadText(repo + "/config.json"))["repository_id"];
}

// Runs wanbackup as the attacker, on the attacker's machine (its own trust anchors).
RunResult Attacker(const TempDir& dir, const std::string& repo, std::vector<std::string> args) {
  wanbackup::testing::RunOptions o;
  o.env["WANBACKUP_REPO"] = repo;
  o.env["WANBACKUP_SECURITY_DIR"] = dir / "attacker-anchors";
  o.timeout = std::chrono::seconds(120);
  RunResult r = wanbackup::testing::Local(std::move(args), o);
  INFO("attacker: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// Replaces every file of `victim` by those of `attacker` (the storage is the attacker's).
void ReplaceRepository(const std::string& victim, const std::string& attacker) {
  fs::remove_all(victim);
  fs::copy(attacker, victim, fs::copy_options::recursive);
}

// catalog.db and its WAL, copied aside (`to` empty: removed).
void CopyCatalog(const std::string& from_repo, const std::string& to_dir) {
  fs::create_directories(to_dir);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string name = std::string("catalog.db") + suffix;
    const fs::path from = fs::path(from_repo) / name, to = fs::path(to_dir) / name;
    fs::remove(to);
    if (fs::exists(from)) fs::copy_file(from, to);
  }
}

std::string NewestPack(const std::string& repo) {
  std::string newest;
  fs::file_time_type when{};
  for (const auto& e : fs::recursive_directory_iterator(repo + "/packs")) {
    if (!e.is_regular_file() || e.path().extension() != ".pack") continue;
    if (newest.empty() || e.last_write_time() > when) {
      newest = e.path().string();
      when = e.last_write_time();
    }
  }
  REQUIRE(!newest.empty());
  return newest;
}

void RequireRefused(const RunResult& r, const std::string& says) {
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find(says) != std::string::npos);
}

// Two snapshots: 1 of a.img, 2 of b.img; the catalog as it was after 1 is kept in dir/old.
void TwoSnapshotsKeepingTheFirstCatalog(const RepoCli& repo) {
  const TempDir& dir = repo.dir();
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  CopyCatalog(repo.path(), dir / "old");
  repo.Ok({"snapshot", dir / "b.img"});
}

}  // namespace

TEST_CASE("head: a catalog rolled back to an older snapshot set is refused, never used", "[head]") {
  TempDir dir("head-rollback");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  CopyCatalog(dir / "old", repo.path());  // the attacker puts the old catalog back

  RequireRefused(repo.Wb({"snapshots"}), "repair catalog");
  RequireRefused(repo.Wb({"snapshots", "--json"}), "head");
  RequireRefused(repo.Wb({"verify"}), "repair catalog");
  RequireRefused(repo.Wb({"restore", "latest", "--to", dir / "out.img"}), "repair catalog");
  CHECK_FALSE(fs::exists(dir / "out.img"));
  RequireRefused(repo.Wb({"forget", "1"}), "repair catalog");
  RequireRefused(repo.Wb({"prune"}), "repair catalog");

  // What the message says to run brings both snapshots back.
  repo.Ok({"repair", "catalog"});
  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}));
  CHECK(list.size() == 2);
  repo.Ok({"restore", "latest", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "b.img"));
}

TEST_CASE("head: a catalog that lacks the newest snapshot is refused", "[head]") {
  TempDir dir("head-extra");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  // The catalog hides snapshot 2 (as a stale index would), while the head lists it.
  Sql(repo.catalog(),
      "DELETE FROM snapshot_maps WHERE snapshot_id = 2;"
      "DELETE FROM snapshots WHERE id = 2;");
  RequireRefused(repo.Wb({"snapshots"}), "snapshot 2 is missing from the catalog");
  RequireRefused(repo.Wb({"restore", "latest", "--to", dir / "out.img"}), "repair catalog");
  CHECK_FALSE(fs::exists(dir / "out.img"));
}

TEST_CASE("head: the newest pack removed is reported, not a silently older latest", "[head]") {
  TempDir dir("head-pack");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  const bool with_catalog = GENERATE(false, true);
  INFO((with_catalog ? "catalog rolled back too" : "catalog untouched"));
  fs::remove(NewestPack(repo.path()));
  if (with_catalog) CopyCatalog(dir / "old", repo.path());

  RequireRefused(repo.Wb({"snapshots"}), "head");
  RequireRefused(repo.Wb({"verify"}), "head");
  RequireRefused(repo.Wb({"restore", "latest", "--to", dir / "out.img"}), "head");
  CHECK_FALSE(fs::exists(dir / "out.img"));
}

TEST_CASE("anchor: the loss of the newest pack is accepted only by 'wanbackup trust'", "[head]") {
  TempDir dir("head-accept");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  fs::remove(NewestPack(repo.path()));
  // The pack is gone for good: rebuild what is left (snapshot 1, head 1). The catalog records
  // the missing pack, and says so (before: exit 0, naming no lost snapshot; round 11, AB1).
  const RunResult repair = repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  CHECK(repair.exit_code == 3);
  CHECK(repair.err.find("1 pack(s) an earlier catalog named are not there") != std::string::npos);
  RequireRefused(repo.Wb({"snapshots"}), "wanbackup trust");
  const RunResult trusted = repo.Ok({"trust"});
  CHECK(trusted.err.find("head counter: 2 -> 1") != std::string::npos);
  repo.Ok({"restore", "latest", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "a.img"));
  repo.Ok({"snapshot", dir / "b.img"});  // and the repository goes on
  repo.Ok({"verify"});
  CHECK(repo.Wb({"prune"}).exit_code == 3);  // until the pack is given up
  repo.Ok({"forget", "--lost-packs"});
  repo.Ok({"prune"});
}

TEST_CASE("anchor: an unencrypted repository swapped in is refused with the victim's passphrase",
          "[anchor]") {
  TempDir dir("anchor-swap");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "evil.img", 9, 3);
  repo.Ok({"init"}, "victim-pass");
  repo.Ok({"snapshot", dir / "a.img"}, "victim-pass");

  const std::string evil = dir / "evil";
  Attacker(dir, evil, {"init", "--insecure-no-encryption"});
  Attacker(dir, evil, {"snapshot", dir / "evil.img", "--insecure-no-encryption"});
  ReplaceRepository(repo.path(), evil);

  RequireRefused(repo.Wb({"restore", "latest", "--to", dir / "out.img"}, "victim-pass"),
                 "replaced");
  CHECK_FALSE(fs::exists(dir / "out.img"));
  RequireRefused(repo.Wb({"snapshots"}, "victim-pass"), "wanbackup trust");
}

TEST_CASE("anchor: an unencrypted repository forged with the victim's id is refused", "[anchor]") {
  REQUIRE(wanbackup::pipeline::InitCrypto().ok());
  TempDir dir("anchor-forge");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "evil.img", 9, 3);
  repo.Ok({"init"}, "victim-pass");
  repo.Ok({"snapshot", dir / "a.img"}, "victim-pass");
  const std::string victim_id = RepositoryId(repo.path());

  // The attacker makes an unencrypted repository, gives it the victim's id (config.json with a
  // MAC under the id's public key, the catalog's setting), and fills it.
  const std::string evil = dir / "evil";
  Attacker(dir, evil, {"init", "--insecure-no-encryption"});
  nlohmann::json config = nlohmann::json::parse(ReadText(evil + "/config.json"));
  config["repository_id"] = victim_id;
  config.erase("authentication");
  const auto mac =
      wanbackup::pipeline::KeySet::Unencrypted(victim_id).ConfigMac(config.dump(2) + "\n");
  config["authentication"] = wanbackup::ToHex(mac.data(), mac.size());
  std::ofstream(evil + "/config.json", std::ios::trunc) << config.dump(2) << "\n";
  Sql(evil + "/catalog.db",
      "UPDATE settings SET value = '" + victim_id + "' WHERE key = 'repository_id'");
  fs::remove_all(dir / "attacker-anchors");  // the attacker's own checks know the old id
  Attacker(dir, evil, {"snapshot", dir / "evil.img", "--insecure-no-encryption"});
  ReplaceRepository(repo.path(), evil);
  REQUIRE(RepositoryId(repo.path()) == victim_id);

  RequireRefused(repo.Wb({"restore", "latest", "--to", dir / "out.img"}, "victim-pass"),
                 "NOT encrypted");
  CHECK_FALSE(fs::exists(dir / "out.img"));
  RequireRefused(repo.Wb({"verify"}, "victim-pass"), "wanbackup trust");
}

TEST_CASE("anchor: a repository re-created by init at the same path is simply the new one",
          "[anchor]") {
  TempDir dir("anchor-reinit");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  fs::remove_all(repo.path());
  fs::remove(repo.key());
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  repo.Ok({"verify"});
}

TEST_CASE("anchor: anchors are private files written where the variable says", "[anchor]") {
  TempDir dir("anchor-files");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  const std::map<std::string, std::string> env = {{"WANBACKUP_SECURITY_DIR", dir / "sec"}};
  repo.Ok({"init", "--key-file", repo.key()}, "", env);
  repo.Ok({"snapshot", dir / "a.img"}, "", env);
  const std::string id = RepositoryId(repo.path());
  struct stat st {};
  REQUIRE(::stat((dir / "sec/" + id).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((dir / "sec/" + id + "/anchor").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const std::string anchor = ReadText(dir / "sec/" + id + "/anchor");
  CHECK(anchor.find("head_counter 1\n") != std::string::npos);
  CHECK(anchor.find("encryption keyfile\n") != std::string::npos);
  CHECK(anchor.find("location " + fs::canonical(repo.path()).string() + "\n") != std::string::npos);
}

TEST_CASE(
    "head: a snapshot killed before its commit, then another: repair keeps both, by any "
    "pack order",
    "[head]") {
  const bool mtimes_lost = GENERATE(false, true);
  INFO((mtimes_lost ? "packs copied without their mtimes" : "packs as written"));
  TempDir dir("head-crash");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  WriteNoiseImage(dir / "b.img", 2, 2);
  WriteNoiseImage(dir / "c.img", 3, 2);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  // Killed after its snapshot record and head are in the pack, before the catalog commit: a
  // head with the next counter sits in a pack no catalog names, and the next snapshot writes
  // another head with that same counter.
  const RunResult killed =
      repo.Wb({"snapshot", dir / "b.img"}, "", {{"WANBACKUP_FAILPOINT", "snapshot.before-finish"}});
  CHECK(killed.exit_code == -1);
  repo.Ok({"snapshot", dir / "c.img"});
  if (mtimes_lost) {  // pack order falls back to the names: the heads' order is left to chance
    const auto when = fs::file_time_type::clock::now();
    for (const auto& e : fs::recursive_directory_iterator(repo.path() + "/packs")) {
      if (e.is_regular_file()) fs::last_write_time(e.path(), when);
    }
  }
  // The committed head (2, listing 1 and 3) is the newest; snapshot 2 is complete and sealed,
  // so it is kept, never dropped, and a new head lists all three.
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO("repair: " << repair.out << repair.err);
  CHECK(repair.exit_code == 0);
  CHECK(repair.err.find("did not list snapshot(s) 2") != std::string::npos);
  CHECK(repair.err.find("new head (counter 3)") != std::string::npos);
  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}));
  REQUIRE(list.size() == 3);
  CHECK(list[2]["id"] == 3);
  repo.Ok({"restore", "latest", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "c.img"));
  repo.Ok({"restore", "2", "--to", dir / "out-b.img"});
  CHECK(SameFile(dir / "out-b.img", dir / "b.img"));
  repo.Ok({"verify"});
}

TEST_CASE("head: a forget killed before its commit, then a snapshot: repair loses nothing",
          "[head]") {
  TempDir dir("head-forget-crash");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "c.img", 3, 2);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  // The forget record and its head (counter 3, without snapshot 1) are durable, the catalog
  // commit never happens; the snapshot then commits its own head 3 listing 1, 2 and 3.
  const RunResult killed = repo.Wb({"forget", "1", "--allow-empty-source"}, "",
                                   {{"WANBACKUP_FAILPOINT", "forget.before-commit"}});
  CHECK(killed.exit_code == -1);
  repo.Ok({"snapshot", dir / "c.img"});
  const RunResult repair = repo.Wb({"repair", "catalog", "--json"});
  INFO("repair: " << repair.out << repair.err);
  CHECK(repair.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(repair.out);
  CHECK(report["lost"].empty());
  CHECK(report["snapshots"] == nlohmann::json::array({1, 2, 3}));
  repo.Ok({"restore", "1", "--to", dir / "out-a.img"});
  CHECK(SameFile(dir / "out-a.img", dir / "a.img"));
  repo.Ok({"restore", "2", "--to", dir / "out-b.img"});
  CHECK(SameFile(dir / "out-b.img", dir / "b.img"));
  repo.Ok({"restore", "3", "--to", dir / "out-c.img"});
  CHECK(SameFile(dir / "out-c.img", dir / "c.img"));
  repo.Ok({"verify"});
}

namespace {

// One value of the catalog (the first column of the first row `sql` gives).
std::string HeadTestSqlValue(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string value;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
    value = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return value;
}

std::string HeadTestPackPath(const std::string& repo, const std::string& name) {
  return repo + "/packs/" + name.substr(0, 2) + "/" + name + ".pack";
}

// Turns the repository into one the release before heads wrote: each head record is the last
// record of its pack (snapshot and forget append it last), so the pack is cut where it starts,
// and the catalog forgets the rows and the setting. What is left is byte for byte what that
// release wrote.
void RemoveEveryHead(const std::string& repo) {
  const std::string db = repo + "/catalog.db";
  for (;;) {
    const std::string row = HeadTestSqlValue(
        db,
        "SELECT packs.name || ' ' || chunks.offset || ' ' || (chunks.offset + 64 + "
        "chunks.stored_size) FROM chunks JOIN packs ON packs.id = chunks.pack_id WHERE "
        "chunks.kind = 4 LIMIT 1");
    if (row.empty()) break;
    std::istringstream in(row);
    std::string name;
    uintmax_t offset = 0, end = 0;
    in >> name >> offset >> end;
    const std::string pack = HeadTestPackPath(repo, name);
    REQUIRE(fs::file_size(pack) == end);  // the head is the pack's last record
    fs::resize_file(pack, offset);
    std::string sql = "UPDATE packs SET size = " + std::to_string(offset);
    sql += " WHERE name = '" + name + "'; DELETE FROM chunks WHERE kind = 4 AND offset = ";
    sql += std::to_string(offset) + " AND pack_id = (SELECT id FROM packs WHERE name = '";
    sql += name + "')";
    Sql(db, sql);
  }
  Sql(db, "DELETE FROM settings WHERE key = 'head'");
}

}  // namespace

TEST_CASE("head: repair seals a new head when a snapshot the head lists cannot be rebuilt",
          "[head]") {
  const std::string damage = GENERATE("oldest pack removed", "oldest pack damaged");
  INFO(damage);
  TempDir dir("head-repair-lost");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "c.img", 3, 2);
  // Snapshot 1 (a.img) in the oldest pack; snapshot 2 (b.img) and head 2, listing both, in
  // the next one.
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  const std::string oldest = HeadTestPackPath(
      repo.path(), HeadTestSqlValue(repo.catalog(), "SELECT name FROM packs ORDER BY id LIMIT 1"));
  if (damage == "oldest pack removed") {
    fs::remove(oldest);
  } else {
    wanbackup::testing::Scribble(oldest, 1 << 20, std::string(4096, 'x'));
  }

  const RunResult repair = repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  INFO("repair: " << repair.out << repair.err);
  CHECK(repair.exit_code == 3);  // a snapshot is lost: said, and the exit status says it too
  CHECK(repair.err.find("snapshot(s) 1,") != std::string::npos);
  CHECK(repair.err.find("are gone") != std::string::npos);
  CHECK(repair.err.find("new head (counter 3)") != std::string::npos);

  // The repository is usable again: the catalog matches the new head, and the anchor takes its
  // higher counter.
  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}));
  REQUIRE(list.size() == 1);
  CHECK(list[0]["id"] == 2);
  repo.Ok({"restore", "2", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "b.img"));
  repo.Ok({"snapshot", dir / "c.img"});
  repo.Ok({"restore", "latest", "--to", dir / "out-c.img"});
  CHECK(SameFile(dir / "out-c.img", dir / "c.img"));
  // A second repair finds the new head the newest and loses nothing more.
  const RunResult again = repo.Wb({"repair", "catalog", "--json"});
  INFO("repair again: " << again.out << again.err);
  const nlohmann::json report = nlohmann::json::parse(again.out);
  CHECK(report["lost"].empty());
  CHECK(report["head_counter"] == 4);
  CHECK(report["snapshots"] == nlohmann::json::array({2, 3}));
}

TEST_CASE("head: a repository made before heads is read as it is, and its first write seals one",
          "[head]") {
  TempDir dir("head-before");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "c.img", 3, 2);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  RemoveEveryHead(repo.path());
  REQUIRE(HeadTestSqlValue(repo.catalog(), "SELECT count(*) FROM chunks WHERE kind = 4") == "0");
  // A host that never saw this repository with a head: as one that ran the release before.
  const std::map<std::string, std::string> fresh = {{"WANBACKUP_SECURITY_DIR", dir / "fresh"}};

  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}, "", fresh));
  CHECK(list.size() == 2);
  repo.Ok({"verify"}, "", fresh);
  repo.Ok({"restore", "1", "--to", dir / "out.img"}, "", fresh);
  CHECK(SameFile(dir / "out.img", dir / "a.img"));
  CHECK(HeadTestSqlValue(repo.catalog(), "SELECT value FROM settings WHERE key = 'head'").empty());

  // The first write seals head 1, listing every snapshot, and the anchor remembers it.
  repo.Ok({"snapshot", dir / "c.img"}, "", fresh);
  CHECK(HeadTestSqlValue(repo.catalog(), "SELECT value FROM settings WHERE key = 'head'")
            .rfind("1 ", 0) == 0);
  const std::string id = RepositoryId(repo.path());
  CHECK(ReadText(dir / "fresh/" + id + "/anchor").find("head_counter 1\n") != std::string::npos);
  repo.Ok({"restore", "latest", "--to", dir / "out-c.img"}, "", fresh);
  CHECK(SameFile(dir / "out-c.img", dir / "c.img"));
  repo.Ok({"repair", "catalog"}, "", fresh);
  const nlohmann::json after =
      wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}, "", fresh));
  CHECK(after.size() == 3);
  // From now on a head removed again is a rollback for this host.
  RemoveEveryHead(repo.path());
  RequireRefused(repo.Wb({"snapshots"}, "", fresh), "has no head");
}

TEST_CASE("head: forget on a repository made before heads seals its first head", "[head]") {
  TempDir dir("head-before-forget");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);
  RemoveEveryHead(repo.path());
  const std::map<std::string, std::string> fresh = {{"WANBACKUP_SECURITY_DIR", dir / "fresh"}};
  repo.Ok({"forget", "1", "--allow-empty-source"}, "", fresh);
  CHECK(HeadTestSqlValue(repo.catalog(), "SELECT value FROM settings WHERE key = 'head'")
            .rfind("1 ", 0) == 0);
  repo.Ok({"prune"}, "", fresh);
  repo.Ok({"repair", "catalog"}, "", fresh);
  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}, "", fresh));
  REQUIRE(list.size() == 1);
  CHECK(list[0]["id"] == 2);
  repo.Ok({"restore", "latest", "--to", dir / "out.img"}, "", fresh);
  CHECK(SameFile(dir / "out.img", dir / "b.img"));
}

TEST_CASE("anchor: trust records the counter of the head read from the packs, not the catalog's",
          "[anchor]") {
  TempDir dir("anchor-trust-counter");
  RepoCli repo(dir);
  TwoSnapshotsKeepingTheFirstCatalog(repo);  // head 2
  const std::string anchor = std::string(std::getenv("WANBACKUP_SECURITY_DIR")) + "/" +
                             RepositoryId(repo.path()) + "/anchor";
  const std::string head =
      HeadTestSqlValue(repo.catalog(), "SELECT value FROM settings WHERE key = 'head'");
  REQUIRE(head.rfind("2 ", 0) == 0);
  const std::string digest = head.substr(2);
  // The catalog (storage an attacker can write) claims a far higher counter for the same head:
  // trusting it would make the honest repository look rolled back from then on.
  Sql(repo.catalog(), "UPDATE settings SET value = '999 " + digest + "' WHERE key = 'head'");
  RequireRefused(repo.Wb({"trust"}), "holds counter 2");
  CHECK(ReadText(anchor).find("head_counter 2\n") != std::string::npos);

  // A counter strtoull would read but no head writes is a malformed setting (exit 3).
  for (const std::string bad : {"+2 ", " 2 ", "18446744073709551618 "}) {
    INFO(bad);
    std::string sql = "UPDATE settings SET value = '";
    sql += bad;
    sql += digest;
    sql += "' WHERE key = 'head'";
    Sql(repo.catalog(), sql);
    RequireRefused(repo.Wb({"snapshots"}), "malformed");
    RequireRefused(repo.Wb({"trust"}), "malformed");
  }
  Sql(repo.catalog(), "UPDATE settings SET value = '2 " + digest + "' WHERE key = 'head'");
  repo.Ok({"trust"});
  CHECK(ReadText(anchor).find("head_counter 2\n") != std::string::npos);
  repo.Ok({"restore", "latest", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "b.img"));
}

TEST_CASE("head: a snapshot an older wanbackup took after heads existed is kept by repair",
          "[head]") {
  TempDir dir("head-older-client");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "c.img", 3, 2);
  TwoSnapshotsKeepingTheFirstCatalog(repo);  // head 2
  const std::string head_2 =
      HeadTestSqlValue(repo.catalog(), "SELECT value FROM settings WHERE key = 'head'");
  // The release before heads takes snapshot 3: its record is sealed, no head is written, the
  // catalog still names head 2, and no anchor is touched.
  repo.Ok({"snapshot", dir / "c.img"}, "", {{"WANBACKUP_SECURITY_DIR", dir / "old-client"}});
  const std::string row = HeadTestSqlValue(
      repo.catalog(),
      "SELECT packs.name || ' ' || chunks.offset FROM chunks JOIN packs ON packs.id = "
      "chunks.pack_id WHERE chunks.kind = 4 ORDER BY chunks.id DESC LIMIT 1");
  std::istringstream in(row);
  std::string name;
  uintmax_t offset = 0;
  in >> name >> offset;
  fs::resize_file(HeadTestPackPath(repo.path(), name), offset);
  Sql(repo.catalog(),
      "UPDATE packs SET size = " + std::to_string(offset) + " WHERE name = '" + name +
          "'; DELETE FROM chunks WHERE kind = 4 AND offset = " + std::to_string(offset) +
          " AND pack_id = (SELECT id FROM packs WHERE name = '" + name +
          "'); UPDATE settings SET value = '" + head_2 + "' WHERE key = 'head'");

  // The new client refuses and says what to run; what it runs keeps snapshot 3.
  RequireRefused(repo.Wb({"snapshots"}), "repair catalog");
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO("repair: " << repair.out << repair.err);
  CHECK(repair.exit_code == 0);
  CHECK(repair.err.find("did not list snapshot(s) 3") != std::string::npos);
  CHECK(repair.err.find("new head (counter 3)") != std::string::npos);
  const nlohmann::json list = wanbackup::testing::Json(repo.Wb({"snapshots", "--json"}));
  CHECK(list.size() == 3);
  repo.Ok({"restore", "3", "--to", dir / "out.img"});
  CHECK(SameFile(dir / "out.img", dir / "c.img"));
  repo.Ok({"verify"});
}

TEST_CASE(
    "anchor: a forged snapshot number floor in the catalog is not learned by a read, and a "
    "repair ends it",
    "[head]") {
  TempDir dir("forged-floor");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  // Whoever can write the storage sets the floor to the largest number there is.
  Sql(repo.catalog(),
      "INSERT OR REPLACE INTO settings(key, value) VALUES('snapshot_id_floor', "
      "'9223372036854775807')");
  repo.Ok({"snapshots"});
  // The anchor learned the sealed head's numbers only (before: that one, never lowered, so
  // every snapshot of this client failed from then on; round 7, X3).
  const std::string anchors = std::getenv("WANBACKUP_SECURITY_DIR");
  const std::string anchor = ReadText(anchors + "/" + RepositoryId(repo.path()) + "/anchor");
  CHECK(anchor.find("9223372036854775807") == std::string::npos);
  CHECK(anchor.find("highest_snapshot 1\n") != std::string::npos);
  // Nor is a snapshot numbered past 2^48 (before: sealed as 2^63-1, after which every snapshot
  // of every client failed, and a repair could not help; round 8, Y5).
  CheckOneLineError(repo.Wb({"snapshot", dir / "a.img"}), 3,
                    "run 'wanbackup repair catalog', which takes them from the packs");
  // The catalog's own floor is storage the attacker wrote: a repair rebuilds it from the packs.
  repo.Ok({"repair", "catalog"});
  repo.Ok({"snapshot", dir / "a.img"});
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 2);
  CHECK(listed[1]["id"] == 2);
  // A floor just under the bound was taken: snapshot 2^48 was sealed, and its record carried the
  // bound into every rebuilt catalog, so no snapshot could be taken again on any client, repair
  // or not (round 9, Z4). A floor that far above the highest snapshot is refused before use.
  Sql(repo.catalog(),
      "INSERT OR REPLACE INTO settings(key, value) VALUES('snapshot_id_floor', "
      "'281474976710655')");
  CheckOneLineError(repo.Wb({"snapshot", dir / "a.img"}), 3, "far above its highest snapshot (2)");
  repo.Ok({"repair", "catalog"});
  repo.Ok({"snapshot", dir / "a.img"});
  const auto after = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(after.size() == 3);
  CHECK(after[2]["id"] == 3);
}
