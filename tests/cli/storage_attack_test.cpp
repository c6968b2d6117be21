// Attacks of someone who can write the repository's storage but has no key (docs/threat-model.md,
// "Storage an attacker can write"), on the real binary with local images:
// - restore, restore --verify and replicate write what the sealed snapshot record and map
//   segments say; the catalog is only an index of where a chunk with a given digest lies. The
//   catalog is rewritten with SQL while a restore is stopped between its check and its first
//   write (WANBACKUP_PAUSE=restore.after-check, common/failpoint.h);
// - a catalog map row longer than its snapshot;
// - a config.json turned back to format 1, then `migrate`;
// - a pack removed under a chunk a new snapshot finds by dedup; a forged record header before
//   `repair catalog`; config.json's code written differently.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "catalog/map_codec.h"
#include "repository/record.h"
#include "support/repo_cli.h"

using wanbackup::testing::Background;
using wanbackup::testing::RepoCli;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::Scribble;
using wanbackup::testing::TempDir;
using wanbackup::testing::TreeContents;
using wanbackup::testing::WriteNoiseImage;

namespace {

void SealedSql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO(sql << ": " << (err != nullptr ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

// The ids in snapshot `id`'s (single) catalog map segment.
std::vector<int64_t> SealedTestMapIds(const std::string& db_path, int64_t id) {
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

// The SQL that makes snapshot `id`'s catalog map `ids`.
std::string SetMapSql(int64_t id, const std::vector<int64_t>& ids) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : wanbackup::catalog::EncodeChunkMap(ids)) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return "UPDATE snapshot_maps SET count = " + std::to_string(ids.size()) + ", encoded = x'" + hex +
         "' WHERE snapshot_id = " + std::to_string(id);
}

// True once process `pid` is stopped (SIGSTOP), false when it is gone or the time is up.
bool WaitStopped(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size()) {
      const char state = line[paren + 2];
      if (state == 'T' || state == 't') return true;
      if (state == 'Z') return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The path of the repository's first pack (the catalog's lowest pack id).
std::string AttackOldestPack(const RepoCli& repo) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(repo.catalog().c_str(), &handle) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, "SELECT name FROM packs ORDER BY id LIMIT 1", -1, &st,
                             nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(handle);
  return repo.path() + "/packs/" + name.substr(0, 2) + "/" + name + ".pack";
}

// The pack file that holds snapshot `id`'s sealed record.
std::string PackOfSnapshotRecord(const RepoCli& repo, int64_t id) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(repo.catalog().c_str(), &handle) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle,
                             "SELECT p.name FROM snapshots s JOIN chunks c ON c.id = s.record_id "
                             "JOIN packs p ON p.id = c.pack_id WHERE s.id = ?",
                             -1, &st, nullptr) == SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(handle);
  return repo.path() + "/packs/" + name.substr(0, 2) + "/" + name + ".pack";
}

// Snapshot 1 of a.img (kept as first.img), then snapshot 2 with a few bytes changed: most of
// 2's chunks are 1's (in pack A); its own chunk, map, record and head lie in a newer pack B.
struct SharedChunks {
  explicit SharedChunks(const std::string& label) : dir(label) {
    WriteNoiseImage(dir / "a.img", 1, 4);
    repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
    repo.Ok({"snapshot", dir / "a.img"});
    std::filesystem::copy_file(dir / "a.img", first);
    std::fstream(dir / "a.img", std::ios::in | std::ios::out | std::ios::binary).seekp(200000)
        << "changed!";
    repo.Ok({"snapshot", dir / "a.img"});
  }
  // catalog.db gone, as after a disk fault.
  void RemoveCatalog() const {
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(repo.catalog() + suffix);
  }
  TempDir dir;
  RepoCli repo{dir};
  std::string first = dir / "first.img";
};

// Two snapshots of image a (4 chunks, chunk 1 zeros; the second with chunk 3 changed).
void TwoSnapshots(const RepoCli& repo) {
  const TempDir& dir = repo.dir();
  WriteNoiseImage(dir / "a.img", 1, 4);
  WriteNoiseImage(dir / "a2.img", 1, 4);
  Scribble(dir / "a2.img", 3 * wanbackup::testing::kTestChunk, "changed");
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  repo.Ok({"snapshot", dir / "a2.img"});
}

}  // namespace

