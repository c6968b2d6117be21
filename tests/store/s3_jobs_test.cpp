// Jobs on a repository on S3 (docs/operations.md, "A repository on S3"), through the real binary
// run in site A against the s3lab fixture's radosgw in site B: `run` with the keys in the job's
// s3_credentials_file (none in the environment), its history in the cache directory (never in
// the rebuildable catalog cache, nor in the bucket), retention, and the refusals.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

namespace {

// A job `db` on the S3 repository of host `a`, run with no key in the environment: the config's
// s3_credentials_file and cache_dir are all it has.
struct S3Job {
  TempDir dir{"s3jobs"};
  S3Host a{dir, "a", NewS3RepoUrl()};
  std::string config = dir / "wanbackup.toml";
  std::string credentials = dir / "s3.cred";
  std::string image = dir / "disk.img";

  S3Job() {
    a.Ok({"init", "--key-file", a.key});
    const testing::S3Lab& lab = testing::S3Lab::Get();
    WriteCredentials(lab.access_key, lab.secret);
  }
  void WriteCredentials(const std::string& id, const std::string& secret) const {
    std::ofstream(credentials) << "[default]\naws_access_key_id = " << id
                               << "\naws_secret_access_key = " << secret << "\n";
    REQUIRE(::chmod(credentials.c_str(), 0600) == 0);
  }
  void Write(const std::string& job_keys, const std::string& repo_keys = "",
             const std::string& more = "") const {
    std::ofstream(config) << "[repositories.dr]\npath = \"" << a.url << "\"\nkey_file = \"" << a.key
                          << "\"\ns3_credentials_file = \"" << credentials << "\"\ncache_dir = \""
                          << a.cache << "\"\n"
                          << repo_keys << "\n[jobs.db]\nrepository = \"dr\"\nsource = \"" << image
                          << "\"\n"
                          << job_keys << more;
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
  }
  // The binary with the config, and no S3 keys, repository or cache dir in the environment.
  RunResult Wb(std::vector<std::string> args) const {
    args.push_back("--config");
    args.push_back(config);
    return a.Wb(args, {{"AWS_ACCESS_KEY_ID", ""},
                       {"AWS_SECRET_ACCESS_KEY", ""},
                       {"WANBACKUP_REPO", ""},
                       {"WANBACKUP_KEY_FILE", ""},
                       {"WANBACKUP_CACHE_DIR", ""}});
  }
  nlohmann::json Json(std::vector<std::string> args) const {
    args.push_back("--json");
    const RunResult r = Wb(args);
    INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  }
  nlohmann::json Runs() const { return Json({"jobs", "db", "--last", "20"})["jobs"][0]["runs"]; }
};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE(
    "s3 jobs: a job runs twice with the keys of its credentials file, forgets, prunes, "
    "verifies and replicates, and jobs shows both runs from the cache directory",
    "[s3lab]") {
  S3Job s;
  const std::string standby = s.dir / "standby.img";
  s.Write(
      "schedule = \"daily\"\nkeep_last = 1\nprune_interval = \"always\"\nverify_share = 1\n"
      "replicate_to = [\"" +
          standby + "\"]\n",
      "", "\n[metrics]\ntextfile = \"" + s.dir / "wanbackup.prom" + "\"\n");
  WriteNoiseImage(s.image, 40, 2);
  const nlohmann::json plan = s.Json({"run", "db", "--dry-run"});
  CHECK(plan["dry_run"] == true);
  CHECK_FALSE(Exists(s.a.cache + "/job-history.db"));  // a dry run writes no history

  nlohmann::json last;
  for (uint64_t v = 1; v <= 2; ++v) {
    WriteNoiseImage(s.image, 40 + v, 2);
    last = s.Json({"run", "db"});
    CHECK(last["status"] == "ok");
    CHECK(last["exit_code"] == 0);
  }
  REQUIRE(last["steps"].size() == 5);
  CHECK(last["steps"][1]["status"] == "ok");  // replicate
  CHECK(SameFile(standby, s.image));
  CHECK(last["steps"][2]["forgotten"] == nlohmann::json::array({1}));
  CHECK(last["steps"][3]["status"] == "ok");  // prune, under the bucket's exclusive lock
  CHECK(last["steps"][4]["chunks_damaged"] == 0);
  CHECK(s.a.SnapshotCount() == 1);

  const nlohmann::json runs = s.Runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0]["status"] == "ok");
  CHECK(runs[1]["status"] == "ok");
  CHECK(runs[0]["snapshot"] == 2);
  // The history is this host's file in the cache directory; nothing of it is in the bucket.
  CHECK(Exists(s.a.cache + "/job-history.db"));
  for (const auto& [key, size] : S3ObjectsAt(s.a.url)) {
    INFO(key);
    CHECK((key.ends_with("/config.json") || key.find("/packs/") != std::string::npos));
  }
  const std::string metrics = testing::FileContents(s.dir / "wanbackup.prom");
  CHECK_THAT(metrics, Catch::Contains("wanbackup_job_last_failed{job=\"db\"} 0"));

  // No secret in what the run and jobs print, nor in the schedule's units or crontab line.
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const std::string units = s.dir / "units";
  std::filesystem::create_directories(units);
  const RunResult install = s.Wb({"schedule", "db", "--install", "--unit-dir", units});
  INFO(install.err);
  CHECK(install.exit_code == 0);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(units)) {
    if (!entry.is_regular_file()) continue;
    const std::string text = testing::FileContents(entry.path());
    INFO(entry.path() << ": " << text);
    CHECK(text.find(lab.secret) == std::string::npos);
    CHECK(text.find(lab.access_key) == std::string::npos);
    CHECK(text.find("s3.cred") == std::string::npos);
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"jobs", "db", "--json"},
                                             {"run", "db", "--dry-run"},
                                             {"schedule", "db"},
                                             {"schedule", "db", "--cron"}}) {
    const RunResult r = s.Wb(args);
    INFO(args[0] << ": " << r.out << r.err);
    CHECK(r.out.find(lab.secret) == std::string::npos);
    CHECK(r.err.find(lab.secret) == std::string::npos);
    CHECK(r.out.find(lab.access_key) == std::string::npos);
  }
}

