// A repository on S3 (docs/format.md, "A repository on S3"), through the real binary run in site
// A against the s3lab fixture's radosgw in site B: every request crosses the emulated WAN. Each
// test works under a prefix of its own; each "host" is a cache directory and a trust anchor
// directory of its own. Images are small (8 MiB, 4 MiB of it noise): CI's time is short.
#include <sys/stat.h>

#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "repository/s3_lock.h"
#include "store/internal/s3_client.h"
#include "store/s3_host.h"
#include "store/s3_lab.h"
#include "support/repo_cli.h"

using namespace wanbackup;
using wanbackup::testing::CheckOneLineError;
using wanbackup::testing::NewS3RepoUrl;
using wanbackup::testing::PlantS3Lock;
using wanbackup::testing::RunResult;
using wanbackup::testing::S3Host;
using wanbackup::testing::S3ObjectsAt;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::WriteNoiseImage;

TEST_CASE("s3 repository: init, snapshot, restore bit-exact and verify across the WAN", "[s3lab]") {
  TempDir dir("s3repo");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  // A second init finds config.json and changes nothing.
  const std::map<std::string, uint64_t> before = S3ObjectsAt(a.url);
  CheckOneLineError(a.Wb({"init", "--key-file", a.key}), 2, "already holds a repository");
  CHECK(S3ObjectsAt(a.url) == before);

  WriteNoiseImage(dir / "disk.img", 7, 2);
  a.Ok({"snapshot", dir / "disk.img"});
  CHECK(a.SnapshotCount() == 1);
  a.Ok({"restore", "latest", "--to", dir / "restored.img"});
  CHECK(SameFile(dir / "disk.img", dir / "restored.img"));
  a.Ok({"verify"});
  // The catalog is a cache, in its own directory, mode 0700; nothing of it is in the bucket.
  struct stat st {};
  REQUIRE(::stat(a.cache.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(::stat((a.cache + "/catalog.db").c_str(), &st) == 0);
  for (const auto& [key, size] : S3ObjectsAt(a.url)) {
    INFO(key);
    CHECK((key.ends_with("/config.json") || key.find("/packs/") != std::string::npos));
  }
}

TEST_CASE(
    "s3 repository: a second host with an empty cache lists and restores, and each host "
    "catches up with the other's snapshots",
    "[s3lab]") {
  TempDir dir("s3repo2");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 11, 2);
  a.Ok({"snapshot", dir / "one.img"});

  CHECK(b.SnapshotCount() == 1);  // rebuilt from the packs
  b.Ok({"restore", "1", "--to", dir / "b1.img"});
  CHECK(SameFile(dir / "one.img", dir / "b1.img"));

  WriteNoiseImage(dir / "two.img", 12, 2);
  a.Ok({"snapshot", dir / "two.img"});
  CHECK(b.SnapshotCount() == 2);  // b's cache lacked a pack: refreshed
  b.Ok({"restore", "2", "--to", dir / "b2.img"});
  CHECK(SameFile(dir / "two.img", dir / "b2.img"));

  // b writes too, and a sees it; the head counter goes on from the newest head.
  b.Ok({"snapshot", dir / "one.img"});
  CHECK(a.SnapshotCount() == 3);
  a.Ok({"restore", "3", "--to", dir / "a3.img"});
  CHECK(SameFile(dir / "one.img", dir / "a3.img"));
  b.Ok({"verify"});
}

TEST_CASE(
    "s3 repository: wrong keys, a missing bucket, an unreachable endpoint and a bad URL "
    "fail with one line and change nothing",
    "[s3lab]") {
  TempDir dir("s3repo3");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "disk.img", 5, 2);
  const std::map<std::string, uint64_t> before = S3ObjectsAt(a.url);
  const testing::S3Lab& lab = testing::S3Lab::Get();

  const RunResult wrong = a.Wb({"snapshot", dir / "disk.img"},
                               {{"AWS_SECRET_ACCESS_KEY", "not-the-secret-" + lab.secret}});
  CheckOneLineError(wrong, 5, "AWS_SECRET_ACCESS_KEY");
  CHECK(wrong.err.find(lab.secret) == std::string::npos);
  CheckOneLineError(a.Wb({"snapshots"}, {{"AWS_ACCESS_KEY_ID", ""}}), 5, "AWS_ACCESS_KEY_ID");

  CheckOneLineError(
      a.Wb({"snapshots"}, {{"WANBACKUP_REPO", "s3:" + lab.endpoint + "/no-such-bucket-wb/x"}}), 6,
      "does not exist");
  // Nothing listens on port 1 in site B: refused at once, retried, then one line.
  CheckOneLineError(a.Wb({"snapshots"}, {{"WANBACKUP_REPO", "s3:http://198.18.0.2:1/bkt/x"}}), 4,
                    "cannot connect");
  CheckOneLineError(a.Wb({"snapshots"}, {{"WANBACKUP_REPO", "s3:ftp://198.18.0.2/b"}}), 2, "s3:");
  CheckOneLineError(a.Wb({"init"}, {{"WANBACKUP_REPO", "s3:http://198.18.0.2:7480/B_ad"}}), 2,
                    "bucket");
  CHECK(S3ObjectsAt(a.url) == before);

  // A cache directory another user could change is refused (it is written by readers too).
  a.Ok({"snapshots"});
  REQUIRE(::chmod(a.cache.c_str(), 0777) == 0);
  CheckOneLineError(a.Wb({"snapshots"}), 5, a.cache);
  REQUIRE(::chmod(a.cache.c_str(), 0700) == 0);
  a.Ok({"snapshots"});
}