TEST_CASE("sealed restore: a catalog rewritten after restore's check never writes wrong data",
          "[trust]") {
  const std::string edit =
      GENERATE("permute the map", "swap two chunk rows", "give it the other snapshot's record");
  const std::string command = GENERATE("restore", "restore --verify", "replicate");
  INFO(edit << ", " << command);
  TempDir dir("sealed-restore");
  RepoCli repo(dir);
  TwoSnapshots(repo);
  const std::string db = repo.catalog();
  const std::vector<int64_t> ids = SealedTestMapIds(db, 1);
  REQUIRE(ids.size() == 4);
  REQUIRE(ids[1] == 0);
  std::string sql;
  if (edit == "permute the map") {
    sql = SetMapSql(1, {ids[2], 0, ids[0], ids[3]});
  } else if (edit == "swap two chunk rows") {
    // Row ids[0] takes the place and digest of row ids[2] and the reverse: the map, unchanged,
    // now names the chunks in another order.
    const std::string a = std::to_string(ids[0]), b = std::to_string(ids[2]);
    sql = "CREATE TEMP TABLE c AS SELECT * FROM chunks WHERE id IN (" + a + ", " + b +
          ");"
          "UPDATE chunks SET digest = randomblob(32) WHERE id IN (" +
          a + ", " + b +
          ");"
          "UPDATE chunks SET (digest, pack_id, offset, stored_size, raw_size) = (SELECT digest, "
          "pack_id, offset, stored_size, raw_size FROM c WHERE id = " +
          b + ") WHERE id = " + a +
          ";"
          "UPDATE chunks SET (digest, pack_id, offset, stored_size, raw_size) = (SELECT digest, "
          "pack_id, offset, stored_size, raw_size FROM c WHERE id = " +
          a + ") WHERE id = " + b + ";";
  } else {
    sql =
        "UPDATE snapshots SET record_id = (SELECT record_id FROM snapshots WHERE id = 2) "
        "WHERE id = 1";
  }

  std::vector<std::string> args = {WB_WANBACKUP_BIN};
  if (command == "replicate") {
    args.insert(args.end(), {"replicate", "1", "--to", dir / "out.img"});
  } else {
    args.insert(args.end(), {"restore", "1", "--to", dir / "out.img"});
    if (command == "restore --verify") args.push_back("--verify");
  }
  RunOptions o;
  o.env = {{"WANBACKUP_REPO", repo.path()},
           {"WANBACKUP_KEY_FILE", repo.key()},
           {"WANBACKUP_PAUSE", "restore.after-check"}};
  Background run(args, o);
  REQUIRE(WaitStopped(run.pid(), std::chrono::seconds(60)));
  SealedSql(db, sql);
  run.Kill(SIGCONT);
  const int exit_code = run.Wait(std::chrono::seconds(120));
  INFO("exit " << exit_code);
  // Refused (exit 3), or the snapshot as it was taken: never other data with exit 0.
  CHECK((exit_code == 3 || exit_code == 0));
  if (exit_code == 0) CHECK(SameFile(dir / "out.img", dir / "a.img"));
  if (edit != "give it the other snapshot's record") CHECK(exit_code == 0);
}

TEST_CASE("sealed restore: a catalog map row longer than the snapshot is refused, not read past",
          "[trust]") {
  TempDir dir("crafted-row");
  RepoCli repo(dir);
  TwoSnapshots(repo);
  const std::string db = repo.catalog();
  std::vector<int64_t> ids = SealedTestMapIds(db, 1);
  // Twelve entries where the snapshot has four: the sealed map holds four digests.
  for (int i = 0; i < 8; ++i)
    ids.push_back(ids[i % 4]);
  SealedSql(db, SetMapSql(1, ids));

  RunResult verify = repo.Wb({"verify", "--snapshot", "1"});
  INFO("verify: " << verify.out << verify.err);
  CHECK(verify.exit_code == 3);
  RunResult restore = repo.Wb({"restore", "1", "--to", dir / "out.img"});
  INFO("restore: " << restore.err);
  CHECK(restore.exit_code == 3);
  CHECK(restore.err.find("snapshot 1") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "out.img"));
  RunResult replicate = repo.Wb({"replicate", "1", "--to", dir / "replica.img"});
  INFO("replicate: " << replicate.err);
  CHECK(replicate.exit_code == 3);
  // The other snapshot is untouched.
  repo.Ok({"restore", "2", "--to", dir / "two.img"});
  CHECK(SameFile(dir / "two.img", dir / "a2.img"));
}

TEST_CASE("storage attack: a config.json turned back to format 1 is refused, and so is migrate",
          "[trust]") {
  const std::string catalog_too = GENERATE("config.json only", "catalog made to look format 1");
  INFO(catalog_too);
  TempDir dir("downgrade");
  RepoCli repo(dir);
  TwoSnapshots(repo);
  const std::string config = repo.path() + "/config.json";
  auto json = nlohmann::json::parse(std::ifstream(config));
  json["format"] = 1;
  json.erase("authentication");
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  const std::string db = repo.catalog();
  if (catalog_too == "catalog made to look format 1") {
    // The map of snapshot 1 reordered, and everything of schema 2 on dropped: what the
    // catalog says is all migrate would have to go on, and it would seal it with the real key.
    const std::vector<int64_t> ids = SealedTestMapIds(db, 1);
    SealedSql(db, SetMapSql(1, {ids[2], 0, ids[0], ids[3]}) +
                      ";PRAGMA foreign_keys = OFF;"
                      "DELETE FROM chunks WHERE kind > 0;"
                      "UPDATE snapshots SET record_id = 0;"
                      "DROP TABLE settings; PRAGMA user_version = 1;");
  }
  const auto packs = TreeContents(repo.path() + "/packs");

  RunResult list = repo.Wb({"snapshots"});
  INFO("snapshots: " << list.err);
  if (catalog_too == "config.json only") {
    // The catalog shows it: the message says what happened and does not send to migrate.
    CHECK(list.exit_code == 3);
    CHECK(list.err.find("downgraded") != std::string::npos);
    CHECK(list.err.find("upgrade it once") == std::string::npos);
  } else {
    CHECK(list.exit_code != 0);
  }

  // This client saw the repository's head: a repository without one (as format 1 would be) is
  // refused by its trust anchor before migrate looks at anything.
  RunResult migrate = repo.Wb({"migrate"});
  INFO("migrate: " << migrate.err);
  CHECK(migrate.exit_code == 3);
  CHECK(migrate.err.find("this client saw head 2") != std::string::npos);
  CHECK(TreeContents(repo.path() + "/packs") == packs);
  // A client that never used it (another host, an anchor directory lost) has only migrate's
  // own checks: the sealed records in the packs give the downgrade away.
  RunResult fresh =
      repo.Wb({"migrate"}, "", {{"WANBACKUP_SECURITY_DIR", dir / "fresh-client-anchors"}});
  INFO("migrate, fresh client: " << fresh.err);
  CHECK(fresh.exit_code == 3);
  CHECK(fresh.err.find("downgraded") != std::string::npos);
  CHECK(fresh.err.find("--assume-format-1") != std::string::npos);
  // Nothing sealed from the catalog's word, config.json untouched.
  CHECK(TreeContents(repo.path() + "/packs") == packs);
  CHECK(nlohmann::json::parse(std::ifstream(config))["format"] == 1);
}

