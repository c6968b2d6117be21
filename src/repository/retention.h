// Retention policy: which snapshots of one source `wanbackup forget` keeps. Pure functions over
// snapshot metadata; thread-safe. The rules are restic's and borg's (docs/operations.md,
// "Retention"):
//
//   keep_last N      the N newest snapshots
//   keep_hourly N    the newest snapshot of each of the N newest hours that have one
//   keep_daily N     ... of each of the N newest days (likewise weekly: ISO weeks, monthly,
//                    yearly), in local time
//   keep_within D    every snapshot taken within D of the newest one
//   keep_tags        every snapshot with one of these tags
//
// A snapshot is kept when any rule keeps it; the rest are forgotten. Times are the snapshots'
// start times.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"

namespace wanbackup::pipeline {

struct RetentionPolicy {
  int keep_last = 0;
  int keep_hourly = 0;
  int keep_daily = 0;
  int keep_weekly = 0;
  int keep_monthly = 0;
  int keep_yearly = 0;
  std::chrono::milliseconds keep_within{0};
  std::vector<std::string> keep_tags;
  bool empty() const {
    return keep_last == 0 && keep_hourly == 0 && keep_daily == 0 && keep_weekly == 0 &&
           keep_monthly == 0 && keep_yearly == 0 && keep_within.count() == 0 && keep_tags.empty();
  }
};

struct RetentionDecision {
  catalog::SnapshotInfo snapshot;
  bool keep = false;
  std::vector<std::string> reasons;  // "last", "daily", "within 7d", "tag nightly" ...
};

// InvalidArgument for an empty tag to keep: it would keep every untagged snapshot, and
// retention would never forget one (round 9, Z2).
Status CheckKeepTags(const std::vector<std::string>& tags);

// The decisions for the snapshots of one source, newest first. REQUIRES: !policy.empty().
std::vector<RetentionDecision> ApplyRetention(std::vector<catalog::SnapshotInfo> snapshots,
                                              const RetentionPolicy& policy);

// Which snapshots form one series that the rules are applied to (forget --group-by, as restic's):
// those of one source (by identity: one LUN however its portal is spelled, one file or device
// however its path is), one tag, one job, or any mix; none of them: every snapshot is one series.
struct GroupBy {
  bool source = true;
  bool tag = true;
  bool job = false;
};
// "source,tag" (the default), "source", "tag", "job", "" (one group), or any comma-separated
// mix; InvalidArgument names a word that is none of these.
Result<GroupBy> ParseGroupBy(const std::string& text);

struct SnapshotGroup {
  std::string source;  // the newest snapshot's source ("" when not grouped by source)
  std::string tag;     // "" when not grouped by tag
  std::string job;     // "" when not grouped by job
  std::vector<catalog::SnapshotInfo> snapshots;  // newest first
};
// The snapshots in their groups, ordered by (source identity, tag, job). `identity` gives a
// source's identity (jobs/source_identity.h; tests give their own).
std::vector<SnapshotGroup> GroupSnapshots(
    const std::vector<catalog::SnapshotInfo>& snapshots, const GroupBy& by,
    const std::function<std::string(const std::string& source)>& identity);

// "7d", "2w", "1y6m", "36h": years (365 days), months (30 days), weeks, days, hours, in that
// order, as restic's --keep-within takes them.
Result<std::chrono::milliseconds> ParseRetentionDuration(const std::string& text);

}  // namespace wanbackup::pipeline
