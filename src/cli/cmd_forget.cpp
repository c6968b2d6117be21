// wanbackup forget: remove snapshots by a retention policy or by id (their data goes with the
// next prune).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/replicate_target.h"
#include "cli/repo_flags.h"
#include "common/text.h"
#include "common/units.h"
#include "jobs/source_identity.h"
#include "repository/forget.h"
#include "repository/retention.h"
#include "repository/snapshot_check.h"

namespace wanbackup::cli {
namespace {

struct ForgetCommandOptions {
  std::vector<std::string> ids;
  pipeline::RetentionPolicy policy;
  std::string keep_within;
  std::string source;
  std::string group_by_text = "source,tag";  // --group-by as given
  pipeline::GroupBy group_by;
  bool allow_empty_source = false;
  bool lost = false;        // the ids are snapshots repair left out (FindLostSnapshots)
  bool lost_packs = false;  // give up the packs the catalog records as missing
  bool dry_run = false;
  bool json = false;
  RepoFlags repo;
};

std::string JoinIds(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids)
    s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

// Everything that can be said about the command line before the repository is opened.
Status CheckArguments(ForgetCommandOptions* opts) {
  WB_ASSIGN_OR_RETURN(opts->group_by, pipeline::ParseGroupBy(opts->group_by_text));
  if (!opts->keep_within.empty()) {
    WB_ASSIGN_OR_RETURN(opts->policy.keep_within,
                        pipeline::ParseRetentionDuration(opts->keep_within));
  }
  WB_RETURN_IF_ERROR(pipeline::CheckKeepTags(opts->policy.keep_tags).WithContext("--keep-tag"));
  const bool by_policy = !opts->policy.empty();
  if (opts->lost_packs && (by_policy || !opts->ids.empty() || opts->lost)) {
    return Status::InvalidArgument(
        "--lost-packs gives up the packs 'repair catalog' found missing, and takes no snapshot "
        "or rule; nothing was forgotten");
  }
  if (opts->lost_packs) return Status::Ok();
  if (by_policy && !opts->ids.empty()) {
    return Status::InvalidArgument(
        "give snapshot ids or --keep-* rules, not both; nothing was forgotten");
  }
  if (!by_policy && opts->ids.empty()) {
    return Status::InvalidArgument(
        "no snapshot and no --keep-* rule given: say what to keep (e.g. --keep-last 7 "
        "--keep-daily 14) or which snapshots to forget; nothing was forgotten");
  }
  if (opts->lost && (by_policy || opts->ids.empty())) {
    return Status::InvalidArgument(
        "--lost gives up snapshots by number (those 'repair catalog' left out), not by --keep-* "
        "rules; nothing was forgotten");
  }
  if (!opts->ids.empty() && !opts->source.empty()) {
    return Status::InvalidArgument(
        "--source selects snapshots for the --keep-* rules; with "
        "snapshot ids it has no meaning");
  }
  for (const std::string& id : opts->ids) {
    // Digits only, within the numbers a repository gives out (strtoll took " 1" and clamped
    // 2^64 + 3 to the largest number; round 11, AB6).
    const std::optional<uint64_t> n = ParseDecimalU64(id);
    if (!n || *n == 0 || *n > static_cast<uint64_t>(catalog::kMaxSnapshotId)) {
      return Status::InvalidArgument("'" + id +
                                     "' is not a snapshot number; nothing was forgotten");
    }
  }
  return Status::Ok();
}

// What to forget: the decision about every snapshot of each series concerned, and the
// snapshots the decisions drop.
struct SeriesDecisions {
  pipeline::SnapshotGroup series;  // what the series is (its snapshots are in `decisions`)
  std::vector<pipeline::RetentionDecision> decisions;
};
struct ForgetPlan {
  std::vector<SeriesDecisions> series;
  std::vector<catalog::SnapshotInfo> forget;
};

// "SOURCE, tag T, job J" as far as the series is grouped; "all snapshots" when it is not.
std::string SeriesName(const pipeline::SnapshotGroup& g, const pipeline::GroupBy& by) {
  std::string name = by.source ? g.source : "";
  if (by.tag) name += (name.empty() ? "" : ", ") + (g.tag.empty() ? "no tag" : "tag " + g.tag);
  if (by.job) name += (name.empty() ? "" : ", ") + (g.job.empty() ? "no job" : "job " + g.job);
  return name.empty() ? "all snapshots" : name;
}

// The snapshots named on the command line (each must exist and be complete); the other
// snapshots of their series are kept as "not named".
Result<ForgetPlan> PlanByIds(catalog::Catalog& cat,
                             const std::vector<pipeline::SnapshotGroup>& groups,
                             const std::vector<std::string>& ids) {
  std::set<int64_t> wanted;
  for (const std::string& id : ids)
    wanted.insert(std::strtoll(id.c_str(), nullptr, 10));
  for (int64_t id : wanted) {
    Result<catalog::SnapshotInfo> s = cat.GetSnapshot(id);
    if (!s.ok() && s.status().code() != StatusCode::kNotFound) return s.status();  // damaged
    if (!s.ok() || s->status != catalog::SnapshotStatus::kComplete) {
      return Status::NotFound("no snapshot " + std::to_string(id) +
                              " (see 'wanbackup snapshots'); nothing was forgotten");
    }
  }
  ForgetPlan plan;
  for (const pipeline::SnapshotGroup& g : groups) {
    const bool touched = std::any_of(g.snapshots.begin(), g.snapshots.end(),
                                     [&](const auto& s) { return wanted.count(s.id) != 0; });
    if (!touched) continue;
    SeriesDecisions series{g, {}};
    for (const catalog::SnapshotInfo& s : g.snapshots) {
      const bool drop = wanted.count(s.id) != 0;
      series.decisions.push_back(
          {s, !drop, drop ? std::vector<std::string>{} : std::vector<std::string>{"not named"}});
      if (drop) plan.forget.push_back(s);
    }
    plan.series.push_back(std::move(series));
  }
  return plan;
}

// The --keep-* rules applied to each series.
ForgetPlan PlanByPolicy(const std::vector<pipeline::SnapshotGroup>& groups,
                        const ForgetCommandOptions& opts) {
  ForgetPlan plan;
  for (const pipeline::SnapshotGroup& g : groups) {
    SeriesDecisions series{g, pipeline::ApplyRetention(g.snapshots, opts.policy)};
    for (const pipeline::RetentionDecision& d : series.decisions) {
      if (!d.keep) plan.forget.push_back(d.snapshot);
    }
    plan.series.push_back(std::move(series));
  }
  return plan;
}

// Which snapshots to forget: those named by id, or those the --keep-* rules do not keep.
Result<ForgetPlan> Plan(pipeline::Repository& repo, const ForgetCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::SnapshotInfo> all, repo.catalog().Snapshots(false));
  // The rules decide on what the key sealed, not on rows anyone with the files can edit.
  WB_RETURN_IF_ERROR(
      pipeline::CheckRowsMatchRecords(repo, all).WithSuffix("; nothing was forgotten"));
  std::map<std::string, std::string> identities;  // stat once per source name
  auto identity = [&](const std::string& source) {
    auto it = identities.find(source);
    if (it == identities.end()) it = identities.emplace(source, jobs::SourceIdentity(source)).first;
    return it->second;
  };
  if (!opts.source.empty()) {  // that disk only, however its snapshots spelled it
    const std::string wanted = identity(opts.source);
    std::erase_if(all,
                  [&](const catalog::SnapshotInfo& s) { return identity(s.source) != wanted; });
    if (all.empty()) {
      return Status::NotFound("no snapshots of source '" + opts.source +
                              "' (see 'wanbackup snapshots'); nothing was forgotten");
    }
  }
  const std::vector<pipeline::SnapshotGroup> groups =
      pipeline::GroupSnapshots(all, opts.group_by, identity);
  if (!opts.ids.empty()) return PlanByIds(repo.catalog(), groups, opts.ids);
  return PlanByPolicy(groups, opts);
}

// Never the last snapshot of a series, nor of a source however the series are grouped
// (--group-by "" makes one series of every source), unless asked in so many words.
Status CheckNoSourceEmptied(const ForgetPlan& plan, const ForgetCommandOptions& opts) {
  if (opts.allow_empty_source) return Status::Ok();
  for (const SeriesDecisions& s : plan.series) {
    const bool keeps_one =
        std::any_of(s.decisions.begin(), s.decisions.end(), [](const auto& d) { return d.keep; });
    if (!keeps_one && !s.decisions.empty()) {
      return Status::InvalidArgument(
          "this would forget every snapshot of " + SeriesName(s.series, opts.group_by) +
          " (the newest is " + std::to_string(s.decisions.front().snapshot.id) +
          "); keep one, or give --allow-empty-source; nothing was forgotten");
    }
  }
  struct Fate {
    bool kept = false;
    int64_t newest = 0;
    std::string name;
  };
  std::map<std::string, Fate> sources;            // by identity (jobs/source_identity.h)
  std::map<std::string, std::string> identities;  // stat once per source name
  for (const SeriesDecisions& s : plan.series) {
    for (const pipeline::RetentionDecision& d : s.decisions) {
      auto [id, added] = identities.try_emplace(d.snapshot.source);
      if (added) id->second = jobs::SourceIdentity(d.snapshot.source);
      Fate& f = sources[id->second];
      f.kept = f.kept || d.keep;
      if (d.snapshot.id > f.newest) {
        f.newest = d.snapshot.id;
        f.name = d.snapshot.source;
      }
    }
  }
  for (const auto& [identity, f] : sources) {
    if (f.kept) continue;
    return Status::InvalidArgument("this would forget every snapshot of source " + f.name +
                                   " (the newest is " + std::to_string(f.newest) +
                                   "); keep one, or give --allow-empty-source; nothing was "
                                   "forgotten");
  }
  return Status::Ok();
}

nlohmann::json OrNull(bool grouped, const std::string& value) {
  return grouped ? nlohmann::json(value) : nlohmann::json();
}

void PrintJson(const ForgetPlan& plan, const ForgetCommandOptions& opts,
               const std::vector<int64_t>& forgotten, bool upgraded) {
  nlohmann::json sources = nlohmann::json::array();
  for (const SeriesDecisions& s : plan.series) {
    nlohmann::json keep = nlohmann::json::array(), drop = nlohmann::json::array();
    for (const pipeline::RetentionDecision& d : s.decisions) {
      nlohmann::json e = {{"id", d.snapshot.id},
                          {"started_unix_ms", d.snapshot.started_unix_ms},
                          {"tag", d.snapshot.tag},
                          {"job", d.snapshot.job}};
      if (d.keep) {
        e["reasons"] = d.reasons;
        keep.push_back(e);
      } else {
        drop.push_back(e);
      }
    }
    // The series' keys; null for what it is not grouped by.
    sources.push_back({{"source", OrNull(opts.group_by.source, s.series.source)},
                       {"tag", OrNull(opts.group_by.tag, s.series.tag)},
                       {"job", OrNull(opts.group_by.job, s.series.job)},
                       {"keep", keep},
                       {"forget", drop}});
  }
  nlohmann::json j = {{"dry_run", opts.dry_run},
                      {"forgotten", forgotten},
                      {"sources", sources},
                      {"upgraded_format", upgraded}};
  OutputJson(j, 2);
}

// One table per series: keep or forget, id, start time, tag, and the rules that keep it.
void PrintDecisions(const ForgetPlan& plan, const pipeline::GroupBy& by) {
  for (const SeriesDecisions& s : plan.series) {
    size_t kept = 0;
    for (const auto& d : s.decisions)
      kept += d.keep ? 1 : 0;
    std::printf("%s: keep %zu, forget %zu\n", EscapeForTerminal(SeriesName(s.series, by)).c_str(),
                kept, s.decisions.size() - kept);
    for (const pipeline::RetentionDecision& d : s.decisions) {
      std::string why;
      for (const std::string& r : d.reasons)
        why += (why.empty() ? "" : ", ") + r;
      std::printf("  %-6s %5lld  %s  %-8s %s\n", d.keep ? "keep" : "forget",
                  static_cast<long long>(d.snapshot.id),
                  LocalTime(d.snapshot.started_unix_ms).c_str(),
                  d.snapshot.tag.empty() ? "-" : d.snapshot.tag.c_str(), why.c_str());
    }
  }
}

void PrintOutcome(const std::vector<int64_t>& forgotten, bool dry_run, bool upgraded) {
  if (forgotten.empty()) {
    PrintInfo("nothing to forget");
  } else if (dry_run) {
    PrintInfo("would forget " + std::to_string(forgotten.size()) +
              " snapshot(s): " + JoinIds(forgotten) + " (dry run: nothing was changed)");
  } else {
    if (upgraded) PrintInfo("upgraded the repository to format 3 (forget records)");
    PrintInfo("forgot " + std::to_string(forgotten.size()) + " snapshot(s): " + JoinIds(forgotten) +
              "; 'wanbackup prune' frees their space");
  }
}

// What one lost snapshot was, and what of it is gone.
std::string DescribeLost(const pipeline::LostSnapshot& l) {
  const catalog::SnapshotInfo& info = l.record.info;
  std::string gone = l.missing != 0 ? std::to_string(l.missing) + " of its chunks" : "";
  if (l.segments_missing != 0) {
    gone +=
        (gone.empty() ? "" : " and ") + std::to_string(l.segments_missing) + " of its map segments";
  }
  return "snapshot " + std::to_string(info.id) + " of " + EscapeForTerminal(info.source) +
         " taken " + LocalTime(info.started_unix_ms) + ": " + gone + " are gone from the packs";
}

// The lost snapshots the ids name. Each id must name one: not a snapshot the catalog lists,
// nor one whole in the packs (repair brings that back).
Result<std::vector<pipeline::LostSnapshot>> FindLost(pipeline::Repository& repo,
                                                     const std::vector<std::string>& ids) {
  std::set<int64_t> wanted;
  for (const std::string& id : ids)
    wanted.insert(std::strtoll(id.c_str(), nullptr, 10));
  std::vector<pipeline::LostSnapshot> lost;
  for (const int64_t id : wanted) {
    // A lost record first: where a number was given out twice (a client without an anchor),
    // the catalog may list another snapshot under it, which stays (the forget record names the
    // lost one's record).
    WB_ASSIGN_OR_RETURN(std::vector<pipeline::LostSnapshot> found,
                        pipeline::FindLostSnapshots(repo, id));
    Result<catalog::SnapshotInfo> listed = repo.catalog().GetSnapshot(id);
    if (found.empty() && listed.ok() && listed->status == catalog::SnapshotStatus::kComplete) {
      return Status::InvalidArgument("snapshot " + std::to_string(id) +
                                     " is in the catalog, not lost ('wanbackup forget " +
                                     std::to_string(id) + "' forgets it); nothing was forgotten");
    }
    if (found.empty()) {
      return Status::NotFound(
          "no lost snapshot " + std::to_string(id) +
          ": --lost gives up a sealed snapshot that 'repair catalog' left out because chunks of "
          "it are gone (prune names it); nothing was forgotten");
    }
    for (pipeline::LostSnapshot& l : found) {
      if (l.missing == 0 && l.segments_missing == 0) {
        return Status::InvalidArgument(
            "snapshot " + std::to_string(id) +
            " is whole in the packs: 'wanbackup repair catalog' brings it back; nothing was "
            "forgotten");
      }
      lost.push_back(std::move(l));
    }
  }
  return lost;
}

void PrintLost(const std::vector<pipeline::LostSnapshot>& lost, bool dry_run, bool json,
               bool upgraded) {
  std::vector<int64_t> ids;
  for (const pipeline::LostSnapshot& l : lost)
    ids.push_back(l.record.info.id);
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const pipeline::LostSnapshot& l : lost) {
      list.push_back({{"id", l.record.info.id},
                      {"source", l.record.info.source},
                      {"started_unix_ms", l.record.info.started_unix_ms},
                      {"chunks_missing", l.missing},
                      {"segments_missing", l.segments_missing}});
    }
    OutputJson(
        {{"dry_run", dry_run}, {"forgotten", ids}, {"lost", list}, {"upgraded_format", upgraded}},
        2);
    return;
  }
  for (const pipeline::LostSnapshot& l : lost)
    std::printf("%s\n", DescribeLost(l).c_str());
  if (dry_run) {
    PrintInfo("would give up lost snapshot(s) " + JoinIds(ids) +
              " for good (dry run: nothing was changed)");
    return;
  }
  if (upgraded) PrintInfo("upgraded the repository to format 3 (forget records)");
  PrintInfo("gave up lost snapshot(s) " + JoinIds(ids) +
            " for good: a repair no longer looks for them, and 'wanbackup prune' goes on and "
            "frees what only they held");
}