TEST_CASE("storage attack: a snapshot is never completed on a chunk whose pack is gone",
          "[trust]") {
  TempDir dir("pack-gone");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "a.img"});
  repo.Ok({"snapshot", dir / "b.img"});
  // The oldest pack (a.img's chunks) removed; the newest, with the head, is still there, so
  // the repository opens and a new snapshot of a.img finds its chunks by dedup.
  REQUIRE(std::filesystem::remove(AttackOldestPack(repo)));
  RunResult again = repo.Wb({"snapshot", dir / "a.img", "--json"});
  INFO("snapshot: " << again.err);
  CHECK(again.exit_code == 3);
  CHECK(again.err.find("gone") != std::string::npos);
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  for (const auto& s : listed) {
    if (s["id"] != 1 && s["id"] != 2) CHECK(s["status"] != "complete");
  }
}

TEST_CASE(
    "repair catalog: packs the old catalog names that are not there (a disk not mounted under "
    "packs/) change nothing unless --allow-missing-packs",
    "[trust]") {
  TempDir dir("packs-unmounted");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  // packs/ as it looks before its disk is mounted: empty.
  const std::string packs = repo.path() + "/packs";
  std::filesystem::rename(packs, dir / "packs.away");
  REQUIRE(std::filesystem::create_directory(packs));
  std::filesystem::permissions(packs, std::filesystem::perms::owner_all);
  auto state = [&repo] {
    auto all = TreeContents(repo.path());
    all.erase(repo.path() + "/lock");
    return all;
  };
  const auto before = state();
  CheckOneLineError(repo.Wb({"repair", "catalog"}), 3,
                    "packs that are not in the repository (" + packs + "/");
  CHECK(state() == before);
  // The same with the old catalog unreadable (the usual reason to repair) or gone: no pack at
  // all is refused when there is a catalog, or when this client saw a head.
  const std::string kept_catalog = wanbackup::testing::FileContents(repo.catalog());
  std::ofstream(repo.catalog(), std::ios::trunc) << "";
  CheckOneLineError(repo.Wb({"repair", "catalog"}), 3,
                    "there is no pack at all in the repository, though it has a catalog");
  std::filesystem::remove(repo.catalog());
  CheckOneLineError(repo.Wb({"repair", "catalog"}), 3,
                    "there is no pack at all in the repository, though this client saw its head");
  std::ofstream(repo.catalog(), std::ios::binary) << kept_catalog;
  CHECK(state() == before);
  // The disk comes back: nothing was lost.
  std::filesystem::remove(packs);
  std::filesystem::rename(dir / "packs.away", packs);
  repo.Ok({"restore", "1", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "a.img"));
  // A pack really gone: the flag rebuilds from what is there.
  REQUIRE(std::filesystem::remove(AttackOldestPack(repo)));
  CHECK(repo.Wb({"repair", "catalog"}).exit_code == 3);
  const RunResult forced = repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  CHECK(forced.err.find("the catalog names") == std::string::npos);
  CHECK(std::filesystem::exists(repo.catalog()));
}

TEST_CASE("storage attack: one forged record header is skipped by repair catalog, not fatal",
          "[trust]") {
  TempDir dir("forged-header");
  RepoCli repo(dir);
  // Snapshot 1 fills a pack of about 80 MB, so a forged size can lie inside it and still be
  // larger than any record; snapshot 2 is in a pack of its own.
  WriteNoiseImage(dir / "big.img", 3, 20);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key()});
  repo.Ok({"snapshot", dir / "big.img"});
  repo.Ok({"snapshot", dir / "b.img"});
  const std::string db = repo.catalog();
  const std::string pack = AttackOldestPack(repo);
  REQUIRE(std::filesystem::file_size(pack) > 75'000'000);

  // The first record's header, forged with a valid CRC: a chunk of 70 MB.
  wanbackup::pipeline::RecordHeader forged;
  forged.flags = wanbackup::pipeline::kRecordEncrypted;
  forged.raw_size = 4u << 20;
  forged.stored_size = 70'000'000;
  std::string bytes(wanbackup::pipeline::kRecordHeaderSize, '\0');
  wanbackup::pipeline::WriteRecordHeader(forged, reinterpret_cast<uint8_t*>(bytes.data()));
  Scribble(pack, 32, bytes);
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(db + suffix);

  RunResult repair = repo.Wb({"repair", "catalog"});
  INFO("repair: " << repair.out << repair.err);
  CHECK(repair.exit_code == 3);  // a damaged record and a snapshot not rebuilt are reported
  CHECK(repair.err.find("snapshot 1") != std::string::npos);
  // The head listed snapshot 1 too: repair sealed a new one without it, and says so.
  CHECK(repair.err.find("listed snapshot(s) 1, which could not be rebuilt") != std::string::npos);
  // Everything else was rebuilt and the repository goes on: snapshot 2 restores, a new one is
  // taken.
  repo.Ok({"restore", "2", "--to", dir / "b-restored.img"});
  CHECK(SameFile(dir / "b-restored.img", dir / "b.img"));
  repo.Ok({"snapshot", dir / "b.img"});
  repo.Ok({"snapshots"});
}

