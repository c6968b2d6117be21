#include "repository/retention.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <tuple>

#include "common/text.h"

namespace wanbackup::pipeline {
namespace {

// The period a snapshot falls in, for a bucket rule, as text that differs between periods.
std::string Period(int64_t unix_ms, const char* format) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

bool NewerFirst(const catalog::SnapshotInfo& a, const catalog::SnapshotInfo& b) {
  return a.started_unix_ms != b.started_unix_ms ? a.started_unix_ms > b.started_unix_ms
                                                : a.id > b.id;
}

}  // namespace

Result<GroupBy> ParseGroupBy(const std::string& text) {
  GroupBy by{false, false, false};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string word = text.substr(start, comma - start);
    word.erase(0, word.find_first_not_of(" \t"));
    word.erase(word.find_last_not_of(" \t") + 1);
    if (word == "source") {
      by.source = true;
    } else if (word == "tag") {
      by.tag = true;
    } else if (word == "job") {
      by.job = true;
    } else if (!word.empty() || text.find(',') != std::string::npos) {
      return Status::InvalidArgument("--group-by: '" + word +
                                     "' is not source, tag or job (give a comma-separated "
                                     "list of them, or \"\" for one group)");
    }
    start = comma + 1;
  }
  return by;
}

std::vector<SnapshotGroup> GroupSnapshots(
    const std::vector<catalog::SnapshotInfo>& snapshots, const GroupBy& by,
    const std::function<std::string(const std::string& source)>& identity) {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, SnapshotGroup> groups;
  for (const catalog::SnapshotInfo& s : snapshots) {
    const Key key{by.source ? identity(s.source) : "", by.tag ? s.tag : "", by.job ? s.job : ""};
    SnapshotGroup& g = groups[key];
    g.tag = std::get<1>(key);
    g.job = std::get<2>(key);
    g.snapshots.push_back(s);
  }
  std::vector<SnapshotGroup> out;
  for (auto& [key, g] : groups) {
    std::sort(g.snapshots.begin(), g.snapshots.end(), NewerFirst);
    if (by.source) g.source = g.snapshots.front().source;
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<RetentionDecision> ApplyRetention(std::vector<catalog::SnapshotInfo> snapshots,
                                              const RetentionPolicy& policy) {
  std::sort(snapshots.begin(), snapshots.end(), NewerFirst);
  std::vector<RetentionDecision> out;
  for (const catalog::SnapshotInfo& s : snapshots)
    out.push_back(RetentionDecision{s, false, {}});
  auto keep = [](RetentionDecision& d, const std::string& why) {
    d.keep = true;
    d.reasons.push_back(why);
  };
  for (size_t i = 0; i < out.size() && static_cast<int>(i) < policy.keep_last; ++i)
    keep(out[i], "last");
  struct Bucket {
    int count;
    const char* format;
    const char* name;
  };
  const Bucket buckets[] = {{policy.keep_hourly, "%Y-%m-%d %H", "hourly"},
                            {policy.keep_daily, "%Y-%m-%d", "daily"},
                            {policy.keep_weekly, "%G-W%V", "weekly"},
                            {policy.keep_monthly, "%Y-%m", "monthly"},
                            {policy.keep_yearly, "%Y", "yearly"}};
  for (const Bucket& b : buckets) {
    int kept = 0;
    std::string last;
    for (RetentionDecision& d : out) {
      if (kept >= b.count) break;
      const std::string period = Period(d.snapshot.started_unix_ms, b.format);
      if (period == last) continue;  // an older snapshot of a period already kept
      last = period;
      keep(d, std::string(b.name) + " " + period);
      ++kept;
    }
  }
  if (policy.keep_within.count() > 0 && !out.empty()) {
    const int64_t newest = out.front().snapshot.started_unix_ms;
    for (RetentionDecision& d : out) {
      if (d.snapshot.started_unix_ms >= newest - policy.keep_within.count()) keep(d, "within");
    }
  }
  for (RetentionDecision& d : out) {
    for (const std::string& tag : policy.keep_tags) {
      if (d.snapshot.tag == tag) keep(d, "tag " + tag);
    }
  }
  return out;
}

Status CheckKeepTags(const std::vector<std::string>& tags) {
  for (const std::string& tag : tags) {
    if (tag.empty()) {
      return Status::InvalidArgument(
          "an empty tag to keep would keep every snapshot without a tag, and forget none of "
          "them; name the tag to keep");
    }
    // A tag no snapshot can have been given (snapshot --tag refuses it) keeps nothing, and its
    // snapshots would go (round 11, AB4: keep_tags = [" a"] forgot those tagged "a").
    if (HasEdgeSpace(tag) || FirstInvisibleCharacter(tag)) {
      return Status::InvalidArgument("the tag to keep '" + EscapeForTerminal(tag) +
                                     "' has white space at an end or a character that shows as "
                                     "nothing, which no tag may have; name the tag as it is");
    }
  }
  return Status::Ok();
}

Result<std::chrono::milliseconds> ParseRetentionDuration(const std::string& text) {
  constexpr int64_t kHour = int64_t{3600} * 1000;
  const std::string units = "ymwdh";
  const int64_t scale[] = {int64_t{365} * 24 * kHour, int64_t{30} * 24 * kHour,
                           int64_t{7} * 24 * kHour, int64_t{24} * kHour, kHour};
  int64_t total = 0;
  size_t next_unit = 0;
  size_t i = 0;
  auto bad = [&] {
    return Status::InvalidArgument("'" + text +
                                   "' is not a retention duration (e.g. 7d, 2w, 1y6m, 36h)");
  };
  if (text.empty()) return bad();
  while (i < text.size()) {
    size_t digits = i;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
      ++digits;
    if (digits == i || digits == text.size() || digits - i > 6) return bad();
    const size_t unit = units.find(text[digits]);
    if (unit == std::string::npos || unit < next_unit) return bad();
    total += std::stoll(text.substr(i, digits - i)) * scale[unit];
    next_unit = unit + 1;
    i = digits + 1;
  }
  if (total <= 0) return bad();
  return std::chrono::milliseconds(total);
}

}  // namespace wanbackup::pipeline
