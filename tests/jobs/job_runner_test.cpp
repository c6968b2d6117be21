// The job runner (jobs/job_runner.h) with real parts and no command line: a local repository, a
// local file as the source, the job's steps in order, the history row and the metrics textfile.
// The environment here opens the repository with its passphrase and snapshots the file, as the
// CLI's does without the console, the trust anchor and iSCSI.
#include "jobs/job_runner.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "pipeline/file_source.h"
#include "pipeline/snapshotter.h"
#include "repository/repository.h"
#include "support/temp_dir.h"

namespace {

using namespace wanbackup;

constexpr const char kPassphrase[] = "job runner test";

// A repository opened with the passphrase, a snapshot of the local file the job names; lines for
// people are kept for the test to read.
class LocalEnvironment final : public jobs::JobEnvironment {
 public:
  explicit LocalEnvironment(const jobs::JobConfig& job, std::string repo_path)
      : job_(job), repo_path_(std::move(repo_path)) {}

  Status CheckRepositoryBeforeUse() override { return Status::Ok(); }
  Result<std::unique_ptr<pipeline::Repository>> OpenRepository(pipeline::OpenMode mode) override {
    pipeline::Credentials c;
    c.passphrase = Secret(kPassphrase);
    opened.push_back(mode);
    return pipeline::Repository::Open(repo_path_, c, mode);
  }
  Result<pipeline::SnapshotResult> Snapshot(pipeline::Repository& repo) override {
    WB_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::FileSource> source,
                        pipeline::FileSource::Open(job_.source, 1));
    pipeline::SnapshotOptions options;
    options.source_name = job_.source;
    options.tag = job_.tag;
    options.job = job_.name;
    options.workers = 1;
    return pipeline::TakeSnapshot(repo, *source, options);
  }
  Result<jobs::ReplicaUpdate> Replicate(pipeline::Repository&, const catalog::SnapshotInfo&,
                                        const std::string& to) override {
    return Status::Unavailable("no replica in this test: " + to);
  }
  void WarnReplicasLosingBase(pipeline::Repository&, const std::vector<int64_t>&) override {}
  Status CheckTuning() override { return Status::Ok(); }
  Status CheckReplicaTarget(pipeline::Repository&, const std::string&) override {
    return Status::Ok();
  }
  void Info(const std::string& line) override { lines.push_back("info: " + line); }
  void Warning(const std::string& line) override { lines.push_back("warning: " + line); }

  std::vector<pipeline::OpenMode> opened;
  std::vector<std::string> lines;

 private:
  const jobs::JobConfig& job_;
  const std::string repo_path_;
};

struct JobFixture {
  testing::TempDir tmp{"job-runner"};
  jobs::Config config;
  jobs::JobConfig* job = nullptr;

  JobFixture() {
    pipeline::InitOptions o;
    o.chunk_size = 64 << 10;
    o.credentials.passphrase = Secret(kPassphrase);
    o.kdf.opslimit = 1;
    o.kdf.memlimit = 8 << 20;
    REQUIRE(pipeline::Repository::Init(tmp / "repo", o).ok());
    std::ofstream(tmp / "disk.img", std::ios::binary) << std::string(300 * 1024, 'x');
    config.path = tmp / "wanbackup.toml";
    config.repositories["main"].name = "main";
    config.repositories["main"].path = tmp / "repo";
    jobs::JobConfig& j = config.jobs["nightly"];
    j.name = "nightly";
    j.repository = "main";
    j.source = tmp / "disk.img";
    j.lock_wait = "0";
    j.retention.keep_last = 1;
    j.prune_interval = "always";
    j.verify_share = 1;
    job = &j;
  }
};

std::vector<std::string> StepStatuses(const jobs::JobOutcome& out) {
  std::vector<std::string> v;
  for (const jobs::StepOutcome& s : out.steps)
    v.push_back(s.step + ":" + s.status);
  return v;
}

}  // namespace

TEST_CASE("job runner: a job snapshots, forgets by its rules, prunes and verifies, in that order",
          "[jobs]") {
  JobFixture f;
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  REQUIRE(jobs::RunJob(f.config, *f.job, env).status.ok());
  const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
  INFO(out.status.ToString());
  REQUIRE(out.status.ok());
  CHECK(StepStatuses(out) == std::vector<std::string>{"snapshot:ok", "replicate:skipped",
                                                      "forget:ok", "prune:ok", "verify:ok"});
  CHECK(out.steps[2].summary.find("forgot 1: 1") != std::string::npos);  // keep_last = 1
  // The repository's locks, step by step: writer, exclusive for forget and prune, then shared.
  CHECK(env.opened.back() == pipeline::OpenMode::kRead);
  CHECK(out.run.status == "ok");
  CHECK(out.run.snapshot_id == 2);
  CHECK(out.run.id != 0);
}