TEST_CASE("storage attack: config.json's code is compared as bytes, whatever its hex case",
          "[trust]") {
  TempDir dir("mac-bytes");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 2);
  repo.Ok({"init", "--key-file", repo.key()});
  const std::string config = repo.path() + "/config.json";
  auto json = nlohmann::json::parse(std::ifstream(config));
  std::string code = json["authentication"].get<std::string>();
  for (char& c : code)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  json["authentication"] = code;
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  // The same 32 bytes: accepted.
  repo.Ok({"snapshot", dir / "a.img"});
  // One bit off, or not hex: refused.
  code[0] = code[0] == '0' ? '1' : '0';
  json["authentication"] = code;
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  CHECK(repo.Wb({"snapshots"}).exit_code == 3);
  json["authentication"] = "not hex";
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  CHECK(repo.Wb({"snapshots"}).exit_code == 3);
}

TEST_CASE("storage attack: an Argon2id cost above the ceiling is refused before it runs",
          "[trust]") {
  TempDir dir("kdf-ceiling");
  RepoCli repo(dir);
  repo.Ok({"init"}, "a passphrase");
  const std::string config = repo.path() + "/config.json";
  auto json = nlohmann::json::parse(std::ifstream(config));
  const std::string cost = GENERATE("1 TiB of memory", "1000 passes");
  INFO(cost);
  if (cost == "1 TiB of memory") {
    json["encryption"]["kdf"]["memlimit"] = uint64_t{1} << 40;
  } else {
    json["encryption"]["kdf"]["opslimit"] = 1000;
  }
  std::ofstream(config, std::ios::trunc) << json.dump(2);
  const auto start = std::chrono::steady_clock::now();
  RunResult r = repo.Wb({"snapshots"}, "a passphrase");
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("out of range") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

namespace {

// The packs of a repository, by path.
std::vector<std::filesystem::path> PackFiles(const std::string& repo) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo + "/packs")) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  return out;
}

TEST_CASE(
    "storage attack: packs/XX planted as a link to another repository's packs is not pruned "
    "through",
    "[storage]") {
  TempDir dir("planted-prefix");
  RepoCli victim(dir);
  victim.Ok({"init", "--key-file", victim.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 1, 2);
  victim.Ok({"snapshot", image});
  const auto kept = TreeContents(victim.path());
  // A second repository whose storage the attacker writes: each of the victim's pack
  // directories linked in where that repository has none.
  const std::string shared = dir / "shared", shared_key = dir / "shared.key";
  victim.Ok({"init", shared, "--key-file", shared_key, "--chunk-size", "64K"});
  victim.Ok({"snapshot", image, "--repo", shared, "--key-file", shared_key});
  int planted = 0;
  for (const auto& pack : PackFiles(victim.path())) {
    const std::filesystem::path prefix = pack.parent_path();
    const std::string at = shared + "/packs/" + prefix.filename().string();
    if (std::filesystem::exists(at)) continue;
    std::filesystem::create_directory_symlink(prefix, at);
    ++planted;
  }
  REQUIRE(planted > 0);
  // Refused outright (a pack directory that is a link), and nothing is deleted through it.
  CheckOneLineError(
      victim.Wb({"prune", "--repo", shared, "--key-file", shared_key, "--max-unused", "0"}), 5,
      "is a symbolic link (wanbackup never makes one)");
  CHECK(TreeContents(victim.path()) == kept);
  victim.Ok({"verify"});
}

TEST_CASE("storage attack: a pack replaced by a FIFO is refused at once, nothing hangs",
          "[storage]") {
  TempDir dir("fifo-pack");
  RepoCli repo(dir);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 1, 2);
  repo.Ok({"snapshot", image});
  const std::vector<std::filesystem::path> packs = PackFiles(repo.path());
  REQUIRE(packs.size() == 1);
  std::filesystem::remove(packs[0]);
  REQUIRE(::mkfifo(packs[0].c_str(), 0600) == 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"restore", "1", "--to", dir / "back.img"},
        std::vector<std::string>{"verify"}}) {
    const RunResult r = repo.Wb(args);  // a hang would end in the runner's timeout, not 3
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 3);
    CHECK(r.err.find(packs[0].string() + " is no regular file") != std::string::npos);
  }
  // A catalog rebuilt without it would lose the snapshot in silence: repair names it instead.
  auto before = TreeContents(repo.path());
  before.erase(repo.path() + "/lock");  // the holder line of the last command
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO(repair.err);
  CHECK(repair.exit_code == 3);
  CHECK(repair.err.find(packs[0].string() + " is a FIFO, where a pack file belongs") !=
        std::string::npos);
  auto after = TreeContents(repo.path());
  after.erase(repo.path() + "/lock");
  CHECK(after == before);
}