// forget --lost: snapshots `repair catalog` left out because chunks of them are gone, given up
// on purpose so that prune can go on (round 8, Y1).
Status RunForgetLost(const ForgetCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo,
                      OpenRepository(opts.repo, opts.dry_run ? pipeline::OpenMode::kRead
                                                             : pipeline::OpenMode::kExclusive));
  // What is gone is judged on a catalog that knows every pack there is.
  WB_RETURN_IF_ERROR(pipeline::CheckCatalogNamesEveryPack(*repo));
  WB_ASSIGN_OR_RETURN(const std::vector<pipeline::LostSnapshot> lost, FindLost(*repo, opts.ids));
  bool upgraded = false;
  if (!opts.dry_run) {
    WB_ASSIGN_OR_RETURN(const pipeline::ForgetOutcome outcome,
                        pipeline::ForgetLostSnapshots(*repo, lost));
    upgraded = outcome.upgraded_format;
  }
  PrintLost(lost, opts.dry_run, opts.json, upgraded);
  return Status::Ok();
}

// forget --lost-packs: the packs `repair catalog --allow-missing-packs` rebuilt without, given
// up so that prune goes on (round 11, AB1).
Status RunForgetLostPacks(const ForgetCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(auto repo,
                      OpenRepository(opts.repo, opts.dry_run ? pipeline::OpenMode::kRead
                                                             : pipeline::OpenMode::kExclusive));
  WB_ASSIGN_OR_RETURN(const std::vector<std::string> given_up,
                      pipeline::ForgetMissingPacks(*repo, opts.dry_run));
  if (opts.json) {
    OutputJson({{"dry_run", opts.dry_run}, {"lost", given_up}}, 2);
    return Status::Ok();
  }
  for (const std::string& line : given_up)
    std::printf("%s\n", line.c_str());
  if (given_up.empty()) {
    PrintInfo("nothing is recorded as missing");
  } else if (opts.dry_run) {
    PrintInfo("would give up " + std::to_string(given_up.size()) +
              " missing pack(s) or record(s) for good (dry run: nothing was changed)");
  } else {
    PrintInfo("gave up " + std::to_string(given_up.size()) +
              " missing pack(s) or record(s) for good: prune goes on, and removes what only the "
              "snapshots whose records they held used");
  }
  return Status::Ok();
}

