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
#include "store/s3_lab.h"
#include "support/repo_cli.h"

using namespace wanbackup;
using wanbackup::testing::CheckOneLineError;
using wanbackup::testing::Local;
using wanbackup::testing::RunOptions;
using wanbackup::testing::RunResult;
using wanbackup::testing::SameFile;
using wanbackup::testing::TempDir;
using wanbackup::testing::WriteNoiseImage;

namespace {

// One host using the S3 repository at `url`: its own catalog cache and trust anchors, the
// repository's key file shared by every host.
struct S3Host {
  S3Host(const TempDir& dir, const std::string& name, std::string repo_url)
      : cache(dir / (name + "-cache")),
        security(dir / (name + "-security")),
        key(dir / "repo.key"),
        url(std::move(repo_url)) {}

  RunResult Wb(std::vector<std::string> args,
               const std::map<std::string, std::string>& env = {}) const {
    RunOptions o;
    const testing::S3Lab& lab = testing::S3Lab::Get();
    o.env = {{"AWS_ACCESS_KEY_ID", lab.access_key},
             {"AWS_SECRET_ACCESS_KEY", lab.secret},
             {"WANBACKUP_REPO", url},
             {"WANBACKUP_KEY_FILE", key},
             {"WANBACKUP_CACHE_DIR", cache},
             {"WANBACKUP_SECURITY_DIR", security}};
    for (const auto& [k, v] : env)
      o.env[k] = v;
    o.timeout = std::chrono::seconds(120);
    return Local(std::move(args), o);
  }
  RunResult Ok(std::vector<std::string> args) const {
    RunResult r = Wb(args);
    INFO("wanbackup " << args.front() << ": exit " << r.exit_code << "\nstdout: " << r.out
                      << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  }
  size_t SnapshotCount() const {
    return nlohmann::json::parse(Ok({"snapshots", "--json"}).out).size();
  }

  std::string cache, security, key, url;
};

std::string NewRepoUrl() {
  return testing::S3Lab::Get().NewLocation().ToString();
}

// Every object under the location's prefix, with its size: equal before and after = nothing
// was written.
std::map<std::string, uint64_t> ObjectsAt(const std::string& url) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, testing::S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  Result<std::vector<pipeline::internal::S3ListedObject>> listed = (*client)->List(loc->Key(""));
  REQUIRE(listed.ok());
  std::map<std::string, uint64_t> out;
  for (const auto& o : *listed)
    out[o.key] = o.size;
  return out;
}

}  // namespace

TEST_CASE("s3 repository: init, snapshot, restore bit-exact and verify across the WAN", "[s3lab]") {
  TempDir dir("s3repo");
  const S3Host a(dir, "a", NewRepoUrl());
  a.Ok({"init", "--key-file", a.key});
  // A second init finds config.json and changes nothing.
  const std::map<std::string, uint64_t> before = ObjectsAt(a.url);
  CheckOneLineError(a.Wb({"init", "--key-file", a.key}), 2, "already holds a repository");
  CHECK(ObjectsAt(a.url) == before);

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
  for (const auto& [key, size] : ObjectsAt(a.url)) {
    INFO(key);
    CHECK((key.ends_with("/config.json") || key.find("/packs/") != std::string::npos));
  }
}

TEST_CASE(
    "s3 repository: a second host with an empty cache lists and restores, and each host "
    "catches up with the other's snapshots",
    "[s3lab]") {
  TempDir dir("s3repo2");
  const S3Host a(dir, "a", NewRepoUrl());
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
  const S3Host a(dir, "a", NewRepoUrl());
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "disk.img", 5, 2);
  const std::map<std::string, uint64_t> before = ObjectsAt(a.url);
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
  CHECK(ObjectsAt(a.url) == before);

  // A cache directory another user could change is refused (it is written by readers too).
  a.Ok({"snapshots"});
  REQUIRE(::chmod(a.cache.c_str(), 0777) == 0);
  CheckOneLineError(a.Wb({"snapshots"}), 5, a.cache);
  REQUIRE(::chmod(a.cache.c_str(), 0700) == 0);
  a.Ok({"snapshots"});
}

namespace {

// Writes a lock object as another host's wanbackup would, refreshed `age_s` seconds ago.
void PlantLock(const std::string& url, const std::string& kind, int64_t age_s) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, testing::S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  const std::string text = nlohmann::json{
      {"kind", kind},
      {"host", "other-host"},
      {"pid", 4242},
      {"holder", "wanbackup pid 4242 on other-host running 'snapshot'"},
      {"refreshed_unix",
       static_cast<int64_t>(std::time(nullptr)) -
           age_s}}.dump();
  REQUIRE((*client)
              ->Upload(loc->Key("locks/" + kind + "-planted.json"),
                       reinterpret_cast<const uint8_t*>(text.data()), text.size())
              .ok());
}

size_t PackCount(const std::string& url) {
  size_t n = 0;
  for (const auto& [key, size] : ObjectsAt(url))
    n += key.find("/packs/") != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE(
    "s3 repository: another host's lock keeps prune out, a stale one is explained and "
    "removed, and forget and prune keep what is kept",
    "[s3lab]") {
  TempDir dir("s3repo4");
  const S3Host a(dir, "a", NewRepoUrl());
  const S3Host b(dir, "b", a.url);
  a.Ok({"init", "--key-file", a.key});
  WriteNoiseImage(dir / "one.img", 21, 2);
  WriteNoiseImage(dir / "two.img", 22, 2);
  a.Ok({"snapshot", dir / "one.img"});
  a.Ok({"snapshot", dir / "two.img"});
  CHECK(b.SnapshotCount() == 2);  // b's cache, made now, names snapshot 1's pack

  // A live writer on another host: readers go on, prune and a second writer are refused.
  PlantLock(a.url, "writer", 10);
  a.Ok({"snapshots"});
  CheckOneLineError(a.Wb({"prune"}), 7, "other-host");
  CheckOneLineError(b.Wb({"snapshot", dir / "one.img"}), 7, "other-host");
  // The same lock, not refreshed for two hours: its holder is gone; said so, and removed.
  PlantLock(a.url, "writer", 7200);
  const RunResult forget = a.Wb({"forget", "1", "--allow-empty-source"});
  INFO(forget.err);
  REQUIRE(forget.exit_code == 0);
  CHECK_THAT(forget.err, Catch::Contains("stale lock") && Catch::Contains("other-host"));

  const size_t packs_before = PackCount(a.url);
  a.Ok({"prune"});
  CHECK(PackCount(a.url) < packs_before);  // snapshot 1's pack held nothing live
  CHECK(a.SnapshotCount() == 1);
  // No lock object is left behind by the commands that ended.
  for (const auto& [key, size] : ObjectsAt(a.url))
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
  const S3Host a(dir, "a", NewRepoUrl());
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
    "s3 repository: keys from --s3-credentials-file with none in the environment, the file "
    "refused when others can read it and never written over",
    "[s3lab]") {
  TempDir dir("s3cred-repo");
  const S3Host a(dir, "a", NewRepoUrl());
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
