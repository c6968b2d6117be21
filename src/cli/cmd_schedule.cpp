// wanbackup schedule JOB: the systemd units (or the crontab line) that run a job on its
// schedule; with --install, writes them and enables the timer.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <climits>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/units.h"
#include "cli/write_target.h"
#include "common/atomic_file.h"
#include "common/safe_path.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "guard/identity.h"
#include "guard/write_guard.h"
#include "jobs/calendar.h"
#include "jobs/config.h"

namespace wanbackup::cli {
namespace {

constexpr const char kDefaultUnitDir[] = "/etc/systemd/system";
constexpr const char kShippedBinary[] = "/usr/local/bin/wanbackup";
constexpr const char kDefaultConfigNote[] = "$WANBACKUP_CONFIG or /etc/wanbackup/wanbackup.toml";

struct ScheduleCommandOptions {
  std::string job;
  std::string config;
  bool install = false;
  bool cron = false;
  std::string unit_dir = kDefaultUnitDir;
};

struct UnitFile {
  std::string path;  // under the unit directory
  std::string text;
};

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

std::string SelfBinary() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : kShippedBinary;
}

// The crontab line's command: sh words, and every '%' escaped (cron turns a bare one into a
// newline and feeds the rest to the command's stdin).
std::string CronCommand(const std::string& job, const std::string& config) {
  const std::string line =
      ShellWord(SelfBinary()) + " run " + ShellWord(job) + " --config " + ShellWord(config);
  std::string out;
  for (const char c : line)
    out += c == '%' ? std::string("\\%") : std::string(1, c);
  return out;
}

// One word of an ExecStart= line, by systemd's rules: '%' is a specifier and '$' a variable
// (doubled to mean themselves); a word with a blank, a quote or a backslash goes in double
// quotes with '"' and '\' escaped.
std::string ExecWord(const std::string& word) {
  const bool quote = word.empty() || std::any_of(word.begin(), word.end(), [](char c) {
                       return std::isspace(static_cast<unsigned char>(c)) || c == '"' ||
                              c == '\'' || c == '\\' || c == ';';
                     });
  std::string out = quote ? "\"" : "";
  for (const char c : word) {
    if (c == '%' || c == '$') out += c;
    if (quote && (c == '"' || c == '\\')) out += '\\';
    out += c;
  }
  return quote ? out + "\"" : out;
}

// A value for a systemd unit's Environment= line: quoted, with systemd's specifier and escape
// characters escaped.
std::string UnitQuoted(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '%') out += '%';
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The service is a template every job shares; what is one job's (its config file, its schedule)
// goes into that job's drop-ins, so installing a job from another config file changes no other.
std::vector<UnitFile> Units(const jobs::JobConfig& job, const std::string& config) {
  const std::string service = Replace(kServiceTemplate, std::string("ExecStart=") + kShippedBinary,
                                      "ExecStart=" + ExecWord(SelfBinary()));
  const std::string config_dropin =
      "# wanbackup schedule " + job.name + ": the config file job " + job.name +
      " is read from.\n[Service]\nEnvironment=" + UnitQuoted("WANBACKUP_CONFIG=" + config) + "\n";
  std::string dropin = "# wanbackup schedule " + job.name +
                       ": the job's `schedule` and `randomized_delay`\n"
                       "# from " +
                       config + ". Change them there and run `wanbackup schedule " + job.name +
                       " --install` again.\n[Timer]\nOnCalendar=\n";
  dropin += "OnCalendar=" + (job.schedule.empty() ? std::string("daily") : job.schedule) + "\n";
  dropin += "RandomizedDelaySec=" + job.randomized_delay + "\n";
  return {{"wanbackup@.service", service},
          {"wanbackup@" + job.name + ".service.d/config.conf", config_dropin},
          {"wanbackup@.timer", kTimerTemplate},
          {"wanbackup@" + job.name + ".timer.d/schedule.conf", dropin}};
}

// The unit directory, open: reached without following a link another user planted, owned by
// root or us, writable by nobody else (sticky or not: systemd runs what is there as root), and
// no repository's directory. InvalidArgument (exit 2) naming the rule.
Result<ResolvedPath> OpenUnitDir(const std::string& dir) {
  // Created when missing, as before (mkdir follows no link at the last component).
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "creating " + dir);
  }
  WB_ASSIGN_OR_RETURN(ResolvedPath where, ResolveForWriting(dir + "/wanbackup@.service",
                                                            PathPolicy::kTrusted, LastLink::kKeep));
  struct stat st {};
  if (::fstat(where.dir.get(), &st) != 0) return Status::FromErrno(errno, dir);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::InvalidArgument(where.dir_path +
                                   ": writable by group or others; systemd runs "
                                   "the units there as root: chmod go-w " +
                                   where.dir_path + ". Nothing was written");
  }
  guard::Destination as_target;
  as_target.name = "--unit-dir " + dir;
  as_target.identity = guard::Identify(dir);
  std::vector<guard::Protected> protect;
  guard::AddRepositoriesHolding(as_target.identity, &protect);
  WB_RETURN_IF_ERROR(guard::CheckWriteTarget(as_target, protect));
  return where;
}