Status RunForget(ForgetCommandOptions opts) {
  WB_RETURN_IF_ERROR(CheckArguments(&opts));
  if (opts.lost_packs) return RunForgetLostPacks(opts);
  if (opts.lost) return RunForgetLost(opts);
  // A dry run only reads; a real one must be alone with the repository.
  WB_ASSIGN_OR_RETURN(auto repo,
                      OpenRepository(opts.repo, opts.dry_run ? pipeline::OpenMode::kRead
                                                             : pipeline::OpenMode::kExclusive));
  WB_ASSIGN_OR_RETURN(const ForgetPlan plan, Plan(*repo, opts));
  WB_RETURN_IF_ERROR(CheckNoSourceEmptied(plan, opts));

  std::vector<int64_t> forgotten;
  for (const catalog::SnapshotInfo& s : plan.forget)
    forgotten.push_back(s.id);
  std::sort(forgotten.begin(), forgotten.end());
  bool upgraded = false;
  if (!opts.dry_run && !plan.forget.empty()) {
    WB_ASSIGN_OR_RETURN(pipeline::ForgetOutcome outcome,
                        pipeline::ForgetSnapshots(*repo, plan.forget));
    upgraded = outcome.upgraded_format;
  }
  WarnReplicasLosingBase(*repo, forgotten, opts.dry_run);

  if (opts.json) {
    PrintJson(plan, opts, forgotten, upgraded);
    return Status::Ok();
  }
  PrintDecisions(plan, opts.group_by);
  PrintOutcome(forgotten, opts.dry_run, upgraded);
  return Status::Ok();
}

