#include "jobs/job_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "initiator/iscsi_url.h"
#include "jobs/metrics_textfile.h"
#include "jobs/source_identity.h"
#include "pipeline/file_source.h"
#include "repository/forget.h"
#include "repository/prune.h"
#include "repository/repo_lock.h"
#include "repository/retention.h"
#include "repository/snapshot_check.h"
#include "repository/verifier.h"

namespace wanbackup::jobs {
namespace {

using Clock = std::chrono::steady_clock;

// JSON as the history records it: paths, IQNs and error messages are bytes, not always UTF-8;
// an invalid byte becomes U+FFFD instead of an exception.
std::string JsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
using RepoPtr = std::unique_ptr<pipeline::Repository>;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

struct Context {
  const Config& config;
  const JobConfig& job;
  JobEnvironment& env;
  HistoryPlace history_place;            // where the job history is (job_history.h)
  std::vector<catalog::JobRun> history;  // of the repository, newest first, before this run
  catalog::SnapshotInfo snapshot;        // what the snapshot step took
  RepoPtr exclusive;                     // held from forget through prune
};

// How long a history write may wait for the catalog: never longer than the job's lock_wait
// (which bounds the whole wait), and at most a second (a row that cannot be written then is
// written later: job_history.h).
std::chrono::milliseconds HistoryBusyTimeout(const JobConfig& job) {
  const Result<std::chrono::nanoseconds> wait = ParseDuration(job.lock_wait, "s");
  const std::chrono::milliseconds cap(1000);
  if (!wait.ok()) return cap;
  return std::min(cap, std::chrono::duration_cast<std::chrono::milliseconds>(*wait));
}

Status SnapshotStep(Context& ctx, StepOutcome* out) {
  WB_ASSIGN_OR_RETURN(RepoPtr repo, ctx.env.OpenRepository(pipeline::OpenMode::kWrite));
  Result<pipeline::SnapshotResult> result = ctx.env.Snapshot(*repo);
  if (!result.ok()) return result.status();
  const catalog::SnapshotInfo& i = result->info;
  ctx.snapshot = i;
  const double secs = std::chrono::duration<double>(result->elapsed).count();
  out->summary = "snapshot " + std::to_string(i.id) + " of " + i.source + ": " +
                 FormatBytes(i.size_bytes) + " in " + FormatDuration(result->elapsed) + " (" +
                 FormatRate(secs > 0 ? static_cast<double>(i.size_bytes) / secs : 0) + "), " +
                 FormatBytes(i.bytes_new) + " new";
  out->json = JsonText(nlohmann::json{{"snapshot", i.id},
                                      {"source", i.source},
                                      {"size_bytes", i.size_bytes},
                                      {"bytes_read", i.bytes_read},
                                      {"bytes_new", i.bytes_new},
                                      {"bytes_stored", i.bytes_stored}});
  return Status::Ok();
}

// Each replica in turn; one that fails does not keep the others from their update, and the
// step fails with the first error (an interruption stops it at once). A failed replicate does
// not stop the steps after it (kSteps): a standby site that is down must not stop retention.
Status ReplicateStep(Context& ctx, StepOutcome* out) {
  if (ctx.job.replicate_to.empty()) {
    out->status = "skipped";
    out->summary = "no replicate_to in the job";
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(RepoPtr repo, ctx.env.OpenRepository(pipeline::OpenMode::kWrite));
  Status first_error;
  nlohmann::json replicas = nlohmann::json::array();
  uint64_t bytes = 0;
  int done = 0;
  for (const std::string& to : ctx.job.replicate_to) {
    Result<ReplicaUpdate> r = ctx.env.Replicate(*repo, ctx.snapshot, to);
    if (!r.ok() && r.status().code() == StatusCode::kCancelled) return r.status();
    if (!r.ok()) {
      ctx.env.Warning("run " + ctx.job.name + ": replicate: " + r.status().message());
      replicas.push_back({{"target", to}, {"error", r.status().message()}});
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    ctx.env.Info("run " + ctx.job.name + ": replicate: " + r->summary);
    replicas.push_back(nlohmann::json::parse(r->json));
    bytes += r->bytes_written;
    ++done;
  }
  const size_t all = ctx.job.replicate_to.size();
  out->summary = std::to_string(done) + " of " + std::to_string(all) +
                 (all == 1 ? " replica" : " replicas") + " at snapshot " +
                 std::to_string(ctx.snapshot.id) + ", " + FormatBytes(bytes) + " written";
  out->json = JsonText(nlohmann::json{{"replicas", replicas}, {"bytes_written", bytes}});
  const size_t failed = all - static_cast<size_t>(done);
  if (failed > 1) {  // the history keeps one error line: say the first is not the only one
    return first_error.WithSuffix(" (and " + std::to_string(failed - 1) + " more of " +
                                  std::to_string(all) + " replicas failed)");
  }
  return first_error;
}

// The repository alone, for forget and prune; nullptr, with the step marked skipped, while
// readers hold it (a mount kept for days, a long restore): that housekeeping waits for a later
// run instead of failing a run whose backup worked, after lock_wait of waiting (round 5, V6).
Result<pipeline::Repository*> Exclusive(Context& ctx, StepOutcome* out, const std::string& step) {
  if (!ctx.exclusive) {
    // This host's readers hold the repository directory's reader lines, or an S3 repository's
    // cache directory's (where its history is). Another host's reader on S3 holds a lock object:
    // the exclusive lock waits lock_wait for it, then the step fails (exit 7), never beside it.
    const std::string& dir = ctx.history_place.dir;
    if (!dir.empty()) {
      if (std::string readers = pipeline::ReadersHolding(dir); !readers.empty()) {
        out->status = "skipped";
        out->summary = "the repository is being read (" + readers + "); " + step +
                       " runs when no reader holds it";
        return nullptr;
      }
    }
    WB_ASSIGN_OR_RETURN(ctx.exclusive, ctx.env.OpenRepository(pipeline::OpenMode::kExclusive));
  }
  return ctx.exclusive.get();
}

Status ForgetStep(Context& ctx, StepOutcome* out) {
  if (ctx.job.retention.empty()) {
    out->status = "skipped";
    out->summary = "no keep_* rules in the job";
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(pipeline::Repository * repo, Exclusive(ctx, out, "forget"));
  if (repo == nullptr) return Status::Ok();
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo->catalog().Snapshots(false));
  // The rules decide on what the key sealed (times, job, tag, source), not on rows a storage
  // writer could edit (round 10, AA1); a difference stops the run before forget and prune.
  WB_RETURN_IF_ERROR(
      pipeline::CheckRowsMatchRecords(*repo, all).WithSuffix("; nothing was forgotten"));
  // This job's snapshots of this disk only: another job's (an hourly and a monthly job of one
  // LUN), a snapshot taken by hand and one from before job names were recorded are not its to
  // forget ('wanbackup forget' is). The disk by identity: the portal's spelling may change.
  const std::string disk = SourceIdentity(ctx.snapshot.source);
  std::vector<catalog::SnapshotInfo> mine;
  for (const catalog::SnapshotInfo& s : all)
    if (s.job == ctx.job.name && SourceIdentity(s.source) == disk) mine.push_back(s);
  std::vector<catalog::SnapshotInfo> forget;
  std::vector<int64_t> ids;
  for (const pipeline::RetentionDecision& d : pipeline::ApplyRetention(mine, ctx.job.retention)) {
    if (!d.keep && d.snapshot.id != ctx.snapshot.id) {
      forget.push_back(d.snapshot);
      ids.push_back(d.snapshot.id);
    }
  }
  if (!forget.empty()) WB_RETURN_IF_ERROR(pipeline::ForgetSnapshots(*repo, forget).status());
  std::sort(ids.begin(), ids.end());
  ctx.env.WarnReplicasLosingBase(*repo, ids);  // a night whose replicate step failed
  std::string list;
  for (int64_t id : ids)
    list += (list.empty() ? ": " : ", ") + std::to_string(id);
  out->summary = "kept " + std::to_string(mine.size() - forget.size()) + " snapshot(s) of " +
                 ctx.snapshot.source + " by this job, forgot " + std::to_string(forget.size()) +
                 list;
  out->json = JsonText(nlohmann::json{{"kept", mine.size() - forget.size()}, {"forgotten", ids}});
  return Status::Ok();
}

// When the repository was last pruned by a job (0: never, as far as the history knows).
int64_t LastPruneMs(const std::vector<catalog::JobRun>& history) {
  for (const catalog::JobRun& run : history) {
    const nlohmann::json steps = nlohmann::json::parse(run.steps, nullptr, false);
    if (!steps.is_array()) continue;
    for (const nlohmann::json& s : steps) {
      if (!s.is_object() || !s.contains("step") || !s.contains("status")) continue;
      if (s["step"] == "prune" && s["status"] == "ok") {
        return run.finished_unix_ms;
      }
    }
  }
  return 0;
}

// "" when prune is due, else why not.
std::string PruneNotDue(const JobConfig& job, const std::vector<catalog::JobRun>& history) {
  if (job.prune_interval == "never") return "prune_interval is \"never\"";
  if (job.prune_interval == "always") return "";
  const Result<std::chrono::milliseconds> every =
      pipeline::ParseRetentionDuration(job.prune_interval);
  const int64_t last = LastPruneMs(history);
  if (!every.ok() || last == 0) return "";
  const int64_t age = NowMs() - last;
  if (age >= every->count()) return "";
  return "last pruned " + FormatDuration(std::chrono::milliseconds(age)) + " ago (" +
         LocalTime(last) + "); prune_interval " + job.prune_interval;
}

Status PruneStep(Context& ctx, StepOutcome* out) {
  if (std::string why = PruneNotDue(ctx.job, ctx.history); !why.empty()) {
    out->status = "skipped";
    out->summary = why;
    return Status::Ok();
  }
  pipeline::PruneOptions options;
  WB_ASSIGN_OR_RETURN(options.max_unused, pipeline::ParseUnusedLimit(ctx.job.max_unused));
  WB_ASSIGN_OR_RETURN(pipeline::Repository * repo, Exclusive(ctx, out, "prune"));
  if (repo == nullptr) return Status::Ok();
  WB_ASSIGN_OR_RETURN(pipeline::PruneReport r, pipeline::Prune(*repo, options));
  out->summary = "freed " + FormatBytes(r.bytes_freed) + " (" + std::to_string(r.packs_removed) +
                 " pack(s) removed, " + std::to_string(r.packs_rewritten) + " rewritten); " +
                 FormatBytes(r.unused_after) + " unused left";
  out->json = JsonText(nlohmann::json{{"bytes_freed", r.bytes_freed},
                                      {"packs_removed", r.packs_removed},
                                      {"packs_rewritten", r.packs_rewritten},
                                      {"unused_after", r.unused_after}});
  return Status::Ok();
}

// Which share of the chunks this run reads: part k of N, k counting the job's runs.
std::pair<uint32_t, uint32_t> VerifyPart(const JobConfig& job,
                                         const std::vector<catalog::JobRun>& history) {
  const auto of = static_cast<uint32_t>(std::ceil(1.0 / job.verify_share - 1e-9));
  uint32_t earlier = 0;
  for (const catalog::JobRun& r : history)
    earlier += r.job == job.name ? 1 : 0;
  return {of == 0 ? 0 : earlier % of, std::max<uint32_t>(of, 1)};
}

Status VerifyStep(Context& ctx, StepOutcome* out) {
  if (ctx.job.verify_share <= 0) {
    out->status = "skipped";
    out->summary = "verify_share is 0";
    return Status::Ok();
  }
  ctx.exclusive.reset();
  WB_ASSIGN_OR_RETURN(RepoPtr repo, ctx.env.OpenRepository(pipeline::OpenMode::kRead));
  pipeline::VerifyOptions options;
  std::tie(options.share_part, options.share_of) = VerifyPart(ctx.job, ctx.history);
  WB_ASSIGN_OR_RETURN(pipeline::VerifyReport r, pipeline::VerifyRepository(*repo, options));
  out->summary = "share " + std::to_string(options.share_part + 1) + " of " +
                 std::to_string(options.share_of) + ": " + std::to_string(r.chunks_checked) +
                 " chunks (" + FormatBytes(r.bytes_checked) + ") and " +
                 std::to_string(r.snapshots_checked) +
                 (r.snapshots_checked == 1 ? " snapshot checked" : " snapshots checked");
  out->json = JsonText(nlohmann::json{{"share_part", options.share_part},
                                      {"share_of", options.share_of},
                                      {"chunks_checked", r.chunks_checked},
                                      {"chunks_damaged", r.chunks_damaged},
                                      {"damaged_ranges", r.damage.size()}});
  if (!r.ok()) {
    return Status::Corruption(
        "verify found " + std::to_string(r.chunks_damaged) + " damaged chunk(s) and " +
        std::to_string(r.damage.size()) + " damaged range(s); run 'wanbackup verify --repo " +
        ctx.config.repositories.at(ctx.job.repository).path + "' for the details");
  }
  return Status::Ok();
}

std::string StepsJson(const std::vector<StepOutcome>& steps) {
  nlohmann::json list = nlohmann::json::array();
  for (const StepOutcome& s : steps) {
    list.push_back(
        {{"step", s.step}, {"status", s.status}, {"seconds", s.seconds}, {"summary", s.summary}});
  }
  return JsonText(list);
}

using StepFn = Status (*)(Context&, StepOutcome*);
struct Step {
  const char* name;
  StepFn fn;
  bool stops_run;  // when it fails (an interruption always stops the run)
};
constexpr Step kSteps[] = {
    {"snapshot", SnapshotStep, true}, {"replicate", ReplicateStep, false},
    {"forget", ForgetStep, true},     {"prune", PruneStep, true},
    {"verify", VerifyStep, true},
};

// The run's status after another step failed: every failed step is in its one error line
// ("job J, replicate: …; verify: …"), and damage found by verify (exit 3) outranks what failed
// before it (a replica that could not be written), so monitoring sees the worse news.
Status AddFailure(const Status& so_far, const Status& failed, const std::string& job,
                  const std::string& step) {
  if (so_far.ok()) return failed.WithContext("job " + job + ", " + step);
  const std::string message = so_far.message() + "; " + step + ": " + failed.message();
  const bool worse =
      failed.code() == StatusCode::kCorruption || failed.code() == StatusCode::kCancelled;
  return Status(worse ? failed.code() : so_far.code(), message);
}

// Where the metrics go: a directory that exists, reached without another user's link.
Status CheckMetricsPlace(const Config& config) {
  if (!config.metrics_textfile.empty()) {
    const std::string& file = config.metrics_textfile;
    const size_t slash = file.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : file.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(config.path + ": [metrics] textfile: " + dir +
                                     " does not exist or is not a directory (the run would "
                                     "write no metrics)");
    }
    // Nothing is written through a link another user planted on the way.
    WB_RETURN_IF_ERROR(
        CheckMetricsTextfile(file).WithContext(config.path + ": [metrics] textfile"));
  }
  return Status::Ok();
}

// A repository that is not the one the config names (its pinned id, this client's trust
// anchor, an unencrypted one not allowed) gets nothing written, not even the run's history.
// Nor does a run whose metrics could not be written: monitoring would go stale without a word,
// so it is refused before it starts, as its dry run is (round 7, X4).
bool RefusedBeforeUse(const Context& ctx, JobOutcome* out) {
  Status s = CheckMetricsPlace(ctx.config);
  if (s.ok()) s = ctx.env.CheckRepositoryBeforeUse();
  if (s.ok()) return false;
  out->status = s.WithContext("job " + ctx.job.name);
  out->run.job = ctx.job.name;
  out->run.status = "failed";
  out->run.error = out->status.message();
  return true;
}

}  // namespace

// The run's outcome as its history and exit status give it, once its steps are done; the
// metrics are written here, so that a failure to write them is in the history too.
void CloseRun(const Context& ctx, JobOutcome* out) {
  // A refusal of bad input means "nothing was changed" (exit status 2); once the snapshot is
  // taken that is no longer so, and the run failed (exit status 1) (round 9, Z3).
  if (ctx.snapshot.id != 0 && (out->status.code() == StatusCode::kInvalidArgument ||
                               out->status.code() == StatusCode::kAlreadyExists)) {
    out->status = Status(StatusCode::kIoError, out->status.message());
  }
  out->run.finished_unix_ms = NowMs();
  out->run.snapshot_id = ctx.snapshot.id;
  out->run.bytes = ctx.snapshot.bytes_read;
  out->run.status = out->status.ok()                               ? "ok"
                    : out->status.code() == StatusCode::kCancelled ? "interrupted"
                                                                   : "failed";
  out->run.error = out->status.ok() ? "" : out->status.message();
  // Metrics that could not be written leave monitoring stale: the backup stands (its steps say
  // so), and the run's exit status and its history say the metrics failed (round 8, Y4; round
  // 9, Z5: the history said ok, so `wanbackup jobs` did too).
  if (!ctx.config.metrics_textfile.empty()) {
    if (Status s = WriteJobMetrics(ctx.config.metrics_textfile, out->run); !s.ok()) {
      ctx.env.Warning("metrics: " + s.message());
      if (out->status.ok()) {
        out->status = s.WithContext("job " + ctx.job.name + ", metrics");
        out->run.status = "failed";
        out->run.error = out->status.message();
      }
    }
  }
}

JobOutcome RunJob(const Config& config, const JobConfig& job, JobEnvironment& env) {
  const RepositoryConfig& repository = config.repositories.at(job.repository);
  Context ctx{config, job, env, {}, {}, {}, nullptr};
  JobOutcome out;
  if (RefusedBeforeUse(ctx, &out)) return out;
  Result<HistoryPlace> place = HistoryPlaceOf(repository);
  if (place.ok()) {
    ctx.history_place = *place;
  } else {
    env.Warning("job history: " + place.status().message() + "; this run is not in the history");
  }
  RunHistory history(ctx.history_place, HistoryBusyTimeout(job), env, true);
  ctx.history = history.Runs("", 1000000);

  out.run.job = job.name;
  out.run.started_unix_ms = NowMs();
  out.run.status = "running";
  out.run.pid = ::getpid();
  out.run.pid_started = OwnStartTime();
  out.run.host = HostName();
  history.Write(&out.run);
  bool stopped = false;
  for (const Step& def : kSteps) {
    const std::string name = def.name;
    StepOutcome step;
    step.step = name;
    step.json = "{}";
    const Clock::time_point start = Clock::now();
    Status s = !stopped ? def.fn(ctx, &step) : Status::Ok();
    step.seconds = Seconds(Clock::now() - start);
    if (stopped) {
      step.status = "skipped";
      step.summary = "an earlier step failed";
    } else if (!s.ok()) {
      step.status = s.code() == StatusCode::kCancelled ? "interrupted" : "failed";
      step.summary = s.message();
      out.status = AddFailure(out.status, s, job.name, name);
      stopped = def.stops_run || s.code() == StatusCode::kCancelled;
      if (!stopped) env.Warning("run " + job.name + ": " + name + " failed; going on");
    } else {
      if (step.status.empty()) step.status = "ok";
      env.Info("run " + job.name + ": " + name + ": " + step.status + ": " + step.summary);
    }
    out.steps.push_back(step);
    out.run.steps = StepsJson(out.steps);
    history.Write(&out.run);
  }
  ctx.exclusive.reset();
  CloseRun(ctx, &out);
  history.Finish(&out.run);
  return out;
}

// What the run checks before or after its steps without touching the source or a replica: its
// tuning (as the snapshot step reads it) and where the metrics go.
Status CheckAsTheRunWould(const Config& config, const JobConfig& job, JobEnvironment& env) {
  WB_RETURN_IF_ERROR(env.CheckTuning().WithContext("job " + job.name));
  return CheckMetricsPlace(config);
}

Result<std::vector<std::string>> PlanJob(const Config& config, const JobConfig& job,
                                         JobEnvironment& env) {
  const RepositoryConfig& repository = config.repositories.at(job.repository);
  WB_RETURN_IF_ERROR(CheckAsTheRunWould(config, job, env));
  {
    WB_ASSIGN_OR_RETURN(RepoPtr repo, env.OpenRepository(pipeline::OpenMode::kRead));
    for (const std::string& to : job.replicate_to) {  // the run's write guard, asked now
      WB_RETURN_IF_ERROR(
          env.CheckReplicaTarget(*repo, to).WithContext("job " + job.name + ": replicate_to"));
    }
  }
  const bool remote = initiator::LooksLikeIscsiUrl(job.source);
  if (!remote) {  // a local source must open now as the run will open it (a file or a device)
    Result<std::unique_ptr<pipeline::FileSource>> opened =
        pipeline::FileSource::Open(job.source, 1);
    if (!opened.ok()) return opened.status().WithContext("job " + job.name + ": its source");
  }
  WB_ASSIGN_OR_RETURN(const HistoryPlace place, HistoryPlaceOf(repository));
  RunHistory history(place, HistoryBusyTimeout(job), env, false);
  const std::vector<catalog::JobRun> runs = history.Runs("", 1000000);
  std::vector<std::string> plan;
  plan.push_back(
      "snapshot " + job.source + " into " + repository.path +
      (job.tag.empty() ? "" : " with tag " + job.tag) +
      (job.limit_rate.empty() ? "" : ", at most " + job.limit_rate + "/s") +
      (remote ? " (the target is not contacted in a dry run: wanbackup probe checks it)" : ""));
  if (job.replicate_to.empty()) {
    plan.push_back("replicate: skipped (no replicate_to)");
  }
  for (const std::string& to : job.replicate_to) {
    plan.push_back("replicate the new snapshot to " + to +
                   " (only the chunks that differ from what it holds)");
  }
  plan.push_back(job.retention.empty()
                     ? "forget: skipped (no keep_* rules)"
                     : "forget the job's own snapshots of the source that its keep_* rules do "
                       "not keep (never the new one)");
  const std::string not_due = PruneNotDue(job, runs);
  plan.push_back(not_due.empty() ? "prune: due (max_unused " + job.max_unused + ")"
                                 : "prune: skipped, " + not_due);
  if (job.verify_share <= 0) {
    plan.push_back("verify: skipped (verify_share is 0)");
  } else {
    const auto [part, of] = VerifyPart(job, runs);
    plan.push_back("verify share " + std::to_string(part + 1) + " of " + std::to_string(of) +
                   " of the repository's chunks, and every snapshot's map");
  }
  return plan;
}

Result<std::vector<catalog::JobRun>> JobHistory(const RepositoryConfig& repository,
                                                const std::string& job, int limit,
                                                Reporter& reporter) {
  WB_ASSIGN_OR_RETURN(const HistoryPlace place, HistoryPlaceOf(repository));
  RunHistory history(place, catalog::Catalog::kDefaultBusyTimeout, reporter, false);
  if (!history.ok()) {
    // An S3 repository's history file is made by its first run on this host.
    struct stat st {};
    if (place.own_file && ::lstat(place.file.c_str(), &st) != 0) {
      return std::vector<catalog::JobRun>{};
    }
    // Say why: most often the repository is not there (yet), which ReadConfig names.
    WB_RETURN_IF_ERROR(pipeline::Repository::ReadConfig(repository.path).status());
    return Status::Unavailable(place.own_file ? "cannot read the job history " + place.file
                                              : "cannot read the catalog of " + repository.path);
  }
  return history.Runs(job, limit);
}

}  // namespace wanbackup::jobs