namespace {

size_t PackCount(const std::string& url) {
  size_t n = 0;
  for (const auto& [key, size] : S3ObjectsAt(url))
    n += key.find("/packs/") != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE(
    "s3 repository: another host's lock keeps prune out, a stale one is explained and "
    "removed, and forget and prune keep what is kept",
    "[s3lab]") {
  TempDir dir("s3repo4");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 21, 2);
  WriteNoiseImage(dir / "two.img", 22, 2);
  a.Ok({"snapshot", dir / "one.img"});
  a.Ok({"snapshot", dir / "two.img"});
  CHECK(b.SnapshotCount() == 2);  // b's cache, made now, names snapshot 1's pack

  // A live writer on another host: readers go on, prune and a second writer are refused.
  PlantS3Lock(a.url, "writer", 10);
  a.Ok({"snapshots"});
  CheckOneLineError(a.Wb({"prune"}), 7, "other-host");
  CheckOneLineError(b.Wb({"snapshot", dir / "one.img"}), 7, "other-host");
  // The same lock, not refreshed for two hours: its holder is gone; said so, and removed.
  PlantS3Lock(a.url, "writer", 7200);
  const RunResult forget = a.Wb({"forget", "1", "--allow-empty-source"});
  INFO(forget.err);
  REQUIRE(forget.exit_code == 0);
  CHECK_THAT(forget.err, Catch::Contains("stale lock") && Catch::Contains("other-host"));

  const size_t packs_before = PackCount(a.url);
  a.Ok({"prune"});
  CHECK(PackCount(a.url) < packs_before);  // snapshot 1's pack held nothing live
  CHECK(a.SnapshotCount() == 1);
  // No lock object is left behind by the commands that ended.
  for (const auto& [key, size] : S3ObjectsAt(a.url))
    CHECK(key.find("/locks/") == std::string::npos);
  // A host whose cache still names the removed pack refreshes, and restores what is kept.
  CHECK(b.SnapshotCount() == 1);
  b.Ok({"restore", "2", "--to", dir / "two-b.img"});
  CHECK(SameFile(dir / "two.img", dir / "two-b.img"));
  b.Ok({"verify"});
}

TEST_CASE(
    "s3 repository: repair catalog rebuilds a damaged cache, and replicate brings a file "
    "to each snapshot",
    "[s3lab]") {
  TempDir dir("s3repo5");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  // Two snapshots of one source (a replica holds one series), and each version kept aside.
  WriteNoiseImage(dir / "one.img", 31, 2);
  WriteNoiseImage(dir / "two.img", 32, 2);
  WriteNoiseImage(dir / "disk.img", 31, 2);
  a.Ok({"snapshot", dir / "disk.img"});
  WriteNoiseImage(dir / "disk.img", 32, 2);
  a.Ok({"snapshot", dir / "disk.img"});

  // A cache whose catalog lost its rows is refused (the head lists more), and repaired.
  testing::Sql(a.cache + "/catalog.db", "DELETE FROM snapshot_maps; DELETE FROM snapshots;");
  CHECK(a.Wb({"snapshots"}).exit_code == 3);
  a.Ok({"repair", "catalog"});
  CHECK(a.SnapshotCount() == 2);

  a.Ok({"replicate", "1", "--to", dir / "replica.img"});
  CHECK(SameFile(dir / "one.img", dir / "replica.img"));
  a.Ok({"replicate", "2", "--to", dir / "replica.img"});
  CHECK(SameFile(dir / "two.img", dir / "replica.img"));
}

TEST_CASE(
    "s3 lock objects: kinds keep out what repo_lock.h keeps out, and stale ones are told "
    "apart",
    "[s3lock]") {
  using pipeline::LockKind;
  CHECK(pipeline::S3LocksCompatible(LockKind::kShared, LockKind::kShared));
  CHECK(pipeline::S3LocksCompatible(LockKind::kShared, LockKind::kWriter));
  CHECK_FALSE(pipeline::S3LocksCompatible(LockKind::kWriter, LockKind::kWriter));
  CHECK_FALSE(pipeline::S3LocksCompatible(LockKind::kShared, LockKind::kExclusive));
  CHECK_FALSE(pipeline::S3LocksCompatible(LockKind::kExclusive, LockKind::kWriter));

  pipeline::S3LockInfo info;
  info.kind = LockKind::kWriter;
  info.host = "h1";
  info.pid = 77;
  info.holder = "wanbackup pid 77 on h1 running 'snapshot'";
  info.refreshed_unix = 1'000'000;
  Result<pipeline::S3LockInfo> back = pipeline::ParseS3Lock(pipeline::S3LockJson(info));
  REQUIRE(back.ok());
  CHECK(back->kind == LockKind::kWriter);
  CHECK(back->holder == info.holder);
  CHECK_FALSE(pipeline::ParseS3Lock("{\"kind\": 3}").ok());
  // Alive: its pid runs here, or it was refreshed lately on another host.
  CHECK(pipeline::S3LockStaleReason(info, "h1", 1'000'060, true).empty());
  CHECK(pipeline::S3LockStaleReason(info, "h2", 1'000'000 + 29 * 60, false).empty());
  CHECK_THAT(pipeline::S3LockStaleReason(info, "h1", 1'000'060, false), Catch::Contains("gone"));
  CHECK_THAT(pipeline::S3LockStaleReason(info, "h2", 1'000'000 + 31 * 60, false),
             Catch::Contains("not refreshed for 31 minutes"));
}

TEST_CASE(
    "s3 repository: with wrong keys, a missing bucket or a bad URL, the commands that "
    "write or remove fail with one line and nothing is lost",
    "[s3lab]") {
  TempDir dir("s3repo6");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 41, 2);
  WriteNoiseImage(dir / "two.img", 42, 2);
  a.Ok({"snapshot", dir / "one.img"});
  a.Ok({"snapshot", dir / "two.img"});
  a.Ok({"forget", "1", "--allow-empty-source"});  // prune would have a pack to remove
  const std::map<std::string, uint64_t> before = S3ObjectsAt(a.url);
  const testing::S3Lab& lab = testing::S3Lab::Get();

