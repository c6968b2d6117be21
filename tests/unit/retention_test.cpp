// Retention rules (repository/retention.h) and prune's pack choice (repository/prune_plan.h): pure
// functions, checked on made-up snapshots and packs.
#include "repository/retention.h"

#include <cstdlib>
#include <set>

#include <catch2/catch.hpp>

#include "repository/prune_plan.h"

using wanbackup::catalog::SnapshotInfo;
using wanbackup::pipeline::ApplyRetention;
using wanbackup::pipeline::PackUsage;
using wanbackup::pipeline::ParseRetentionDuration;
using wanbackup::pipeline::ParseUnusedLimit;
using wanbackup::pipeline::PlanPrune;
using wanbackup::pipeline::RetentionPolicy;
using wanbackup::pipeline::UnusedLimit;

namespace {

constexpr int64_t kHourMs = 3600 * 1000;
// 2023-11-14 00:00:00 UTC.
constexpr int64_t kMidnight = int64_t{1699920000} * 1000;

// Snapshot i (1-based) taken `step_hours` after the one before, from 01:00 on kMidnight's day.
std::vector<SnapshotInfo> Snapshots(int count, int step_hours) {
  std::vector<SnapshotInfo> out;
  for (int i = 1; i <= count; ++i) {
    SnapshotInfo s;
    s.id = i;
    s.source = "a.img";
    s.started_unix_ms = kMidnight + kHourMs + (i - 1) * step_hours * kHourMs;
    out.push_back(s);
  }
  return out;
}

std::set<int64_t> Kept(const std::vector<SnapshotInfo>& snaps, const RetentionPolicy& p) {
  std::set<int64_t> kept;
  for (const auto& d : ApplyRetention(snaps, p)) {
    if (d.keep) kept.insert(d.snapshot.id);
  }
  return kept;
}

struct UtcZone {
  UtcZone() {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};

}  // namespace

TEST_CASE("retention: keep-last keeps the newest N whatever their times", "[retention]") {
  UtcZone utc;
  RetentionPolicy p;
  p.keep_last = 3;
  CHECK(Kept(Snapshots(10, 8), p) == std::set<int64_t>{8, 9, 10});
  p.keep_last = 20;
  CHECK(Kept(Snapshots(4, 8), p).size() == 4);
}

TEST_CASE("retention: keep-daily keeps the newest snapshot of each of the N newest days",
          "[retention]") {
  UtcZone utc;
  RetentionPolicy p;
  p.keep_daily = 7;
  // Three a day (01:00, 09:00, 17:00) for ten days: the 17:00 one of the last seven days.
  CHECK(Kept(Snapshots(30, 8), p) == std::set<int64_t>{12, 15, 18, 21, 24, 27, 30});
  p.keep_last = 3;
  CHECK(Kept(Snapshots(30, 8), p) == std::set<int64_t>{12, 15, 18, 21, 24, 27, 28, 29, 30});
}

TEST_CASE("retention: a period without snapshots does not count toward N", "[retention]") {
  UtcZone utc;
  auto snaps = Snapshots(5, 24);                  // one a day
  snaps[1].started_unix_ms += 24 * kHourMs * 30;  // snapshot 2 moves a month later: the newest
  RetentionPolicy p;
  p.keep_daily = 2;
  CHECK(Kept(snaps, p) == std::set<int64_t>{2, 5});
}

TEST_CASE("retention: weekly, monthly and yearly keep the newest of each period", "[retention]") {
  UtcZone utc;
  auto snaps = Snapshots(60, 24);  // 2023-11-14 .. 2024-01-12, daily
  RetentionPolicy p;
  p.keep_monthly = 2;
  CHECK(Kept(snaps, p) == std::set<int64_t>{48, 60});  // 2023-12-31 and the newest
  p = RetentionPolicy{};
  p.keep_yearly = 5;
  CHECK(Kept(snaps, p) == std::set<int64_t>{48, 60});
  p = RetentionPolicy{};
  p.keep_weekly = 1;
  CHECK(Kept(snaps, p) == std::set<int64_t>{60});
}

TEST_CASE("retention: keep-within counts back from the newest snapshot, keep-tag by tag",
          "[retention]") {
  UtcZone utc;
  auto snaps = Snapshots(10, 24);
  snaps[2].tag = "monthly";
  RetentionPolicy p;
  p.keep_within = ParseRetentionDuration("2d").value();
  CHECK(Kept(snaps, p) == std::set<int64_t>{8, 9, 10});
  p.keep_tags = {"monthly"};
  CHECK(Kept(snaps, p) == std::set<int64_t>{3, 8, 9, 10});
}

TEST_CASE("retention: durations read as restic's and bad ones are refused", "[retention]") {
  using std::chrono::hours;
  CHECK(ParseRetentionDuration("36h").value() == hours(36));
  CHECK(ParseRetentionDuration("2w").value() == hours(14 * 24));
  CHECK(ParseRetentionDuration("1y6m").value() == hours((365 + 180) * 24));
  for (const char* bad : {"", "7", "d", "7x", "6m1y", "-1d", "0d"})
    CHECK_FALSE(ParseRetentionDuration(bad).ok());
}

TEST_CASE("prune plan: packs with nothing live are removed, not copied", "[prune]") {
  const auto plan = PlanPrune({{1, 1000, 0, 0}, {2, 1000, 1000, 10}}, UnusedLimit{});
  CHECK(plan.remove == std::vector<int64_t>{1});
  CHECK(plan.rewrite.empty());
  CHECK(plan.freed_bytes == 1000);
  CHECK(plan.copy_bytes == 0);
}

TEST_CASE("prune plan: the emptiest packs are rewritten until unused space is within the limit",
          "[prune]") {
  // 100 live bytes in each; unused 900, 500, 50 and 0.
  std::vector<PackUsage> packs = {
      {1, 600, 100, 1}, {2, 1000, 100, 1}, {3, 150, 100, 1}, {4, 100, 100, 1}};
  const auto five = PlanPrune(packs, ParseUnusedLimit("5%").value());
  // Live 400: 5 % allows 21 unused bytes, so pack 3 (50 unused) goes too, emptiest first.
  CHECK(five.rewrite == std::vector<int64_t>{2, 1, 3});
  CHECK(five.unused_after == 0);
  const auto loose = PlanPrune(packs, ParseUnusedLimit("50%").value());
  CHECK(loose.rewrite == std::vector<int64_t>{2, 1});  // 400 unused allowed: 50 left
  CHECK(loose.unused_after == 50);
  CHECK(PlanPrune(packs, ParseUnusedLimit("unlimited").value()).rewrite.empty());
  CHECK(PlanPrune(packs, ParseUnusedLimit("600").value()).rewrite == std::vector<int64_t>{2});
}

TEST_CASE("prune plan: --max-unused takes shares, sizes and 'unlimited' and refuses the rest",
          "[prune]") {
  CHECK(ParseUnusedLimit("5%").value().share == Approx(0.05));
  CHECK(ParseUnusedLimit("0").value().bytes == 0);
  CHECK(ParseUnusedLimit("200M").value().bytes == 200u << 20);
  for (const char* bad : {"", "100%", "-1%", "five", "5%%"})
    CHECK_FALSE(ParseUnusedLimit(bad).ok());
}

namespace {

SnapshotInfo SeriesSnap(int64_t id, const std::string& source, const std::string& tag,
                        const std::string& job = "") {
  SnapshotInfo s;
  s.id = id;
  s.source = source;
  s.tag = tag;
  s.job = job;
  s.started_unix_ms = kMidnight + id * kHourMs;
  return s;
}

std::vector<std::vector<int64_t>> GroupIds(const std::vector<SnapshotInfo>& snaps,
                                           const wanbackup::pipeline::GroupBy& by) {
  // The identity of a source: what follows the portal of a URL (the test's stand-in).
  auto identity = [](const std::string& source) { return source.substr(source.rfind('/') + 1); };
  std::vector<std::vector<int64_t>> out;
  for (const auto& g : wanbackup::pipeline::GroupSnapshots(snaps, by, identity)) {
    std::vector<int64_t> ids;
    for (const SnapshotInfo& s : g.snapshots)
      ids.push_back(s.id);
    out.push_back(ids);
  }
  return out;
}

}  // namespace

TEST_CASE("retention: snapshots are grouped by source identity and tag unless told otherwise",
          "[retention]") {
  using wanbackup::pipeline::ParseGroupBy;
  const std::vector<SnapshotInfo> snaps = {SeriesSnap(1, "iscsi://localhost/1", "hourly", "a"),
                                           SeriesSnap(2, "iscsi://127.0.0.1/1", "hourly", "a"),
                                           SeriesSnap(3, "iscsi://localhost/1", "monthly", "b"),
                                           SeriesSnap(4, "iscsi://localhost/2", "hourly", "a"),
                                           SeriesSnap(5, "iscsi://localhost/1", "hourly", "")};
  const auto by_default = ParseGroupBy("source,tag").value();
  CHECK(GroupIds(snaps, by_default) ==
        std::vector<std::vector<int64_t>>{{5, 2, 1}, {3}, {4}});  // newest first, groups by key
  CHECK(GroupIds(snaps, ParseGroupBy("source").value()) ==
        std::vector<std::vector<int64_t>>{{5, 3, 2, 1}, {4}});
  CHECK(GroupIds(snaps, ParseGroupBy("tag").value()) ==
        std::vector<std::vector<int64_t>>{{5, 4, 2, 1}, {3}});
  CHECK(GroupIds(snaps, ParseGroupBy("job").value()) ==
        std::vector<std::vector<int64_t>>{{5}, {4, 2, 1}, {3}});
  CHECK(GroupIds(snaps, ParseGroupBy("").value()) ==
        std::vector<std::vector<int64_t>>{{5, 4, 3, 2, 1}});
  CHECK(ParseGroupBy(" job , source ").ok());
  CHECK(ParseGroupBy("host").status().message().find("'host'") != std::string::npos);
  CHECK(ParseGroupBy("source,source").ok());
}