TEST_CASE(
    "s3 jobs: the history survives a rebuild of the catalog cache, whether the cache was "
    "deleted, made stale by another host or rebuilt by repair",
    "[s3lab]") {
  S3Job s;
  s.Write("keep_last = 2\nprune_interval = \"always\"\n");
  WriteNoiseImage(s.image, 51, 2);
  s.Json({"run", "db"});

  // The catalog cache deleted: the next run rebuilds it from the packs; the history stays.
  for (const char* suffix : {"", "-wal", "-shm"})
    std::remove((s.a.cache + "/catalog.db" + suffix).c_str());
  WriteNoiseImage(s.image, 52, 2);
  CHECK(s.Json({"run", "db"})["status"] == "ok");
  CHECK(s.Runs().size() == 2);

  // Another host writes: this host's cache is stale and rebuilt by the next command.
  const S3Host b(s.dir, "b", s.a.url);
  b.Ok({"snapshot", s.dir / "disk.img", "--tag", "by-hand"});
  WriteNoiseImage(s.image, 53, 2);
  const nlohmann::json third = s.Json({"run", "db"});
  CHECK(third["status"] == "ok");
  CHECK(third["steps"][2]["forgotten"].size() == 1);  // the job's own only, never b's
  REQUIRE(s.Runs().size() == 3);

  // repair catalog rebuilds the cache (keeping the old one beside it): the history stays.
  s.a.Ok({"repair", "catalog"});
  const nlohmann::json runs = s.Runs();
  REQUIRE(runs.size() == 3);
  for (const nlohmann::json& r : runs)
    CHECK(r["status"] == "ok");
  CHECK(s.a.SnapshotCount() == 3);  // the job keeps two; b's is not the job's to forget
}