  // An access key the service does not know, and the right one with a wrong secret.
  const std::map<std::string, std::string> unknown_key = {{"AWS_ACCESS_KEY_ID", "NOSUCHKEY0000"}};
  const std::map<std::string, std::string> wrong_secret = {
      {"AWS_SECRET_ACCESS_KEY", "not-the-secret-" + lab.secret}};
  for (const auto& env : {unknown_key, wrong_secret}) {
    INFO(env.begin()->first);
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"prune", "--max-unused", "0"},
                                               {"forget", "2", "--allow-empty-source"},
                                               {"snapshot", dir / "one.img"},
                                               {"restore", "2", "--to", dir / "back.img"},
                                               {"verify"}}) {
      INFO(args.front());
      const RunResult r = a.Wb(args, env);
      CheckOneLineError(r, 5, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
      CHECK(r.err.find(lab.secret) == std::string::npos);
    }
  }
  struct stat st {};
  CHECK(::stat((dir / "back.img").c_str(), &st) != 0);  // restore made no file

  // A bucket that does not exist: every command says so, and init makes none.
  const std::string no_bucket = "s3:" + lab.endpoint + "/no-such-bucket-wb6/x";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"init", "--key-file", dir / "other.key"},
                                             {"snapshot", dir / "one.img"},
                                             {"prune"},
                                             {"restore", "1", "--to", dir / "back.img"}}) {
    INFO(args.front());
    CheckOneLineError(a.Wb(args, {{"WANBACKUP_REPO", no_bucket}}), 6, "does not exist");
  }
  CHECK(::stat((dir / "other.key").c_str(), &st) != 0);

  // URLs that are not an S3 repository's: refused before any request.
  for (const char* url :
       {"s3:http://198.18.0.2:7480", "s3:http://198.18.0.2:port/bkt/x", "s3:198.18.0.2/bkt/x"}) {
    INFO(url);
    CheckOneLineError(a.Wb({"prune"}, {{"WANBACKUP_REPO", url}}), 2, "s3:");
    CheckOneLineError(a.Wb({"snapshot", dir / "one.img"}, {{"WANBACKUP_REPO", url}}), 2, "s3:");
  }

  CHECK(S3ObjectsAt(a.url) == before);
  CHECK(a.SnapshotCount() == 1);
  a.Ok({"restore", "2", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "two.img", dir / "back.img"));
}