// The packs' disk not mounted yet (its packs moved to `away`) and a forced repair: a catalog
// without any snapshot, which the client's anchor calls a rollback and the user accepts, as its
// message offers (a client without an anchor would not even ask). Returns REPO/packs.
std::string RepairWithoutPacks(const RepoCli& repo, const std::string& away) {
  std::string packs = repo.path() + "/packs";
  std::filesystem::rename(packs, away);
  REQUIRE(std::filesystem::create_directory(packs));
  std::filesystem::permissions(packs, std::filesystem::perms::owner_all);
  (void)repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  repo.Ok({"trust"});
  return packs;
}

// Snapshot 1 (of a.img) in packs moved to DIR/packs.away, the catalog rebuilt and trusted
// without them (RepairWithoutPacks); c.img another image for the next snapshot.
struct LostSnapshotOne {
  explicit LostSnapshotOne(const std::string& label) : dir(label) {
    WriteNoiseImage(dir / "a.img", 1, 3);
    WriteNoiseImage(dir / "c.img", 3, 3);
    repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
    repo.Ok({"snapshot", dir / "a.img"});
    packs = RepairWithoutPacks(repo, dir / "packs.away");
  }
  TempDir dir;
  RepoCli repo{dir};
  std::string packs;
};

TEST_CASE(
    "forget --lost: a snapshot repair left out because a pack is gone for good is given up on "
    "purpose, after which prune goes on, and a listed one or one with no record is refused",
    "[trust]") {
  TempDir dir("pack-lost");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});  // 1, the pack that will be lost
  std::fstream(dir / "a.img", std::ios::in | std::ios::out | std::ios::binary).seekp(100000)
      << "changed!";
  repo.Ok({"snapshot", dir / "a.img"});  // 2: most chunks in 1's pack, its record in its own
  repo.Ok({"snapshot", dir / "b.img"});  // 3: nothing in 1's pack
  const std::string pack = AttackOldestPack(repo), away = dir / "away.pack";
  std::filesystem::rename(pack, away);  // only away at first
  CHECK(repo.Wb({"repair", "catalog", "--allow-missing-packs"}).exit_code == 3);
  repo.Ok({"trust"});
  std::filesystem::rename(away, pack);
  // What is gone is judged on a catalog that knows every pack (round 11, AB2: a pack put back
  // was taken for gone, and snapshot 2 given up although it was whole).
  CheckOneLineError(repo.Wb({"forget", "--lost", "2", "--dry-run"}), 2,
                    "is in the repository but not in the catalog: run 'wanbackup repair catalog' "
                    "first");
  CheckOneLineError(repo.Wb({"forget", "--lost-packs"}), 2, "is back: 'wanbackup repair catalog'");
  REQUIRE(std::filesystem::remove(pack));  // now gone for good
  // The catalog records the pack it was rebuilt without: prune removes nothing until it is
  // back or given up (round 11, AB1).
  CheckOneLineError(repo.Wb({"prune"}), 3,
                    "were missing when the catalog was rebuilt (" + pack + ")");
  const RunResult packs_dry = repo.Wb({"forget", "--lost-packs", "--dry-run"});
  CHECK(packs_dry.exit_code == 0);
  // The pack, and snapshot 1's record, which the newest head listed and which it held.
  CHECK(packs_dry.err.find("would give up 2 missing pack(s) or record(s)") != std::string::npos);
  CHECK(packs_dry.out.find("the sealed record of snapshot 1") != std::string::npos);
  CHECK(repo.Wb({"prune"}).exit_code == 3);
  repo.Ok({"forget", "--lost-packs"});
  // Before: prune refused for good, and nothing could forget snapshot 2 (round 8, Y1).
  CheckOneLineError(repo.Wb({"prune"}), 3, "'wanbackup forget --lost 2' gives it up");
  CheckOneLineError(repo.Wb({"forget", "--lost", "3"}), 2,
                    "snapshot 3 is in the catalog, not lost");
  CheckOneLineError(repo.Wb({"forget", "--lost", "1"}), 6, "no lost snapshot 1");
  CheckOneLineError(repo.Wb({"forget", "--lost", "--keep-last", "1"}), 2,
                    "--lost gives up snapshots by number");
  const auto before = TreeContents(repo.path() + "/packs");
  const RunResult dry = repo.Wb({"forget", "--lost", "2", "--dry-run"});
  INFO(dry.err);
  CHECK(dry.exit_code == 0);
  CHECK(dry.out.find("snapshot 2 of " + (dir / "a.img")) != std::string::npos);
  CHECK(dry.out.find("of its chunks are gone from the packs") != std::string::npos);
  CHECK(dry.err.find("would give up lost snapshot(s) 2") != std::string::npos);
  CHECK(TreeContents(repo.path() + "/packs") == before);
  const nlohmann::json given = Json(repo.Wb({"forget", "--lost", "2", "--json"}));
  CHECK(given["forgotten"] == nlohmann::json::array({2}));
  CHECK(given["lost"][0]["chunks_missing"].get<int>() > 0);
  repo.Ok({"prune"});
  repo.Ok({"restore", "3", "--to", dir / "back3.img"});
  CHECK(SameFile(dir / "back3.img", dir / "b.img"));
  // A repair no longer looks for it, and the number stays used.
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO(repair.err);
  CHECK(repair.exit_code == 0);
  repo.Ok({"snapshot", dir / "b.img"});
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 2);
  CHECK(listed[1]["id"] == 4);
}