// Writes one unit file relative to the open unit directory; a drop-in directory (NAME.d) is
// created there and opened without following a link, so a planted one is refused.
Status WriteUnit(const ResolvedPath& units, const UnitFile& unit) {
  const std::string path = units.dir_path + "/" + unit.path;
  const size_t slash = unit.path.rfind('/');
  if (slash == std::string::npos) {
    WB_RETURN_IF_ERROR(
        WriteFileAtomicallyAt(units.dir.get(), units.dir_path, unit.path, unit.text, 0644));
    PrintInfo("wrote " + path);
    return Status::Ok();
  }
  const std::string sub = unit.path.substr(0, slash);
  const std::string sub_path = units.dir_path + "/" + sub;
  if (::mkdirat(units.dir.get(), sub.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "creating " + sub_path);
  }
  const UniqueFd dropins(
      ::openat(units.dir.get(), sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dropins.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return Status::InvalidArgument(sub_path +
                                     " is a symlink or not a directory: not followed. "
                                     "Nothing was written there");
    }
    return Status::FromErrno(errno, "opening " + sub_path);
  }
  WB_RETURN_IF_ERROR(
      WriteFileAtomicallyAt(dropins.get(), sub_path, unit.path.substr(slash + 1), unit.text, 0644));
  PrintInfo("wrote " + path);
  return Status::Ok();
}

// Runs systemctl with `args` (no shell; nothing secret on its command line).
Status Systemctl(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string program = "systemctl";
  argv.push_back(program.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::string line = "systemctl";
  for (const std::string& a : args)
    line += " " + a;
  return Status::IoError("'" + line + "' failed (exit " +
                         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
}

// Jobs installed by a wanbackup before 2026-11-27 had their config file in the shared template,
// which this install rewrote: each such job (a schedule drop-in without a config drop-in) now
// reads $WANBACKUP_CONFIG or the default, so name them.
void WarnAboutOlderInstalls(const std::string& unit_dir, const std::string& job) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(unit_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string_view prefix = "wanbackup@", suffix = ".timer.d";
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix)) {
      continue;
    }
    const std::string other =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    std::string dropin = unit_dir + "/wanbackup@";
    dropin += other + ".service.d/config.conf";
    if (other == job || std::filesystem::exists(dropin, ec)) {
      continue;
    }
    std::string warning = "job " + other;
    warning += " was installed by an older wanbackup, whose config file was in the shared ";
    warning += "wanbackup@.service; it now reads ";
    warning += kDefaultConfigNote;
    warning += ": run 'wanbackup schedule " + other + " --install --config FILE' again";
    PrintWarning(warning);
  }
}

Status Install(const ScheduleCommandOptions& opts, const jobs::Config& config,
               const std::vector<UnitFile>& units) {
  WB_ASSIGN_OR_RETURN(const ResolvedPath unit_dir, OpenUnitDir(opts.unit_dir));
  // Every unit file through the write guard, as any other file a command writes: never a
  // job's source, a repository's file, the config or a credential file it names, or the trust
  // anchor directory, whatever the unit directory is.
  for (const UnitFile& u : units) {
    WriteTarget target;
    target.to = unit_dir.dir_path + "/" + u.path;
    target.config = &config;
    WB_RETURN_IF_ERROR(RefuseWriteTarget(target));
  }
  for (const UnitFile& u : units) {  // every drop-in directory checked before anything is written
    const size_t slash = u.path.rfind('/');
    struct stat st {};
    if (slash != std::string::npos &&
        ::fstatat(unit_dir.dir.get(), u.path.substr(0, slash).c_str(), &st, AT_SYMLINK_NOFOLLOW) ==
            0 &&
        !S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(unit_dir.dir_path + "/" + u.path.substr(0, slash) +
                                     " is a symlink or not a directory: not followed. Nothing "
                                     "was written");
    }
  }
  for (const UnitFile& u : units)
    WB_RETURN_IF_ERROR(WriteUnit(unit_dir, u));
  WarnAboutOlderInstalls(opts.unit_dir, opts.job);
  const std::string timer = "wanbackup@" + opts.job + ".timer";
  struct stat st {};
  if (opts.unit_dir != kDefaultUnitDir || ::stat("/run/systemd/system", &st) != 0) {
    PrintInfo(
        "systemd is not managing this machine (or --unit-dir is not its directory): "
        "nothing enabled; on the machine that runs the job: systemctl daemon-reload && "
        "systemctl enable --now " +
        timer);
    return Status::Ok();
  }
  WB_RETURN_IF_ERROR(Systemctl({"daemon-reload"}));
  WB_RETURN_IF_ERROR(Systemctl({"enable", "--now", timer}));
  PrintInfo("enabled " + timer + "; 'systemctl list-timers " + timer + "' shows the next run");
  return Status::Ok();
}