TEST_CASE(
    "s3 repository: a snapshot killed between the parts of its upload and their completion "
    "leaves an unfinished upload, which prune abandons",
    "[s3lab]") {
  TempDir dir("s3repo7");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "small.img", 51, 2);
  a.Ok({"snapshot", dir / "small.img"});
  // 16 MiB of noise: the pack is larger than a part (16 MiB), so it goes up in parts.
  WriteNoiseImage(dir / "large.img", 52, 5);
  CHECK(
      a.Wb({"snapshot", dir / "large.img"}, {{"WANBACKUP_FAILPOINT", "s3.before-upload-complete"}})
          .exit_code == -1);
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(a.url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, testing::S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  CHECK((*client)->ListUploads(loc->Key("packs/")).value().size() == 1);

  const nlohmann::json pruned = nlohmann::json::parse(a.Ok({"prune", "--json"}).out);
  CHECK(pruned["unfinished_uploads"] == 1);
  CHECK((*client)->ListUploads(loc->Key("packs/")).value().empty());
  CHECK(a.SnapshotCount() == 1);
  a.Ok({"restore", "1", "--to", dir / "back.img"});
  CHECK(SameFile(dir / "small.img", dir / "back.img"));
  // The next snapshot of the large image goes up whole (its number is the killed run's next:
  // nothing of that run reached the bucket, and this host's cache kept its number, as a
  // directory repository does).
  a.Ok({"snapshot", dir / "large.img"});
  CHECK(a.SnapshotCount() == 2);
  a.Ok({"restore", "latest", "--to", dir / "large-back.img"});
  CHECK(SameFile(dir / "large.img", dir / "large-back.img"));
}