TEST_CASE(
    "repair catalog --allow-missing-packs: a snapshot whose record is in a pack that is only "
    "away keeps the chunks it shares with other packs, and comes back with its pack",
    "[trust]") {
  const SharedChunks shared("record-away");
  const TempDir& dir = shared.dir;
  const RepoCli& repo = shared.repo;
  repo.Ok({"forget", "1"});  // an ordinary rotation
  const std::string b = PackOfSnapshotRecord(repo, 2), away = dir / "away.pack";
  std::filesystem::rename(b, away);  // a disk not mounted yet
  const RunResult repair = repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  INFO(repair.err);
  CHECK(repair.exit_code == 3);
  CHECK(repair.err.find("prune removes nothing until they are back") != std::string::npos);
  repo.Ok({"trust"});
  // Before: prune removed pack A as holding nothing in use, and snapshot 2 could not come back
  // with its pack (round 11, AB1).
  const auto before = TreeContents(repo.path() + "/packs");
  CheckOneLineError(repo.Wb({"prune"}), 3, "were missing when the catalog was rebuilt");
  CHECK(TreeContents(repo.path() + "/packs") == before);
  std::filesystem::rename(away, b);
  CheckOneLineError(repo.Wb({"prune"}), 3, "is back: run 'wanbackup repair catalog' first");
  repo.Ok({"repair", "catalog"});
  repo.Ok({"prune"});
  repo.Ok({"restore", "2", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "a.img"));
}

TEST_CASE(
    "repair catalog: with the catalog gone and the newest pack only away, the snapshot this "
    "client saw is recorded missing, prune waits, and it comes back with its pack",
    "[trust]") {
  const SharedChunks shared("newest-away");
  const TempDir& dir = shared.dir;
  const RepoCli& repo = shared.repo;
  const std::string b = PackOfSnapshotRecord(repo, 2), away = dir / "away.pack";
  shared.RemoveCatalog();
  std::filesystem::rename(b, away);
  // Nothing in the packs names snapshot 2 now; this client's anchor saw it (before: exit 0,
  // and after 'trust' prune removed what snapshot 2 shares with A; round 12, AC1).
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO(repair.err);
  CHECK(repair.exit_code == 3);
  CHECK(repair.err.find("are not in the packs (snapshot 2)") != std::string::npos);
  repo.Ok({"trust"});
  const auto before = TreeContents(repo.path() + "/packs");
  CheckOneLineError(repo.Wb({"prune"}), 3, "without the sealed record of snapshot 2");
  CHECK(TreeContents(repo.path() + "/packs") == before);
  std::filesystem::rename(away, b);
  repo.Ok({"repair", "catalog"});
  repo.Ok({"prune"});
  repo.Ok({"restore", "2", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "a.img"));
}

TEST_CASE(
    "forget --lost-packs: a newest pack gone for good is given up once, and a later repair does "
    "not record it missing again",
    "[trust]") {
  const SharedChunks shared("newest-gone");
  const TempDir& dir = shared.dir;
  const RepoCli& repo = shared.repo;
  const std::string newest = PackOfSnapshotRecord(repo, 2);
  shared.RemoveCatalog();
  REQUIRE(std::filesystem::remove(newest));
  CHECK(repo.Wb({"repair", "catalog"}).exit_code == 3);
  repo.Ok({"trust"});
  CHECK(repo.Wb({"prune"}).exit_code == 3);
  const RunResult given = repo.Wb({"forget", "--lost-packs"});
  INFO(given.err);
  REQUIRE(given.exit_code == 0);
  CHECK(given.out.find("the sealed record of snapshot 2") != std::string::npos);
  repo.Ok({"prune"});
  repo.Ok({"repair", "catalog"});  // exit 0: the forget record names it
  repo.Ok({"prune"});
  repo.Ok({"restore", "1", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", shared.first));
}

TEST_CASE(
    "storage attack: records forged into the catalog's list of missing records only stop "
    "prune, and giving them up forgets nothing and raises no number",
    "[trust]") {
  TempDir dir("forged-missing");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  repo.Ok({"snapshot", dir / "a.img"});
  // No key needed: snapshot 1's own record, and a number far above the rest.
  wanbackup::testing::Sql(
      repo.catalog(),
      "INSERT OR REPLACE INTO settings(key, value) SELECT 'missing_records', '1:' || "
      "lower(hex(c.digest)) || ' 4294967300:' FROM snapshots s JOIN chunks c ON c.id = "
      "s.record_id WHERE s.id = 1");
  CheckOneLineError(repo.Wb({"prune"}), 3, "without the sealed record of snapshot 1");
  // As prune advises. Before, this sealed a forget record for snapshot 1, whole and listed
  // (lost for good at the next repair), and one for 4294967300, after which no snapshot could
  // be taken again (round 13, AD1, AD2).
  repo.Ok({"forget", "--lost-packs"});
  repo.Ok({"prune"});
  repo.Ok({"snapshot", dir / "a.img"});
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 3);
  CHECK(listed[2]["id"] == 3);
  repo.Ok({"repair", "catalog"});
  CHECK(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out).size() == 3);
  repo.Ok({"restore", "1", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "a.img"));
}

