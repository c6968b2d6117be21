// Prune's choice of packs (pure; thread-safe): which packs hold nothing live and are removed
// whole, and which are rewritten because too much of them is unused. Like restic, unused space
// is tolerated up to a limit (`--max-unused`, default 5 % of the repository): packs are
// rewritten, emptiest first, until the unused bytes left are within it, so a prune copies
// little when little was freed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup::pipeline {

struct PackUsage {
  int64_t pack_id = 0;
  uint64_t size = 0;        // bytes the pack takes in the store
  uint64_t live_bytes = 0;  // of records some snapshot still needs (headers included)
  uint64_t live_records = 0;
  uint64_t unused() const { return size > live_bytes ? size - live_bytes : 0; }
};

// How much unused space prune may leave.
struct UnusedLimit {
  enum class Kind { kShare, kBytes, kUnlimited } kind = Kind::kShare;
  double share = 0.05;  // kShare: of the repository's size after prune
  uint64_t bytes = 0;   // kBytes
};
// "5%", "0.5%", "0" (rewrite every pack with anything unused), "200M", "unlimited".
Result<UnusedLimit> ParseUnusedLimit(const std::string& text);

struct PrunePlan {
  std::vector<int64_t> remove;   // nothing live: removed without copying
  std::vector<int64_t> rewrite;  // live records copied to new packs, then removed
  uint64_t total_bytes = 0;      // all packs
  uint64_t unused_bytes = 0;     // all packs
  uint64_t copy_bytes = 0;       // live bytes of the packs to rewrite
  uint64_t freed_bytes = 0;      // unused bytes of the packs removed or rewritten
  uint64_t unused_after = 0;     // unused bytes left in the packs kept
};

PrunePlan PlanPrune(const std::vector<PackUsage>& packs, const UnusedLimit& limit);

}  // namespace wanbackup::pipeline