TEST_CASE(
    "s3 repository: keys from --s3-credentials-file with none in the environment, the file "
    "refused when others can read it and never written over",
    "[s3lab]") {
  TempDir dir("s3cred-repo");
  const S3Host a(dir, "a", NewS3RepoUrl());
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const std::string cred = dir / "s3.cred";
  std::ofstream(cred) << "[default]\naws_access_key_id = " << lab.access_key
                      << "\naws_secret_access_key = " << lab.secret << "\n";
  REQUIRE(::chmod(cred.c_str(), 0600) == 0);
  const std::map<std::string, std::string> no_keys = {{"AWS_ACCESS_KEY_ID", ""},
                                                      {"AWS_SECRET_ACCESS_KEY", ""}};
  CheckOneLineError(a.Wb({"init", "--key-file", a.key}, no_keys), 5,
                    "AWS_ACCESS_KEY_ID is not set");
  const std::vector<std::string> with_file = {"--s3-credentials-file", cred};
  auto args = [&with_file](std::vector<std::string> v) {
    v.insert(v.end(), with_file.begin(), with_file.end());
    return v;
  };
  REQUIRE(a.Wb(args({"init", "--key-file", a.key}), no_keys).exit_code == 0);
  WriteNoiseImage(dir / "disk.img", 31, 2);
  REQUIRE(a.Wb(args({"snapshot", dir / "disk.img"}), no_keys).exit_code == 0);
  REQUIRE(a.Wb(args({"restore", "latest", "--to", dir / "back.img"}), no_keys).exit_code == 0);
  CHECK(SameFile(dir / "disk.img", dir / "back.img"));
  // The variable names the file as well.
  CHECK(a.Wb({"snapshots"}, {{"AWS_ACCESS_KEY_ID", ""},
                             {"AWS_SECRET_ACCESS_KEY", ""},
                             {"WANBACKUP_S3_CREDENTIALS_FILE", cred}})
            .exit_code == 0);
  // A credential file: restore never writes over it.
  CheckOneLineError(a.Wb(args({"restore", "latest", "--to", cred, "--force"}), no_keys), 2,
                    "credential file");
  // Readable by others: refused before any request, one line, the keys never shown.
  REQUIRE(::chmod(cred.c_str(), 0644) == 0);
  const RunResult open = a.Wb(args({"snapshots"}), no_keys);
  CheckOneLineError(open, 5, "S3 credentials file");
  CHECK(open.err.find(lab.secret) == std::string::npos);
  // Named for a directory repository: a mistake, said so.
  CheckOneLineError(a.Wb(args({"snapshots", "--repo", dir.path()}), no_keys), 2,
                    "--s3-credentials-file is for an s3: repository");
}

TEST_CASE(
    "s3 repository: --upload-memory bounds the packs held while they upload, and is refused "
    "for a directory",
    "[s3lab]") {
  TempDir dir("s3upload");
  const S3Host a(dir, "a", NewS3RepoUrl());
  a.Ok({"init", "--key-file", a.key, "--chunk-size", "256K"});
  WriteNoiseImage(dir / "one.img", 31, 2);  // 4 MiB of noise: 16 records of 256 KiB
  WriteNoiseImage(dir / "two.img", 32, 2);
  // A pack a record: 16 full packs, none of them written by a checkpoint before the end.
  const std::map<std::string, std::string> small_packs = {{"WANBACKUP_TEST_PACK_SIZE", "256K"}};
  const auto peak = [&](std::vector<std::string> args) {
    const nlohmann::json j = testing::Json(a.Wb(std::move(args), small_packs));
    return j["peak_upload_bytes"].get<uint64_t>();
  };
  const uint64_t pack = 300 << 10;  // a record of 256 KiB and its header, compressed nothing
  const uint64_t bounded = peak({"snapshot", dir / "one.img", "--upload-memory", "1M", "--json"});
  CHECK(bounded > 0);
  CHECK(bounded <= (1u << 20) + pack);  // the budget, and the pack that went over it
  // By default eight packs (512 MiB of 64 MiB packs; here of 256 KiB) are held at once.
  const uint64_t unbounded = peak({"snapshot", dir / "two.img", "--json"});
  CHECK(unbounded >= 8 * (256u << 10));
  CHECK(unbounded > (1u << 20) + pack);
  a.Ok({"restore", "1", "--to", dir / "one-back.img"});
  CHECK(SameFile(dir / "one.img", dir / "one-back.img"));
  a.Ok({"restore", "2", "--to", dir / "two-back.img"});
  CHECK(SameFile(dir / "two.img", dir / "two-back.img"));

  const std::map<std::string, uint64_t> before = S3ObjectsAt(a.url);
  CheckOneLineError(a.Wb({"snapshot", dir / "one.img", "--upload-memory", "0"}), 2,
                    "--upload-memory");
  CheckOneLineError(a.Wb({"snapshot", dir / "one.img", "--upload-memory", "lots"}), 2,
                    "--upload-memory");
  CHECK(S3ObjectsAt(a.url) == before);

  // A directory repository writes each pack as it fills: the flag would mean nothing there.
  const testing::RepoCli local(dir);
  local.Ok({"init", "--key-file", local.key()});
  CheckOneLineError(local.Wb({"snapshot", dir / "one.img", "--upload-memory", "1M"}), 2,
                    "for a repository on S3");
  CHECK(local.Ok({"snapshots", "--json"}).out.find("\"id\"") == std::string::npos);
}