// The --keep-* rules, in their own help group.
void AddRetentionFlags(CLI::App* cmd, ForgetCommandOptions* opts) {
  const char* rules = "Retention (per series; a snapshot any rule keeps is kept)";
  const CLI::Validator at_least_one(
      [](std::string& value) -> std::string {
        size_t used = 0;
        long long n = 0;
        try {
          n = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == value.size() && n >= 1) return {};
        return "'" + value + "' is not a count of 1 or more (a rule that keeps none is left out)";
      },
      "N");
  cmd->add_option("--keep-last", opts->policy.keep_last, "keep the N newest snapshots")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-hourly", opts->policy.keep_hourly,
                  "keep the newest snapshot of each of the N newest hours that have one")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-daily", opts->policy.keep_daily,
                  "keep the newest snapshot of each of the N newest days that have one")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-weekly", opts->policy.keep_weekly,
                  "... of each of the N newest weeks (ISO weeks, Monday to Sunday)")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-monthly", opts->policy.keep_monthly,
                  "... of each of the N newest calendar months")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-yearly", opts->policy.keep_yearly,
                  "... of each of the N newest calendar years")
      ->check(at_least_one)
      ->group(rules);
  cmd->add_option("--keep-within", opts->keep_within,
                  "keep every snapshot taken within DURATION of the source's newest one "
                  "(e.g. 36h, 7d, 2w, 1y6m; m = 30 days, y = 365)")
      ->group(rules);
  cmd->add_option("--keep-tag", opts->policy.keep_tags,
                  "keep every snapshot with this tag (repeatable)")
      ->group(rules);
}