TEST_CASE("job runner: the history holds each run with its steps, newest first", "[jobs]") {
  JobFixture f;
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
  REQUIRE(out.status.ok());
  auto runs = jobs::JobHistory(f.config.repositories["main"], "nightly", 10, env);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK(runs->front().id == out.run.id);
  CHECK(runs->front().status == "ok");
  CHECK(runs->front().steps.find("\"step\":\"verify\"") != std::string::npos);
}

TEST_CASE("job runner: a snapshot that fails stops the run and is recorded as failed", "[jobs]") {
  JobFixture f;
  f.job->source = f.tmp / "missing.img";
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
  CHECK_FALSE(out.status.ok());
  CHECK(out.status.message().find("job nightly, snapshot") != std::string::npos);
  CHECK(StepStatuses(out) == std::vector<std::string>{"snapshot:failed", "replicate:skipped",
                                                      "forget:skipped", "prune:skipped",
                                                      "verify:skipped"});
  CHECK(out.run.status == "failed");
  auto runs = jobs::JobHistory(f.config.repositories["main"], "nightly", 10, env);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK(runs->front().status == "failed");
}

TEST_CASE("job runner: a failed replica is reported and the steps after it still run", "[jobs]") {
  JobFixture f;
  f.job->replicate_to = {f.tmp / "standby.img"};
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
  CHECK(out.status.code() == StatusCode::kUnavailable);
  CHECK(StepStatuses(out) == std::vector<std::string>{"snapshot:ok", "replicate:failed",
                                                      "forget:ok", "prune:ok", "verify:ok"});
  CHECK(std::find(env.lines.begin(), env.lines.end(),
                  "warning: run nightly: replicate failed; going on") != env.lines.end());
}

TEST_CASE("job runner: the metrics textfile has the run's lines", "[jobs]") {
  JobFixture f;
  f.config.metrics_textfile = f.tmp / "wanbackup.prom";
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  REQUIRE(jobs::RunJob(f.config, *f.job, env).status.ok());
  std::ifstream in(f.config.metrics_textfile);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  CHECK(text.find("job=\"nightly\"") != std::string::npos);
}

TEST_CASE("job runner: a dry run plans every step and changes nothing", "[jobs]") {
  JobFixture f;
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  auto plan = jobs::PlanJob(f.config, *f.job, env);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 5);
  CHECK(plan->at(0).rfind("snapshot " + f.job->source, 0) == 0);
  CHECK(plan->at(3) == "prune: due (max_unused 5%)");
  auto runs = jobs::JobHistory(f.config.repositories["main"], "nightly", 10, env);
  REQUIRE(runs.ok());
  CHECK(runs->empty());
}

TEST_CASE(
    "job runner: while a reader holds the repository, forget and prune are skipped naming it, "
    "and the run is ok",
    "[jobs]") {
  JobFixture f;
  LocalEnvironment env(*f.job, f.config.repositories["main"].path);
  REQUIRE(jobs::RunJob(f.config, *f.job, env).status.ok());
  {
    pipeline::Credentials c;
    c.passphrase = Secret(kPassphrase);
    pipeline::LockOptions lock;
    lock.command = "mount";
    auto reader = pipeline::Repository::Open(f.config.repositories["main"].path, c,
                                             pipeline::OpenMode::kRead, lock);
    REQUIRE(reader.ok());
    const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
    INFO(out.status.ToString());
    REQUIRE(out.status.ok());
    CHECK(StepStatuses(out) == std::vector<std::string>{"snapshot:ok", "replicate:skipped",
                                                        "forget:skipped", "prune:skipped",
                                                        "verify:ok"});
    CHECK(out.steps[2].summary.find("running 'mount'") != std::string::npos);
    CHECK(out.steps[3].summary.find("prune runs when no reader holds it") != std::string::npos);
  }
  // The reader gone, the next run catches up: keep_last = 1 forgets both earlier snapshots.
  const jobs::JobOutcome out = jobs::RunJob(f.config, *f.job, env);
  REQUIRE(out.status.ok());
  CHECK(StepStatuses(out) == std::vector<std::string>{"snapshot:ok", "replicate:skipped",
                                                      "forget:ok", "prune:ok", "verify:ok"});
  CHECK(out.steps[2].summary.find("forgot 2: 1, 2") != std::string::npos);
}