TEST_CASE(
    "storage attack: forget decides on the sealed records, so rows a storage writer edited to "
    "make the newest snapshot look old are refused and nothing is forgotten",
    "[trust]") {
  TempDir dir("forget-forged");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  WriteNoiseImage(dir / "a.img", 2, 3);
  repo.Ok({"snapshot", dir / "a.img"});
  // No key needed: snapshot 2 made to look a day older than 1, then a hand-taken tag dropped.
  wanbackup::testing::Sql(
      repo.catalog(),
      "UPDATE snapshots SET started = started - 86400000, finished = finished - 86400000 "
      "WHERE id = 2");
  const auto before = TreeContents(repo.path() + "/packs");
  // Before: "keep 1, forget 2", and prune freed the newest snapshot (round 10, AA1).
  const RunResult r = repo.Wb({"forget", "--keep-last", "1"});
  CheckOneLineError(r, 3, "snapshot 2: the catalog disagrees with the snapshot's sealed record");
  CHECK(r.err.find("'wanbackup repair catalog' rebuilds the catalog from the packs; nothing was "
                   "forgotten") != std::string::npos);
  CHECK(repo.Wb({"forget", "1"}).exit_code == 3);  // by number too: the rules' rows are read
  // Nor does the listing show the forged time (round 10, AA3).
  CheckOneLineError(repo.Wb({"snapshots"}), 3, "snapshot 2: the catalog disagrees");
  CHECK(TreeContents(repo.path() + "/packs") == before);
  // The remedy the message names: the rows come back from the sealed records.
  repo.Ok({"repair", "catalog"});
  repo.Ok({"forget", "--keep-last", "1"});
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["id"] == 2);
  repo.Ok({"restore", "latest", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "back.img", dir / "a.img"));
}

}  // namespace

TEST_CASE(
    "prune: packs holding snapshots a catalog rebuilt without them does not know are refused "
    "naming repair catalog, nothing removed",
    "[trust]") {
  TempDir dir("catalog-behind");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  repo.Ok({"snapshot", dir / "b.img"});
  const std::string packs = RepairWithoutPacks(repo, dir / "packs.away");
  REQUIRE(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out).empty());
  // The disk is back. Before, prune took every pack for a leftover and removed it.
  std::filesystem::remove(packs);
  std::filesystem::rename(dir / "packs.away", packs);
  const auto before = TreeContents(packs);
  CheckOneLineError(repo.Wb({"prune"}), 3,
                    "which the catalog was rebuilt without, is back: run 'wanbackup repair "
                    "catalog' first");
  // Without the catalog's record of them (dropped by whoever can write it), the sealed records
  // in the packs stop prune all the same.
  wanbackup::testing::Sql(repo.catalog(),
                          "DELETE FROM settings WHERE key IN ('missing_packs', 'missing_records')");
  CheckOneLineError(repo.Wb({"prune"}), 3, "that the catalog does not list");
  CHECK(repo.Wb({"prune"}).err.find("run 'wanbackup repair catalog' first") != std::string::npos);
  CHECK(TreeContents(packs) == before);
  // What it names brings both back.
  repo.Ok({"repair", "catalog"});
  repo.Ok({"prune"});
  repo.Ok({"restore", "1", "--to", dir / "a-back.img"});
  repo.Ok({"restore", "2", "--to", dir / "b-back.img"});
  CHECK(SameFile(dir / "a-back.img", dir / "a.img"));
  CHECK(SameFile(dir / "b-back.img", dir / "b.img"));
}

TEST_CASE(
    "prune: a snapshot taken since the catalog fell behind its packs, with the number of one "
    "it lost, does not make that one's pack a leftover",
    "[trust]") {
  const LostSnapshotOne lost("catalog-behind-reused");
  const TempDir& dir = lost.dir;
  const RepoCli& repo = lost.repo;
  const std::string& packs = lost.packs;
  // Before, the next snapshot got number 1 again, as the lost one had; the client's anchor
  // remembers the numbers it saw (round 6, W2).
  repo.Ok({"snapshot", dir / "c.img"});
  const auto listed = nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["id"] == 2);
  // The old packs come back beside the new ones. Before, prune took snapshot 1's old pack for
  // what an interrupted run of "snapshot 1" left, and removed it.
  std::filesystem::copy(dir / "packs.away", packs, std::filesystem::copy_options::recursive);
  const auto before = TreeContents(packs);
  CheckOneLineError(repo.Wb({"prune"}), 3, "which the catalog was rebuilt without, is back");
  wanbackup::testing::Sql(repo.catalog(),
                          "DELETE FROM settings WHERE key IN ('missing_packs', 'missing_records')");
  CheckOneLineError(repo.Wb({"prune"}), 3, "that the catalog does not list");
  CHECK(TreeContents(packs) == before);
  // Repair brings back both, each under its own number (before: one was left out as "sealed
  // twice").
  const RunResult repair = repo.Wb({"repair", "catalog"});
  INFO(repair.err);
  CHECK(repair.err.find("sealed twice") == std::string::npos);
  repo.Ok({"prune"});
  repo.Ok({"restore", "1", "--to", dir / "a-back.img"});
  repo.Ok({"restore", "2", "--to", dir / "c-back.img"});
  CHECK(SameFile(dir / "a-back.img", dir / "a.img"));
  CHECK(SameFile(dir / "c-back.img", dir / "c.img"));
}

