// wanbackup jobs: the configured jobs, their last runs, state and next run.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "catalog/catalog.h"
#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/job_run_json.h"
#include "cli/internal/json_text.h"
#include "cli/job_environment.h"
#include "common/text.h"
#include "common/units.h"
#include "jobs/calendar.h"
#include "jobs/config.h"
#include "jobs/job_runner.h"

namespace wanbackup::cli {
namespace {

struct JobsCommandOptions {
  std::string config;
  std::string job;
  int last = 5;
  bool json = false;
};

struct JobView {
  const jobs::JobConfig* job = nullptr;
  int64_t next_run_unix_ms = 0;  // 0: no schedule
  std::vector<catalog::JobRun> runs;
  std::string history_error;
};

int64_t NextRunMs(const jobs::JobConfig& job) {
  if (job.schedule.empty()) return 0;
  Result<jobs::CalendarSpec> spec = jobs::ParseCalendar(job.schedule);
  if (!spec.ok()) return 0;
  const auto next = jobs::NextElapse(*spec, std::chrono::system_clock::now());
  if (!next) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(next->time_since_epoch()).count();
}

std::string State(const JobView& v) {
  return v.runs.empty() ? "never run" : v.runs[0].status;
}

nlohmann::json RunJson(const catalog::JobRun& r) {
  nlohmann::json steps = nlohmann::json::parse(r.steps, nullptr, false);
  if (steps.is_discarded()) steps = nlohmann::json::array();
  nlohmann::json j = internal::JobRunJson(r, std::move(steps));
  j["id"] = r.id;
  j["pid"] = r.pid;
  j["host"] = r.host;
  return j;
}

void PrintJson(const jobs::Config& config, const std::vector<JobView>& views) {
  nlohmann::json list = nlohmann::json::array();
  for (const JobView& v : views) {
    nlohmann::json runs = nlohmann::json::array();
    for (const catalog::JobRun& r : v.runs)
      runs.push_back(RunJson(r));
    list.push_back(
        {{"job", v.job->name},
         {"repository", v.job->repository},
         {"source", v.job->source},
         {"schedule", v.job->schedule},
         {"next_run_unix_ms", v.next_run_unix_ms != 0 ? nlohmann::json(v.next_run_unix_ms)
                                                      : nlohmann::json()},  // null: no schedule
         {"state", State(v)},
         {"warnings", v.job->warnings},
         {"runs", runs},
         {"history_error",
          v.history_error.empty() ? nlohmann::json() : nlohmann::json(v.history_error)}});
  }
  // As the user named it, made absolute: a script may run from another directory.
  std::error_code ec;  // a working directory that is gone: the path as given
  const std::filesystem::path absolute = std::filesystem::absolute(config.path, ec);
  const std::string path = ec ? config.path : absolute.lexically_normal().string();
  OutputJson(nlohmann::json({{"config", path}, {"jobs", list}}), 2);
}

std::string RunLine(const catalog::JobRun& r) {
  const int64_t end = r.finished_unix_ms != 0 ? r.finished_unix_ms : r.started_unix_ms;
  std::string line = "  " + LocalTime(r.started_unix_ms) + "  " + r.status;
  line.resize(std::max<size_t>(line.size(), 36), ' ');
  line += r.finished_unix_ms != 0
              ? FormatDuration(std::chrono::milliseconds(end - r.started_unix_ms))
              : std::string(r.status == "running" ? "(pid " + std::to_string(r.pid) + ")" : "-");
  if (r.snapshot_id != 0) {
    line += "  snapshot " + std::to_string(r.snapshot_id) + ", " + FormatBytes(r.bytes) + " read";
  }
  if (!r.error.empty()) line += "  " + r.error;
  // Housekeeping a reader (a mount) held back: shown, or a forgotten mount stops retention
  // unseen (round 6, W6).
  const nlohmann::json steps = nlohmann::json::parse(r.steps, nullptr, false);
  std::string held_back;
  for (const nlohmann::json& step : steps.is_array() ? steps : nlohmann::json::array()) {
    if (step.is_object() && step.value("status", "") == "skipped" &&
        step.value("summary", "").starts_with("the repository is being read")) {
      held_back += (held_back.empty() ? "" : ", ") + step.value("step", "");
    }
  }
  if (!held_back.empty()) line += "  " + held_back + " skipped: a reader held the repository";
  return line;
}

void PrintText(const std::vector<JobView>& views) {
  for (const JobView& v : views) {
    const jobs::JobConfig& j = *v.job;
    std::printf("%s: %s (repository %s, source %s)\n", j.name.c_str(), State(v).c_str(),
                j.repository.c_str(), EscapeForTerminal(j.source).c_str());
    if (j.schedule.empty()) {
      std::printf("  schedule   none (run by hand, or by a timer you made)\n");
    } else {
      std::printf("  schedule   %s; next run %s (+ up to %s random delay)\n", j.schedule.c_str(),
                  v.next_run_unix_ms != 0 ? LocalTime(v.next_run_unix_ms).c_str() : "never",
                  j.randomized_delay.c_str());
    }
    for (const std::string& warning : j.warnings)
      std::printf("  warning    %s\n", warning.c_str());
    if (!v.history_error.empty()) std::printf("  history    %s\n", v.history_error.c_str());
    for (const catalog::JobRun& r : v.runs)
      std::printf("%s\n", RunLine(r).c_str());
  }
}

Status RunJobs(const JobsCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(const jobs::Config config, jobs::LoadConfig(jobs::ConfigPath(opts.config)));
  std::vector<JobView> views;
  ConsoleReporter console;
  for (const auto& [name, job] : config.jobs) {
    if (!opts.job.empty() && name != opts.job) continue;
    JobView v;
    v.job = &job;
    v.next_run_unix_ms = NextRunMs(job);
    const jobs::RepositoryConfig& repository = config.repositories.at(job.repository);
    UseS3CredentialsOf(repository);
    Result<std::vector<catalog::JobRun>> runs =
        jobs::JobHistory(repository, name, opts.last, console);
    if (runs.ok()) {
      v.runs = *runs;
    } else {
      v.history_error = runs.status().message();
    }
    views.push_back(std::move(v));
  }
  if (!opts.job.empty() && views.empty()) return jobs::FindJob(config, opts.job).status();
  if (opts.json) {
    PrintJson(config, views);
  } else {
    PrintText(views);
  }
  return Status::Ok();
}

}  // namespace

void RegisterJobs(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<JobsCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "jobs", "List the config file's jobs: their last runs, state and next run");
  cmd->add_option("job", opts->job, "only this job");
  cmd->add_option("-c,--config", opts->config,
                  "the config file (default: $WANBACKUP_CONFIG, else "
                  "/etc/wanbackup/wanbackup.toml)");
  cmd->add_option("--last", opts->last, "how many runs to show per job, newest first")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the jobs and their runs as JSON");
  cmd->footer(
      "\nA job's state is its last run's: ok, failed, interrupted (killed, or stopped by a\n"
      "signal), running (with its pid), or 'never run'. A run is running while a process\n"
      "with its pid and start time lives on this host; one that died after a failed step is\n"
      "failed. A schedule that can no longer elapse is a warning of its job. The history\n"
      "lives in each repository's catalog ('repair catalog' starts it afresh) or, for a\n"
      "repository on S3, in this host's cache directory (job-history.db, kept when the\n"
      "catalog cache is rebuilt). It needs no passphrase to read and keeps each job's\n"
      "newest " +
      std::to_string(catalog::Catalog::kJobRunsKept) +
      " finished runs. The next run comes from the job's schedule (local time).\n"
      "\nEXAMPLES:\n"
      "  wanbackup jobs\n"
      "  wanbackup jobs db --last 30 --json");
  cmd->callback([opts, runner] { *runner = [opts] { return RunJobs(*opts); }; });
}

}  // namespace wanbackup::cli
