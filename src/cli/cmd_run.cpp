// wanbackup run JOB: one configured job, start to finish (jobs/job_runner.h), with the CLI's
// environment (cli/job_environment.h).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/internal/job_run_json.h"
#include "cli/internal/json_text.h"
#include "cli/job_environment.h"
#include "jobs/config.h"
#include "jobs/job_runner.h"

namespace wanbackup::cli {
namespace {

struct RunCommandOptions {
  std::string job;
  std::string config;
  bool dry_run = false;
  bool json = false;
};

void PrintOutcome(const jobs::JobOutcome& outcome) {
  nlohmann::json steps = nlohmann::json::array();
  for (const jobs::StepOutcome& s : outcome.steps) {
    nlohmann::json step = nlohmann::json::parse(s.json, nullptr, false);
    if (!step.is_object()) step = nlohmann::json::object();
    step["step"] = s.step;
    step["status"] = s.status;
    step["seconds"] = s.seconds;
    step["summary"] = s.summary;
    steps.push_back(step);
  }
  const catalog::JobRun& r = outcome.run;
  nlohmann::json j = internal::JobRunJson(r, std::move(steps));
  j["job"] = r.job;
  j["run_id"] = r.id;
  j["exit_code"] = static_cast<int>(ExitCodeFor(outcome.status));
  OutputJson(j, 2);
}

Status RunRun(const RunCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(const jobs::Config config, jobs::LoadConfig(jobs::ConfigPath(opts.config)));
  WB_ASSIGN_OR_RETURN(const jobs::JobConfig* job, jobs::FindJob(config, opts.job));
  for (const std::string& warning : job->warnings)
    PrintWarning(warning);
  CliJobEnvironment env(config, *job);
  if (opts.dry_run) {
    WB_ASSIGN_OR_RETURN(std::vector<std::string> plan, jobs::PlanJob(config, *job, env));
    if (opts.json) {
      OutputJson(nlohmann::json({{"job", job->name}, {"dry_run", true}, {"steps", plan}}), 2);
    } else {
      for (const std::string& line : plan)
        std::printf("%s\n", line.c_str());
      PrintInfo("dry run: nothing was changed");
    }
    return Status::Ok();
  }
  const jobs::JobOutcome outcome = jobs::RunJob(config, *job, env);
  if (opts.json) PrintOutcome(outcome);
  return outcome.status;
}

}  // namespace

void RegisterRun(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<RunCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a job from the config file: snapshot, forget, prune, verify");
  cmd->add_option("job", opts->job, "the job's name ([jobs.NAME] in the config file)")->required();
  cmd->add_option("-c,--config", opts->config,
                  "the config file (default: $WANBACKUP_CONFIG, else "
                  "/etc/wanbackup/wanbackup.toml)");
  cmd->add_flag("-n,--dry-run", opts->dry_run,
                "check the config, the repository's credentials and that a local source can be "
                "opened, print what each step would do; change nothing");
  cmd->add_flag("--json", opts->json, "print the run's outcome (every step's figures) as JSON");
  cmd->footer(
      "\nSTEPS, in order; a failed step stops the run and sets the exit status:\n"
      "  snapshot  the job's source into its repository (as 'wanbackup snapshot')\n"
      "  replicate the new snapshot to each replicate_to target (as 'wanbackup replicate';\n"
      "            a failed replica is reported and the other steps still run)\n"
      "  forget    the job's own snapshots of that source its keep_* rules do not keep\n"
      "            (never the new one; not other jobs' nor those taken by hand)\n"
      "  prune     when the last prune is older than prune_interval (default 7d)\n"
      "  verify    verify_share of the repository's chunks (0.1: all of them over 10 runs)\n"
      "Each step prints one line. The run is recorded in the repository's job history\n"
      "('wanbackup jobs'); with [metrics] textfile, also for Prometheus' node_exporter.\n"
      "The config file names the repository and credential files (never secrets); see\n"
      "conf/wanbackup.toml.example and docs/operations.md. 'wanbackup schedule JOB' makes\n"
      "the systemd timer or crontab line that runs the job on its schedule.\n"
      "A repository's path is a directory or s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX]; an S3\n"
      "one takes s3_credentials_file (its keys, mode 0600), cache_dir and upload_memory (as\n"
      "snapshot --upload-memory), and keeps the job history in that cache directory.\n"
      "In [repositories.NAME], repository_id = \"<32 hex digits>\" pins the repository: a run\n"
      "that finds another id at its path stops with exit status 3 before it reads or writes\n"
      "anything; insecure_no_encryption = true uses an unencrypted repository on purpose\n"
      "(without it one is refused with exit status 3, as without --insecure-no-encryption).\n"
      "\nEXAMPLES:\n"
      "  wanbackup run db --dry-run\n"
      "  wanbackup run db --config /etc/wanbackup/wanbackup.toml --json");
  cmd->callback([opts, runner] { *runner = [opts] { return RunRun(*opts); }; });
}

}  // namespace wanbackup::cli
