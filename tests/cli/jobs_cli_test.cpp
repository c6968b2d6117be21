// `wanbackup run`, `jobs` and `schedule` on local images (no target): the steps of a job, its
// history, the dry run, and bad configs. The WAN and the generated units: integration/jobs_test.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace wanbackup::testing