constexpr const char kForgetFooter[] =
    "\nSERIES: the rules apply to each series of snapshots on its own. By default a series is\n"
    "one source and one tag (--group-by source,tag): a LUN is one source however its portal\n"
    "is spelled (iscsi://localhost/IQN/1 and iscsi://127.0.0.1/IQN/1 are one), a local file\n"
    "or device however its path is (by device and inode where it exists). --group-by source\n"
    "ignores tags, --group-by job groups by the job that took each snapshot ('wanbackup run';\n"
    "by hand: no job), --group-by '' makes all snapshots one series.\n"
    "\nRULES: the snapshots of each series are taken newest first, by start time. --keep-last\n"
    "keeps the N newest. --keep-hourly/daily/weekly/monthly/yearly keep, for each of the N\n"
    "newest periods that have a snapshot, the newest snapshot in it (periods in local\n"
    "time). --keep-within keeps all taken within DURATION of the newest. --keep-tag keeps\n"
    "all with the tag. A snapshot is kept if any rule keeps it; the rest are forgotten.\n"
    "Example: 30 nightly snapshots with --keep-last 3 --keep-daily 7 keep the 7 newest\n"
    "nights. A forget that would leave a series with no snapshot is refused unless\n"
    "--allow-empty-source is given.\n"
    "\nForgetting removes snapshots from the catalog and seals a forget record in the\n"
    "repository (so 'repair catalog' does not bring them back); it frees no space:\n"
    "'wanbackup prune' does. Takes the repository alone (waits for readers and writers\n"
    "up to --lock-wait). Snapshot numbers are never reused.\n"
    "\nLOST SNAPSHOTS: when a pack is gone, 'repair catalog' leaves out each snapshot with\n"
    "chunks in it, and prune refuses while their sealed records are there (the pack may be\n"
    "only away: put it back and repair, and they return). Once it is gone for good,\n"
    "'forget --lost N' gives snapshot N up: it seals a forget record for it, after which prune\n"
    "goes on and a repair no longer looks for it. --dry-run shows what is missing of each.\n"
    "When the pack that is gone held the snapshot's own record, nothing there names it:\n"
    "'repair catalog' records the packs the old catalog named and the records the newest\n"
    "head or this client knew that are missing, prune removes nothing while any is\n"
    "recorded, and 'forget --lost-packs' gives them up (a forget record names the records).\n"
    "\nEXAMPLES:\n"
    "  wanbackup forget --repo /backup/db --keep-last 7 --keep-daily 14 --keep-monthly 12\n"
    "  wanbackup forget --repo /backup/db --keep-within 30d --source /dev/vg0/db --dry-run\n"
    "  wanbackup forget --repo /backup/db 12 15 && wanbackup prune --repo /backup/db\n"
    "  wanbackup forget --repo /backup/db --lost 9 --dry-run";

}  // namespace