TEST_CASE(
    "repair catalog: two snapshots under one number (a client without an anchor numbered one "
    "again) keep the one the newest head lists, and the other gets a number of its own",
    "[trust]") {
  const LostSnapshotOne lost("two-under-one");
  const TempDir& dir = lost.dir;
  const RepoCli& repo = lost.repo;
  const std::string& packs = lost.packs;
  // Another client, with no anchor: it takes the rebuilt catalog as it is.
  const std::map<std::string, std::string> fresh = {
      {"WANBACKUP_SECURITY_DIR", dir / "other-client"}};
  REQUIRE(repo.Wb({"snapshot", dir / "c.img"}, "", fresh).exit_code == 0);
  std::filesystem::copy(dir / "packs.away", packs, std::filesystem::copy_options::recursive);
  // Before: "snapshot 1 is sealed twice", one of them left out, and the next prune removed it
  // (round 7, X1).
  const RunResult repair = repo.Wb({"repair", "catalog"}, "", fresh);
  INFO(repair.err);
  CHECK(repair.exit_code == 0);
  CHECK(repair.err.find("snapshot 1 of " + (dir / "a.img")) != std::string::npos);
  CHECK(repair.err.find("it is snapshot 2 from now on") != std::string::npos);
  REQUIRE(repo.Wb({"prune"}, "", fresh).exit_code == 0);
  for (const auto& [id, image] : {std::pair{"1", "c.img"}, std::pair{"2", "a.img"}}) {
    INFO(id);
    REQUIRE(
        repo.Wb({"restore", id, "--to", dir / (std::string("back-") + id)}, "", fresh).exit_code ==
        0);
    CHECK(SameFile(dir / (std::string("back-") + id), dir / image));
  }
  REQUIRE(repo.Wb({"verify"}, "", fresh).exit_code == 0);
  // A second repair finds the same two, the old record forgotten.
  const RunResult again = repo.Wb({"repair", "catalog"}, "", fresh);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("from now on") == std::string::npos);
  CHECK(nlohmann::json::parse(repo.Wb({"snapshots", "--json"}, "", fresh).out).size() == 2);
}

TEST_CASE(
    "prune: a snapshot sealed but never committed (killed before its commit, or a catalog "
    "copied while it ran) stops prune, and repair brings it back",
    "[trust]") {
  TempDir dir("sealed-uncommitted");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  WriteNoiseImage(dir / "b.img", 2, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  // The catalog as it is while snapshot 2 runs: its row "running", its sealed record and head
  // written but not committed. Before, prune took the pack for an interrupted run's leftover
  // (round 7, X2: a catalog copied back from the middle of a run is the same state).
  CHECK(
      repo.Wb({"snapshot", dir / "b.img"}, "", {{"WANBACKUP_FAILPOINT", "snapshot.before-finish"}})
          .exit_code == -1);
  const auto before = TreeContents(repo.path() + "/packs");
  CheckOneLineError(repo.Wb({"prune"}), 3, "holds a snapshot 2 of " + (dir / "b.img"));
  CHECK(TreeContents(repo.path() + "/packs") == before);
  repo.Ok({"repair", "catalog"});
  repo.Ok({"prune"});
  repo.Ok({"restore", "2", "--to", dir / "b-back.img"});
  CHECK(SameFile(dir / "b-back.img", dir / "b.img"));
}

TEST_CASE(
    "repair catalog --allow-missing-packs: snapshots with chunks in a pack that is only away "
    "are left out, never forgotten: prune keeps their packs, and they come back with it",
    "[trust]") {
  TempDir dir("pack-away");
  RepoCli repo(dir);
  WriteNoiseImage(dir / "a.img", 1, 3);
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  repo.Ok({"snapshot", dir / "a.img"});
  const std::string first = dir / "first.img";
  std::filesystem::copy_file(dir / "a.img", first);
  // Snapshot 2 shares most chunks with snapshot 1; its own record lies in a later pack.
  std::fstream(dir / "a.img", std::ios::in | std::ios::out | std::ios::binary).seekp(100000)
      << "changed!";
  repo.Ok({"snapshot", dir / "a.img"});
  const std::string pack = AttackOldestPack(repo);
  const std::string away = dir / "away.pack";
  std::filesystem::rename(pack, away);  // a disk not mounted yet
  const RunResult repair = repo.Wb({"repair", "catalog", "--allow-missing-packs"});
  INFO(repair.err);
  CHECK(repair.exit_code == 3);
  repo.Ok({"trust"});
  // Snapshot 2's own pack holds its record, which nothing lists or forgets: prune keeps it.
  const auto before = TreeContents(repo.path() + "/packs");
  CHECK(repo.Wb({"prune"}).exit_code == 3);
  CHECK(TreeContents(repo.path() + "/packs") == before);
  // The disk is back: both come back (round 9, Z1: a forget record written by the forced
  // repair had lost snapshot 2 for good).
  std::filesystem::rename(away, pack);
  repo.Ok({"repair", "catalog"});
  repo.Ok({"prune"});
  repo.Ok({"restore", "1", "--to", dir / "back1.img"});
  repo.Ok({"restore", "2", "--to", dir / "back2.img"});
  CHECK(SameFile(dir / "back1.img", first));
  CHECK(SameFile(dir / "back2.img", dir / "a.img"));
}