TEST_CASE(
    "s3 jobs: a wrong credentials file fails the run with exit 5 and one line, and bad S3 "
    "keys in the config are refused with exit 2 before anything runs",
    "[s3lab]") {
  S3Job s;
  s.Write("");
  WriteNoiseImage(s.image, 61, 2);
  const std::map<std::string, uint64_t> before = S3ObjectsAt(s.a.url);
  const testing::S3Lab& lab = testing::S3Lab::Get();

  s.WriteCredentials(lab.access_key, "not-the-secret-" + lab.secret);
  const RunResult wrong = s.Wb({"run", "db"});
  CheckOneLineError(wrong, 5, "job db");
  CHECK(wrong.err.find(lab.secret) == std::string::npos);
  CHECK(wrong.out.find(lab.secret) == std::string::npos);
  CHECK(S3ObjectsAt(s.a.url) == before);

  // A credentials file others can read: refused when the config is read.
  s.WriteCredentials(lab.access_key, lab.secret);
  REQUIRE(::chmod(s.credentials.c_str(), 0644) == 0);
  CheckOneLineError(s.Wb({"run", "db", "--dry-run"}), 2, "s3_credentials_file");
  REQUIRE(::chmod(s.credentials.c_str(), 0600) == 0);

  // Keys in the URL: refused, and not repeated.
  const std::string with_keys = "s3:http://AKIDEXAMPLE:hunter2secret@" + s.a.url.substr(10);
  std::ofstream(s.config) << "[repositories.dr]\npath = \"" << with_keys << "\"\nkey_file = \""
                          << s.a.key << "\"\n[jobs.db]\nrepository = \"dr\"\nsource = \"" << s.image
                          << "\"\n";
  const RunResult url = s.Wb({"run", "db"});
  CheckOneLineError(url, 2, "credentials do not belong in the URL");
  CHECK(url.err.find("hunter2secret") == std::string::npos);

  // S3 keys for a repository that is a directory.
  std::ofstream(s.config) << "[repositories.dr]\npath = \"" << s.dir / "repo"
                          << "\"\nkey_file = \"" << s.a.key << "\"\ncache_dir = \"" << s.a.cache
                          << "\"\n[jobs.db]\nrepository = \"dr\"\nsource = \"" << s.image << "\"\n";
  CheckOneLineError(s.Wb({"run", "db"}), 2, "cache_dir: is for a repository on S3");
  CHECK(S3ObjectsAt(s.a.url) == before);
}

TEST_CASE(
    "s3 jobs: another host's reader keeps forget and prune out (exit 7 naming it, the new "
    "snapshot kept), and the next run does them once it is gone",
    "[s3lab]") {
  S3Job s;
  s.Write("keep_last = 1\nprune_interval = \"always\"\nlock_wait = \"1s\"\n");
  WriteNoiseImage(s.image, 71, 2);
  s.Json({"run", "db"});
  PlantS3Lock(s.a.url, "shared", 10);  // a restore or mount on another host, alive
  WriteNoiseImage(s.image, 72, 2);
  const RunResult held = s.Wb({"run", "db", "--json"});
  CHECK(held.exit_code == 7);
  CHECK_THAT(held.err, Catch::Contains("other-host"));
  const nlohmann::json out = nlohmann::json::parse(held.out);
  CHECK(out["steps"][0]["status"] == "ok");
  CHECK(out["steps"][2]["status"] == "failed");  // forget
  CHECK(out["steps"][3]["status"] == "skipped");
  CHECK(s.a.SnapshotCount() == 2);

  PlantS3Lock(s.a.url, "shared", 7200);  // its holder is gone: stale, and removed
  WriteNoiseImage(s.image, 73, 2);
  const nlohmann::json next = s.Json({"run", "db"});
  CHECK(next["status"] == "ok");
  CHECK(next["steps"][2]["forgotten"].size() == 2);
  CHECK(next["steps"][3]["status"] == "ok");
  CHECK(s.a.SnapshotCount() == 1);
  const nlohmann::json runs = s.Runs();
  REQUIRE(runs.size() == 3);
  CHECK(runs[1]["status"] == "failed");
}