void RegisterForget(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ForgetCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "forget", "Remove snapshots by a retention policy (--keep-*) or by number");
  cmd->add_option("snapshot", opts->ids, "snapshot numbers to forget (instead of --keep-* rules)");
  AddRetentionFlags(cmd, opts.get());
  cmd->add_option("--source", opts->source,
                  "apply the rules to this source only (the same LUN or file however "
                  "'wanbackup snapshots' spells it)");
  cmd->add_option("--group-by", opts->group_by_text,
                  "which snapshots form one series the rules apply to: a comma-separated mix "
                  "of source, tag and job, or \"\" for one series of all")
      ->capture_default_str();
  cmd->add_flag("--allow-empty-source", opts->allow_empty_source,
                "allow forgetting every snapshot of a source (refused otherwise)");
  cmd->add_flag("--lost", opts->lost,
                "give up the numbered snapshots that 'repair catalog' left out because chunks of "
                "them are gone from the packs for good (prune refuses until then)");
  cmd->add_flag("--lost-packs", opts->lost_packs,
                "give up the packs 'repair catalog --allow-missing-packs' found missing, once "
                "they are gone for good (prune refuses until then)");
  cmd->add_flag("-n,--dry-run", opts->dry_run,
                "print what would be kept and forgotten; change "
                "nothing");
  cmd->add_flag("--json", opts->json, "print the decisions as JSON");
  AddRepoFlags(cmd, &opts->repo);
  cmd->footer(kForgetFooter);
  cmd->callback([opts, runner] { *runner = [opts] { return RunForget(*opts); }; });
}

}  // namespace wanbackup::cli
