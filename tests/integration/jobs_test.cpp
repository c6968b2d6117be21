// Scheduled jobs end to end: a job written as conf/wanbackup.toml.example describes it, run by
// the systemd service and the crontab line `wanbackup schedule` generates, snapshots the
// reference target through the emulated WAN, and shows up in `wanbackup jobs`.
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "support/testbed.h"

using wanbackup::testing::Run;
using wanbackup::testing::RunResult;
using wanbackup::testing::TempDir;
using wanbackup::testing::Testbed;

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

RunResult Ok(const RunResult& r) {
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

// The ExecStart= of a service unit, as systemd would run it for instance `instance`.
std::vector<std::string> ExecStart(const std::string& unit, const std::string& instance) {
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ExecStart=", 0) != 0) continue;
    std::vector<std::string> argv = Words(line.substr(10));
    for (std::string& a : argv)
      if (a == "%i") a = instance;
    return argv;
  }
  FAIL("no ExecStart= in the unit");
  return {};
}

// The variables a unit's Environment="K=V" lines set, unquoted as systemd does (\\, \" and %%).
std::map<std::string, std::string> UnitEnvironment(const std::string& unit) {
  std::map<std::string, std::string> env;
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Environment=\"", 0) != 0 || line.back() != '"') continue;
    std::string value;
    for (size_t i = 13; i + 1 < line.size(); ++i) {
      if ((line[i] == '\\' || line[i] == '%') && i + 2 < line.size()) ++i;
      value += line[i];
    }
    const size_t eq = value.find('=');
    if (eq != std::string::npos) env[value.substr(0, eq)] = value.substr(eq + 1);
  }
  return env;
}

// A job through the WAN under sanitizers takes more than the default minute.
wanbackup::testing::RunOptions Long() {
  wanbackup::testing::RunOptions o;
  o.timeout = std::chrono::minutes(5);
  return o;
}

}  // namespace

TEST_CASE("jobs: a job runs from its generated systemd service and crontab line through the WAN",
          "[jobs][integration]") {
  const Testbed& bed = Testbed::Get();
  TempDir dir("jobs");
  const std::string repo = dir / "repo", key = dir / "repo.key", config = dir / "wanbackup.toml";
  Ok(bed.Wanbackup({"init", repo, "--key-file", key}));
  const std::string source = "iscsi://" + bed.Var("PORTAL") + "/" + bed.Var("PLAIN_IQN") + "/1";
  std::ofstream(config) << "[repositories.main]\npath = \"" << repo << "\"\nkey_file = \"" << key
                        << "\"\n\n[jobs.db]\nrepository = \"main\"\nsource = \"" << source
                        << "\"\ntag = \"nightly\"\nschedule = \"*-*-* 01:30:00\"\n"
                        << "keep_last = 2\nprune_interval = \"always\"\nverify_share = 0.5\n\n"
                        << "[metrics]\ntextfile = \"" << dir / "wanbackup.prom"
                        << "\"\n";
  REQUIRE(::chmod(config.c_str(), 0600) == 0);

  // systemd: the units as `schedule --install` writes them; the service run as systemd would.
  Ok(bed.Wanbackup(
      {"schedule", "db", "--config", config, "--install", "--unit-dir", dir / "units"}));
  CHECK(ReadAll(dir / "units/wanbackup@db.timer.d/schedule.conf")
            .find("OnCalendar=*-*-* 01:30:00\n") != std::string::npos);
  CHECK(ReadAll(dir / "units/wanbackup@.timer").find("Persistent=true") != std::string::npos);
  const std::vector<std::string> service =
      ExecStart(ReadAll(dir / "units/wanbackup@.service"), "db");
  REQUIRE(service.size() >= 3);
  CHECK(service[1] == "run");
  // The config file is the job's own drop-in (the template is shared by every job).
  wanbackup::testing::RunOptions as_systemd = Long();
  as_systemd.env = UnitEnvironment(ReadAll(dir / "units/wanbackup@db.service.d/config.conf"));
  CHECK(as_systemd.env["WANBACKUP_CONFIG"] == config);
  Ok(bed.InSiteA(service, as_systemd));

  // cron: the line `schedule --cron` prints, its command run by a shell as cron would.
  const std::string cron_out =
      Ok(bed.Wanbackup({"schedule", "db", "--config", config, "--cron"})).out;
  const std::vector<std::string> cron = Words(cron_out.substr(cron_out.find('\n') + 1));
  REQUIRE(cron.size() > 7);
  CHECK(std::vector<std::string>(cron.begin(), cron.begin() + 6) ==
        std::vector<std::string>{"30", "1", "*", "*", "*", "root"});
  std::string command;
  for (size_t i = 6; i < cron.size(); ++i)
    command += (i > 6 ? " " : "") + cron[i];
  Ok(bed.InSiteA({"sh", "-c", command}, Long()));

  // A third run by hand: keep_last = 2 forgets the first snapshot, prune runs every time.
  const nlohmann::json third = nlohmann::json::parse(
      Ok(bed.Wanbackup({"run", "db", "--config", config, "--json"}, Long())).out);
  CHECK(third["status"] == "ok");
  REQUIRE(third["steps"].size() == 5);
  CHECK(third["steps"][1]["step"] == "replicate");
  CHECK(third["steps"][1]["status"] == "skipped");  // no replicate_to in this job
  CHECK(third["steps"][2]["step"] == "forget");
  CHECK(third["steps"][2]["forgotten"].size() == 1);
  CHECK(third["steps"][3]["status"] == "ok");  // prune
  CHECK(third["steps"][4]["share_of"] == 2);   // verify: half the chunks per run

  const nlohmann::json jobs =
      nlohmann::json::parse(Ok(bed.Wanbackup({"jobs", "--config", config, "--json"})).out);
  REQUIRE(jobs["jobs"].size() == 1);
  const nlohmann::json& db = jobs["jobs"][0];
  CHECK(db["state"] == "ok");
  REQUIRE(db["runs"].size() == 3);
  CHECK(db["runs"][0]["snapshot"] == third["snapshot"]);
  CHECK(db["runs"][2]["bytes"].get<uint64_t>() == std::stoull(bed.Var("LUN1_SIZE")));
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  CHECK(db["next_run_unix_ms"].get<int64_t>() > now);

  // What the job kept restores bit-exact; monitoring sees the success.
  Ok(bed.Wanbackup(
      {"restore", "latest", "--to", dir / "restored.img", "--repo", repo, "--key-file", key}));
  CHECK(Run({"cmp", dir / "restored.img", bed.Var("LUN1_FILE")}).exit_code == 0);
  CHECK(ReadAll(dir / "wanbackup.prom")
            .find("wanbackup_job_last_success_timestamp_seconds{job=\"db\"}") != std::string::npos);
}
