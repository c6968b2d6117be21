// `wanbackup run`, `jobs` and `schedule` on local images (no target): the steps of a job, its
// history, the dry run, and bad configs. The WAN and the generated units: integration/jobs_test.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "support/repo_cli.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {
namespace {

struct JobSetup {
  TempDir dir{"jobs-cli"};
  RepoCli repo{dir};
  std::string config = dir / "wanbackup.toml";
  std::string image = dir / "disk.img";

  JobSetup() { repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"}); }

  void Write(const std::string& job_keys) const {
    std::ofstream(config) << "[repositories.main]\npath = \"" << repo.path() << "\"\nkey_file = \""
                          << repo.key() << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                          << image << "\"\n"
                          << job_keys;
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
  }
  RunResult Wb(std::vector<std::string> args) const {
    args.push_back("--config");
    args.push_back(config);
    return repo.Wb(args);
  }
  nlohmann::json Json(std::vector<std::string> args) const {
    args.push_back("--json");
    const RunResult r = Wb(args);
    INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  }
};

TEST_CASE(
    "run: a job snapshots, replicates, forgets by its rules, prunes and verifies, and jobs lists "
    "it",
    "[jobs]") {
  JobSetup s;
  const std::string standby = s.dir / "standby.img";
  s.Write(
      "tag = \"nightly\"\nkeep_last = 2\nprune_interval = \"always\"\nverify_share = 1\n"
      "replicate_to = [\"" +
      standby + "\"]\n");
  nlohmann::json last;
  for (uint64_t v = 1; v <= 3; ++v) {
    WriteNoiseImage(s.image, v, 4);
    last = s.Json({"run", "disk"});
    CHECK(last["status"] == "ok");
    CHECK(last["exit_code"] == 0);
    CHECK(last["error"].is_null());
  }
  REQUIRE(last["steps"].size() == 5);
  CHECK(last["steps"][0]["step"] == "snapshot");
  CHECK(last["steps"][1]["step"] == "replicate");
  REQUIRE(last["steps"][1]["replicas"].size() == 1);
  CHECK(last["steps"][1]["replicas"][0]["mode"] == "diff");  // from the previous run's snapshot
  CHECK(SameFile(standby, s.image));
  CHECK(last["steps"][2]["forgotten"] == nlohmann::json::array({1}));
  CHECK(last["steps"][3]["step"] == "prune");
  CHECK(last["steps"][3]["status"] == "ok");
  CHECK(last["steps"][4]["chunks_damaged"] == 0);
  CHECK(last["steps"][4]["share_of"] == 1);

  const nlohmann::json snapshots = nlohmann::json::parse(s.repo.Ok({"snapshots", "--json"}).out);
  CHECK(snapshots.size() == 2);
  s.repo.Ok({"restore", "latest", "--to", s.dir / "back.img"});
  CHECK(SameFile(s.dir / "back.img", s.image));

  const nlohmann::json jobs = s.Json({"jobs"});
  REQUIRE(jobs["jobs"].size() == 1);
  CHECK(jobs["jobs"][0]["state"] == "ok");
  REQUIRE(jobs["jobs"][0]["runs"].size() == 3);
  CHECK(jobs["jobs"][0]["runs"][0]["snapshot"] == last["snapshot"]);
  CHECK(jobs["jobs"][0]["next_run_unix_ms"].is_null());  // no schedule
  CHECK(jobs["jobs"][0]["history_error"].is_null());
  // A config named relative to the working directory is reported as an absolute path.
  const RunResult relative =
      s.repo.WbIn(s.dir.path(), {"jobs", "--config", "wanbackup.toml", "--json"});
  REQUIRE(relative.exit_code == 0);
  CHECK(nlohmann::json::parse(relative.out)["config"] == s.config);
  const RunResult text = s.Wb({"jobs"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("disk: ok (repository main") == 0);
}

TEST_CASE("run: --dry-run says what each step would do and changes nothing", "[jobs]") {
  JobSetup s;
  s.Write("keep_daily = 7\nverify_share = \"10%\"\n");
  WriteNoiseImage(s.image, 1, 2);
  const auto before = TreeContents(s.repo.path());
  const RunResult r = s.Wb({"run", "disk", "--dry-run"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("snapshot " + s.image + " into " + s.repo.path()) == 0);
  CHECK(r.out.find("prune: due") != std::string::npos);
  CHECK(r.out.find("verify share 1 of 10") != std::string::npos);
  CHECK(TreeContents(s.repo.path()) == before);
  // A source the run could not read fails the dry run too, as the run would (not found: 6).
  REQUIRE(::unlink(s.image.c_str()) == 0);
  const RunResult missing = s.Wb({"run", "disk", "--dry-run"});
  CHECK(missing.exit_code == 6);
  CHECK(missing.err.find("job disk: its source: cannot open " + s.image) != std::string::npos);
  CHECK(TreeContents(s.repo.path()) == before);
}

TEST_CASE("run: a failing snapshot fails the run, is recorded, and forgets nothing", "[jobs]") {
  JobSetup s;
  s.Write("keep_last = 1\n");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});
  REQUIRE(::unlink(s.image.c_str()) == 0);
  const RunResult r = s.Wb({"run", "disk"});
  CHECK(r.exit_code == 6);  // the source is not found
  CHECK(r.err.find("job disk, snapshot: ") != std::string::npos);
  const nlohmann::json jobs = s.Json({"jobs"});
  CHECK(jobs["jobs"][0]["state"] == "failed");
  CHECK(jobs["jobs"][0]["runs"][0]["steps"][1]["status"] == "skipped");
  CHECK(jobs["jobs"][0]["runs"][0]["snapshot"].is_null());  // none was taken
  CHECK(jobs["jobs"][0]["runs"][0]["error"].get<std::string>().find(s.image) != std::string::npos);
  CHECK(nlohmann::json::parse(s.repo.Ok({"snapshots", "--json"}).out).size() == 1);
}

TEST_CASE("run: every failed replica is counted in the run's one error line", "[jobs]") {
  JobSetup s;
  s.Write("replicate_to = [\"/nonexistent/a.img\", \"/nonexistent/b.img\", \"" +
          s.dir / "standby.img" + "\"]\n");
  WriteNoiseImage(s.image, 1, 2);
  const RunResult r = s.Wb({"run", "disk"});
  INFO(r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("/nonexistent/a.img") != std::string::npos);
  CHECK(r.err.find("(and 1 more of 3 replicas failed)") != std::string::npos);
  CHECK(SameFile(s.dir / "standby.img", s.image));  // the good one was still written
  const nlohmann::json jobs = s.Json({"jobs"});
  CHECK(jobs["jobs"][0]["runs"][0]["error"].get<std::string>().find("1 more of 3") !=
        std::string::npos);
}

TEST_CASE("run: the forget step warns when it forgets the snapshot a replica holds", "[jobs]") {
  JobSetup s;
  const std::string standby = s.dir / "standby.img";
  s.Write("keep_last = 1\nreplicate_to = [\"" + standby + "\"]\n");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});  // the replica holds snapshot 1
  // The next night the replica cannot be written (its directory is gone), so it stays at 1,
  // which keep_last = 1 then forgets.
  const std::string moved = s.dir / "standby.moved";
  REQUIRE(std::rename(standby.c_str(), moved.c_str()) == 0);
  REQUIRE(::mkdir(standby.c_str(), 0700) == 0);
  WriteNoiseImage(s.image, 2, 2);
  const RunResult r = s.Wb({"run", "disk"});
  INFO(r.err);
  CHECK(r.exit_code != 0);  // the replicate step failed
  CHECK(r.err.find("holds snapshot 1, which is forgotten") != std::string::npos);
}

