#include "repository/prune_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/units.h"

namespace wanbackup::pipeline {

Result<UnusedLimit> ParseUnusedLimit(const std::string& text) {
  UnusedLimit limit;
  if (text == "unlimited") {
    limit.kind = UnusedLimit::Kind::kUnlimited;
    return limit;
  }
  const auto bad = [&] {
    return Status::InvalidArgument("'" + text +
                                   "' is not a share (5%), a size (200M) or 'unlimited'");
  };
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    const double pct = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() - 1 || !std::isfinite(pct) || pct < 0 || pct >= 100) {
      return bad();
    }
    limit.kind = UnusedLimit::Kind::kShare;
    limit.share = pct / 100;
    return limit;
  }
  Result<uint64_t> bytes = ParseSize(text);
  if (!bytes.ok()) return bad();
  limit.kind = UnusedLimit::Kind::kBytes;
  limit.bytes = *bytes;
  return limit;
}

PrunePlan PlanPrune(const std::vector<PackUsage>& packs, const UnusedLimit& limit) {
  PrunePlan plan;
  uint64_t live = 0;
  std::vector<PackUsage> candidates;
  for (const PackUsage& p : packs) {
    plan.total_bytes += p.size;
    plan.unused_bytes += p.unused();
    if (p.live_records == 0) {
      plan.remove.push_back(p.pack_id);
      plan.freed_bytes += p.size;
      continue;
    }
    live += p.live_bytes;
    if (p.unused() > 0) candidates.push_back(p);
    plan.unused_after += p.unused();
  }
  // Unused bytes allowed to stay: a share s of the repository after prune means
  // unused <= s * (live + unused), i.e. unused <= live * s / (1 - s).
  uint64_t allowed = std::numeric_limits<uint64_t>::max();
  if (limit.kind == UnusedLimit::Kind::kBytes) allowed = limit.bytes;
  if (limit.kind == UnusedLimit::Kind::kShare) {
    allowed = static_cast<uint64_t>(static_cast<double>(live) * limit.share / (1 - limit.share));
  }
  // Emptiest first (the most freed per byte copied).
  std::sort(candidates.begin(), candidates.end(), [](const PackUsage& a, const PackUsage& b) {
    const double ua = static_cast<double>(a.unused()) / static_cast<double>(a.size);
    const double ub = static_cast<double>(b.unused()) / static_cast<double>(b.size);
    if (ua != ub) return ua > ub;
    return a.pack_id < b.pack_id;
  });
  for (const PackUsage& p : candidates) {
    if (plan.unused_after <= allowed) break;
    plan.rewrite.push_back(p.pack_id);
    plan.copy_bytes += p.live_bytes;
    plan.freed_bytes += p.unused();
    plan.unused_after -= p.unused();
  }
  return plan;
}

}  // namespace wanbackup::pipeline