Status RunSchedule(const ScheduleCommandOptions& opts) {
  const std::string config_path = Absolute(jobs::ConfigPath(opts.config));
  WB_ASSIGN_OR_RETURN(const jobs::Config config, jobs::LoadConfig(config_path));
  WB_ASSIGN_OR_RETURN(const jobs::JobConfig* job, jobs::FindJob(config, opts.job));
  for (const std::string& warning : job->warnings)
    PrintWarning(warning);
  if (job->schedule.empty()) {
    return Status::InvalidArgument("job '" + job->name + "' has no schedule key in " + config_path +
                                   " (e.g. schedule = \"*-*-* 01:30:00\")");
  }
  if (std::any_of(config_path.begin(), config_path.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return Status::InvalidArgument(
        "the config file's path holds a control character; a unit or "
        "crontab line cannot name it: move the file");
  }
  if (opts.cron) {
    WB_ASSIGN_OR_RETURN(jobs::CalendarSpec spec, jobs::ParseCalendar(job->schedule));
    WB_ASSIGN_OR_RETURN(std::string fields, jobs::CronFields(spec));
    std::printf("# /etc/cron.d/wanbackup-%s: job %s, schedule \"%s\"\n", job->name.c_str(),
                job->name.c_str(), job->schedule.c_str());
    std::printf("%s root %s --quiet\n", fields.c_str(),
                CronCommand(job->name, config_path).c_str());
    return Status::Ok();
  }
  const std::vector<UnitFile> units = Units(*job, config_path);
  if (opts.install) return Install(opts, config, units);
  for (const UnitFile& u : units)
    std::printf("# %s/%s\n%s\n", opts.unit_dir.c_str(), u.path.c_str(), u.text.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterSchedule(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ScheduleCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Print (or --install) the systemd timer or crontab line that runs a job");
  cmd->add_option("job", opts->job, "the job's name ([jobs.NAME] in the config file)")->required();
  cmd->add_option("-c,--config", opts->config,
                  "the config file (default: $WANBACKUP_CONFIG, else "
                  "/etc/wanbackup/wanbackup.toml)");
  cmd->add_flag("--install", opts->install,
                "write the units into --unit-dir and, where systemd runs, enable the timer");
  cmd->add_option("--unit-dir", opts->unit_dir, "where --install writes the units")
      ->capture_default_str();
  cmd->add_flag("--cron", opts->cron, "print a line for /etc/cron.d instead of systemd units")
      ->excludes("--install");
  cmd->footer(
      "\nThe units are the templates in conf/ (wanbackup@.service runs 'wanbackup run %i';\n"
      "wanbackup@.timer is Persistent, with a randomized delay) with this wanbackup's path,\n"
      "shared by every job, plus the job's own drop-ins: wanbackup@JOB.service.d/config.conf\n"
      "naming its config file (WANBACKUP_CONFIG) and wanbackup@JOB.timer.d/schedule.conf\n"
      "holding its schedule (systemd OnCalendar syntax) and randomized_delay. Re-run after\n"
      "changing them. --cron needs a schedule cron can say (whole minutes, no year).\n"
      "\nEXAMPLES:\n"
      "  wanbackup schedule db                  # print the units\n"
      "  wanbackup schedule db --install        # install and enable wanbackup@db.timer\n"
      "  wanbackup schedule db --cron > /etc/cron.d/wanbackup-db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunSchedule(*opts); }; });
}

}  // namespace wanbackup::cli