TEST_CASE(
    "run: a replica dropped with replicas --forget is refused naming replicate --force, and the "
    "run that took its snapshot exits 1, not 2",
    "[jobs]") {
  JobSetup s;
  const std::string standby = s.dir / "standby.img";
  s.Write("replicate_to = [\"" + standby + "\"]\n");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});
  s.repo.Ok({"replicas", "--forget", "1"});
  WriteNoiseImage(s.image, 2, 2);
  const RunResult r = s.Wb({"run", "disk"});
  INFO(r.err);
  // Exit status 2 says "nothing was changed", and snapshot 2 was taken (round 9, Z3).
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("'wanbackup replicate SNAPSHOT --repo " + s.repo.path() + " --to " + standby +
                   " --force' makes it one, for a job's replicate_to too") != std::string::npos);
  CHECK(s.repo.Wb({"restore", "2", "--to", s.dir / "two.img"}).exit_code == 0);
  CHECK(SameFile(s.dir / "two.img", s.image));
  // As the message says: once made a replica again, the job writes it.
  s.repo.Ok({"replicate", "latest", "--to", standby, "--force"});
  WriteNoiseImage(s.image, 3, 2);
  s.Json({"run", "disk"});
  CHECK(SameFile(standby, s.image));
}

TEST_CASE(
    "run: a snapshot taken by hand whose catalog row a storage writer gave the job's name is not "
    "forgotten: the run stops before forget and prune",
    "[jobs]") {
  JobSetup s;
  s.Write("keep_last = 1\nprune_interval = \"always\"\n");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});                                      // 1
  s.repo.Ok({"snapshot", s.image, "--tag", "before-upgrade"});  // 2, by hand
  Sql(s.repo.catalog(), "UPDATE snapshots SET job = 'disk', tag = '' WHERE id = 2");
  WriteNoiseImage(s.image, 2, 2);
  const RunResult r = s.Wb({"run", "disk"});  // 3
  INFO(r.err);
  // Before: the forget step dropped 2 as the job's own, and prune freed it (round 10, AA1).
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("snapshot 2: the catalog disagrees with the snapshot's sealed record") !=
        std::string::npos);
  s.repo.Ok({"repair", "catalog"});
  const auto listed = nlohmann::json::parse(s.repo.Ok({"snapshots", "--json"}).out);
  REQUIRE(listed.size() == 3);
  CHECK(listed[1]["tag"] == "before-upgrade");
}

TEST_CASE("jobs: a repository that is not there is named as such", "[jobs]") {
  JobSetup s;
  s.Write("");
  std::string text;
  {
    std::ifstream in(s.config);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string gone = s.dir / "gone";
  text.replace(text.find(s.repo.path()), s.repo.path().size(), gone);
  std::ofstream(s.config) << text;
  const RunResult r = s.Wb({"jobs"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("history    no repository at " + gone) != std::string::npos);
}

TEST_CASE("run: a bad config is one line naming file, line and key: exit 2, nothing run",
          "[jobs]") {
  JobSetup s;
  s.Write("kep_last = 3\n");
  const auto before = TreeContents(s.repo.path());
  const RunResult r = s.Wb({"run", "disk"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "wanbackup: error: " + s.config +
                     ":8: jobs.disk.kep_last: unknown key (did you mean 'keep_last'?)\n");
  CHECK(TreeContents(s.repo.path()) == before);
  s.Write("");
  CHECK(s.Wb({"run", "nosuchjob"}).err.find("no job 'nosuchjob'") != std::string::npos);
  REQUIRE(::chmod(s.config.c_str(), 0644) == 0);
  const RunResult loose = s.Wb({"jobs"});
  CHECK(loose.exit_code == 2);
  CHECK(loose.err.find(s.config + ": readable by others (mode 0644)") != std::string::npos);
}

TEST_CASE("schedule: systemd units from conf/ with the job's schedule, or a crontab line",
          "[jobs]") {
  JobSetup s;
  s.Write("schedule = \"Mon..Fri 22:00\"\nrandomized_delay = \"5m\"\n");
  const RunResult units = s.Wb({"schedule", "disk"});
  CHECK(units.exit_code == 0);
  CHECK(units.out.find("ExecStart=" + std::string(WB_WANBACKUP_BIN) + " run %i\n") !=
        std::string::npos);
  // The config file is the job's own drop-in, not the template every job shares.
  CHECK(units.out.find("/wanbackup@disk.service.d/config.conf\n") != std::string::npos);
  CHECK(units.out.find("[Service]\nEnvironment=\"WANBACKUP_CONFIG=" + s.config + "\"\n") !=
        std::string::npos);
  CHECK(units.out.find("OnCalendar=\nOnCalendar=Mon..Fri 22:00\nRandomizedDelaySec=5m\n") !=
        std::string::npos);
  const RunResult cron = s.Wb({"schedule", "disk", "--cron"});
  CHECK(cron.exit_code == 0);
  CHECK(cron.out.find("\n0 22 * * 1,2,3,4,5 root " + std::string(WB_WANBACKUP_BIN) +
                      " run disk --config " + s.config + " --quiet\n") != std::string::npos);
  // --install next to a job installed by an older wanbackup (its config file was in the shared
  // template, now rewritten): that job is named, with what to run.
  const std::string units_dir = s.dir / "units";
  std::filesystem::create_directories(units_dir + "/wanbackup@old.timer.d");
  const RunResult install = s.Wb({"schedule", "disk", "--install", "--unit-dir", units_dir});
  CHECK(install.exit_code == 0);
  CHECK(install.err.find("job old was installed by an older wanbackup") != std::string::npos);
  CHECK(install.err.find("job disk was") == std::string::npos);
  CHECK(std::filesystem::exists(units_dir + "/wanbackup@disk.service.d/config.conf"));
  s.Write("schedule = \"Sat *-*-1..7 03:00\"\n");
  const RunResult no_cron = s.Wb({"schedule", "disk", "--cron"});
  CHECK(no_cron.exit_code != 0);
  CHECK(no_cron.err.find("use the systemd timer") != std::string::npos);
}

// Runs `sql` on the repository's catalog as another program would.
void CatalogSql(const RepoCli& repo, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(repo.catalog().c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err != nullptr ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

TEST_CASE("run: a job's forget step forgets only its own snapshots of its source", "[jobs]") {
  JobSetup s;
  // Two jobs of one disk, neither with a tag: keep_last = 1 of each.
  s.Write("keep_last = 1\n\n[jobs.monthly]\nrepository = \"main\"\nsource = \"" + s.image +
          "\"\nkeep_last = 1\n");
  WriteNoiseImage(s.image, 1, 2);
  s.repo.Ok({"snapshot", s.image});                     // 1: by hand
  s.Json({"run", "monthly"});                           // 2
  s.Json({"run", "disk"});                              // 3
  const nlohmann::json last = s.Json({"run", "disk"});  // 4
  CHECK(last["steps"][2]["forgotten"] == nlohmann::json::array({3}));
  std::set<int64_t> ids;
  for (const auto& snap : nlohmann::json::parse(s.repo.Ok({"snapshots", "--json"}).out))
    ids.insert(snap["id"].get<int64_t>());
  CHECK(ids == std::set<int64_t>{1, 2, 4});
  // The job is sealed with the snapshot: forget --group-by job sees it.
  const nlohmann::json by_job = nlohmann::json::parse(
      s.repo.Ok({"forget", "--keep-last", "1", "--group-by", "job", "--dry-run", "--json"}).out);
  REQUIRE(by_job["sources"].size() == 3);
  CHECK(by_job["sources"][0]["job"].get<std::string>().empty());
  CHECK(by_job["sources"][1]["job"] == "disk");
  CHECK(by_job["sources"][2]["job"] == "monthly");
}

TEST_CASE("run and jobs: a one-off schedule that has passed warns for its job, stops no other",
          "[jobs]") {
  JobSetup s;
  s.Write("\n[jobs.once]\nrepository = \"main\"\nsource = \"" + s.image +
          "\"\nschedule = \"2001-01-01 00:00\"\n");
  WriteNoiseImage(s.image, 1, 2);
  const RunResult run = s.Wb({"run", "disk"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("never elapses") == std::string::npos);  // not this job's business
  const nlohmann::json jobs = s.Json({"jobs"});
  REQUIRE(jobs["jobs"].size() == 2);
  CHECK(jobs["jobs"][0]["job"] == "disk");
  CHECK(jobs["jobs"][0]["warnings"].empty());
  REQUIRE(jobs["jobs"][1]["warnings"].size() == 1);
  CHECK(jobs["jobs"][1]["warnings"][0].get<std::string>().find(
            "jobs.once.schedule: '2001-01-01 00:00' never elapses from now on") !=
        std::string::npos);
  const RunResult once = s.Wb({"run", "once"});  // by hand it still runs, with the warning
  CHECK(once.exit_code == 0);
  CHECK(once.err.find("never elapses") != std::string::npos);
}

TEST_CASE("run: a failed replicate step does not hide a later verify failure", "[jobs]") {
  JobSetup s;
  s.Write("verify_share = 1\nreplicate_to = [\"/nonexistent/standby.img\"]\n");
  WriteNoiseImage(s.image, 1, 2);
  CHECK(s.Wb({"run", "disk"}).exit_code != 0);  // the replica's directory is missing
  std::string pack;
  for (const auto& e : std::filesystem::recursive_directory_iterator(s.repo.path() + "/packs")) {
    if (e.is_regular_file()) pack = e.path();
  }
  REQUIRE(!pack.empty());
  Scribble(pack, 4096, "damage");
  const RunResult r = s.Wb({"run", "disk", "--json"});
  INFO(r.err);
  const nlohmann::json out = nlohmann::json::parse(r.out);
  CHECK(out["steps"][1]["status"] == "failed");
  CHECK(out["steps"][4]["step"] == "verify");
  CHECK(out["steps"][4]["status"] == "failed");
  CHECK(out["error"].get<std::string>().find("replicate") != std::string::npos);
  CHECK(out["error"].get<std::string>().find("verify found") != std::string::npos);
  CHECK(r.exit_code == 3);  // damage outranks a replica that could not be written
  const nlohmann::json jobs = s.Json({"jobs"});
  CHECK(jobs["jobs"][0]["runs"][0]["error"].get<std::string>().find("verify found") !=
        std::string::npos);
}

TEST_CASE("jobs: a run whose pid now belongs to another process is not running", "[jobs]") {
  JobSetup s;
  s.Write("");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});
  // As a run killed with SIGKILL leaves its row, with a pid that is alive again (ours) but
  // whose process started at another time.
  CatalogSql(s.repo, "UPDATE job_runs SET status = 'running', finished = 0, pid = " +
                         std::to_string(::getpid()) + ", pid_started = 1");
  const nlohmann::json jobs = s.Json({"jobs"});
  CHECK(jobs["jobs"][0]["state"] == "interrupted");
}

TEST_CASE("jobs: a run that recorded a failed step before it died shows as failed", "[jobs]") {
  JobSetup s;
  s.Write("");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});
  // A run that could not write its last row (disk full): its steps say how it went.
  CatalogSql(s.repo,
             "UPDATE job_runs SET status = 'running', finished = 0, pid = 2147483646, steps = "
             "'[{\"step\":\"snapshot\",\"status\":\"failed\",\"seconds\":1,\"summary\":"
             "\"No space left on device\"}]'");
  const nlohmann::json jobs = s.Json({"jobs"});
  CHECK(jobs["jobs"][0]["state"] == "failed");
  CHECK(jobs["jobs"][0]["runs"][0]["error"].get<std::string>().find("No space left") !=
        std::string::npos);
}

TEST_CASE("run, jobs: a mount's reader lock skips forget and prune, and the jobs table says so",
          "[jobs]") {
  JobSetup s;
  s.Write("keep_last = 1\nprune_interval = \"always\"\n");
  WriteNoiseImage(s.image, 1, 2);
  s.Json({"run", "disk"});
  // A reader, as a mount holds it: the shared lock and its line in readers/.
  const int shared = ::open((s.repo.path() + "/lock.shared").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(::flock(shared, LOCK_SH) == 0);
  const std::string line = "wanbackup pid 777 on host running 'mount /mnt/b' since 2026-01-01\n";
  const int mine =
      ::open((s.repo.path() + "/readers/777-1.reader").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(::flock(mine, LOCK_EX) == 0);
  REQUIRE(::pwrite(mine, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()));
  WriteNoiseImage(s.image, 2, 2);
  const RunResult run = s.Wb({"run", "disk"});
  ::close(mine);
  ::close(shared);
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("running 'mount /mnt/b'") != std::string::npos);
  const RunResult jobs = s.Wb({"jobs"});
  INFO(jobs.out);
  CHECK(jobs.out.find("forget, prune skipped: a reader held the repository") != std::string::npos);
}

TEST_CASE("run: a run that gives up on the lock is in the history, even while the catalog is busy",
          "[jobs]") {
  JobSetup s;
  s.Write("lock_wait = \"1s\"\n");
  WriteNoiseImage(s.image, 1, 2);
  // Another process holds the repository alone, in the middle of a catalog transaction.
  const int fd = ::open((s.repo.path() + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(s.repo.catalog().c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  const RunResult r = s.Wb({"run", "disk"});
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  ::close(fd);
  INFO(r.err);
  CHECK(r.exit_code == 7);
  const nlohmann::json jobs = s.Json({"jobs"});
  REQUIRE(jobs["jobs"][0]["runs"].size() == 1);
  CHECK(jobs["jobs"][0]["runs"][0]["status"] == "failed");
  CHECK(jobs["jobs"][0]["runs"][0]["error"].get<std::string>().find("gave up after 1s") !=
        std::string::npos);
}

TEST_CASE("schedule: paths with spaces and % are quoted for systemd and for cron", "[jobs]") {
  JobSetup s;
  s.Write("schedule = \"*-*-* 01:30\"\n");
  const std::string odd = s.dir / "my 100% dir";
  std::filesystem::create_directories(odd);
  const std::string config = odd + "/wan backup.toml";
  std::filesystem::copy_file(s.config, config);
  REQUIRE(::chmod(config.c_str(), 0600) == 0);
  const std::string binary = odd + "/wanbackup";
  std::filesystem::copy_file(WB_WANBACKUP_BIN, binary);
  REQUIRE(::chmod(binary.c_str(), 0755) == 0);
  RunOptions options = WithPass();
  const RunResult units = Run({binary, "schedule", "disk", "--config", config}, options);
  INFO(units.err);
  REQUIRE(units.exit_code == 0);
  std::string escaped = odd;
  escaped.replace(escaped.find('%'), 1, "%%");
  CHECK(units.out.find("ExecStart=\"" + escaped + "/wanbackup\" run %i\n") != std::string::npos);
  CHECK(units.out.find("Environment=\"WANBACKUP_CONFIG=" + escaped + "/wan backup.toml\"\n") !=
        std::string::npos);
  const RunResult cron = Run({binary, "schedule", "disk", "--config", config, "--cron"}, options);
  REQUIRE(cron.exit_code == 0);
  std::string cron_odd = odd;
  cron_odd.replace(cron_odd.find('%'), 1, "\\%");
  CHECK(cron.out.find("\n30 1 * * * root '" + cron_odd + "/wanbackup' run disk --config '" +
                      cron_odd + "/wan backup.toml' --quiet\n") != std::string::npos);
}

TEST_CASE("run --dry-run: refuses what the run would refuse", "[jobs]") {
  JobSetup s;
  WriteNoiseImage(s.image, 1, 2);
  s.Write("limit_rate = \"1K\"\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "disk", "--dry-run"}, {"run", "disk"}}) {
    const RunResult r = s.Wb(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("jobs.disk.limit_rate: must be at least 4K per second") != std::string::npos);
  }
  s.Write("\n[metrics]\ntextfile = \"" + s.dir / "missing/wanbackup.prom" + "\"\n");
  const RunResult metrics = s.Wb({"run", "disk", "--dry-run"});
  INFO(metrics.err);
  CHECK(metrics.exit_code == 2);
  CHECK(metrics.err.find("textfile: " + s.dir / "missing" + " does not exist") !=
        std::string::npos);
}

TEST_CASE(
    "run: a repository_id pin refuses a repository swapped in at the path: exit 3, nothing "
    "written",
    "[jobs]") {
  JobSetup s;
  WriteNoiseImage(s.image, 1, 2);
  const std::string pinned =
      nlohmann::json::parse(std::ifstream(s.repo.path() + "/config.json"))["repository_id"];
  const auto write = [&] {
    std::ofstream(s.config) << "[repositories.main]\npath = \"" << s.repo.path()
                            << "\"\nkey_file = \"" << s.repo.key() << "\"\nrepository_id = \""
                            << pinned << "\"\n\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                            << s.image << "\"\n";
    REQUIRE(::chmod(s.config.c_str(), 0600) == 0);
  };
  write();
  CHECK(s.Json({"run", "disk"})["status"] == "ok");  // the pinned repository itself: runs

  // Another repository at the same path, with the same key file (a restore of the wrong
  // backup disk, a mount of another repository's volume): this client's anchor takes a
  // repository that init made here, the pin does not.
  std::filesystem::remove_all(s.repo.path());
  s.repo.Ok({"init", "--key-file", s.repo.key(), "--chunk-size", "64K"});
  const std::string found =
      nlohmann::json::parse(std::ifstream(s.repo.path() + "/config.json"))["repository_id"];
  REQUIRE(found != pinned);
  const auto before = TreeContents(s.repo.path());
  for (const bool dry_run : {false, true}) {
    INFO((dry_run ? "run --dry-run" : "run"));
    const RunResult r = dry_run ? s.Wb({"run", "disk", "--dry-run"}) : s.Wb({"run", "disk"});
    CHECK(r.exit_code == 3);
    std::string says = "has id " + found;
    says += ", but the config file pins repository_id " + pinned;
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(TreeContents(s.repo.path()) == before);  // not even the job history
}

TEST_CASE("run: an unencrypted repository needs insecure_no_encryption in the config", "[jobs]") {
  TempDir dir("jobs-plain");
  RepoCli repo(dir);
  const std::map<std::string, std::string> none = {{"WANBACKUP_KEY_FILE", ""}};
  repo.Ok({"init", "--insecure-no-encryption", "--chunk-size", "64K"}, "", none);
  WriteNoiseImage(dir / "disk.img", 1, 2);
  const std::string config = dir / "wanbackup.toml";
  const auto write = [&](const std::string& repo_keys) {
    std::ofstream(config) << "[repositories.main]\npath = \"" << repo.path() << "\"\n"
                          << repo_keys << "\n[jobs.disk]\nrepository = \"main\"\nsource = \""
                          << (dir / "disk.img") << "\"\n";
    REQUIRE(::chmod(config.c_str(), 0600) == 0);
  };
  write("");
  const auto before = TreeContents(repo.path());
  const RunResult refused = repo.Wb({"run", "disk", "--config", config}, "", none);
  INFO(refused.err);
  CHECK(refused.exit_code == 3);
  CHECK(refused.err.find("is not encrypted") != std::string::npos);
  CHECK(refused.err.find("insecure_no_encryption = true in [repositories.main]") !=
        std::string::npos);
  CHECK(TreeContents(repo.path()) == before);

  write("insecure_no_encryption = true\n");
  const RunResult ran = repo.Wb({"run", "disk", "--config", config}, "", none);
  INFO(ran.err);
  CHECK(ran.exit_code == 0);
  CHECK(ran.err.find("NOT encrypted") != std::string::npos);  // and it still warns
  repo.Ok({"restore", "latest", "--to", dir / "back.img", "--insecure-no-encryption"}, "", none);
  CHECK(SameFile(dir / "back.img", dir / "disk.img"));
}

}  // namespace
}  // namespace wanbackup::testing
